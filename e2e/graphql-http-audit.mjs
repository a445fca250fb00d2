// Runs the MUST audits of the graphql-http package's serverAudits (GraphQL over HTTP
// conformance) against one GraphQL endpoint of the service, with a fetch that adds the API key.
//
// Env: GRAPHQL_URL (e.g. http://127.0.0.1:9090/graphql), API_KEY_HEADER, API_KEY.
// Prints one line per audit and a closing "N passed, N failed"; exits non-zero on any failure
// of a MUST audit. SHOULD/MAY audits are reported but do not fail the run.
import { serverAudits } from 'graphql-http';

const url = process.env.GRAPHQL_URL;
const header = process.env.API_KEY_HEADER || 'x-api-key';
const key = process.env.API_KEY;
if (!url || !key) {
  console.error('GRAPHQL_URL and API_KEY are required');
  process.exit(2);
}

const fetchWithKey = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set(header, key);
  return fetch(input, { ...init, headers });
};

let passed = 0;
let failed = 0;
for (const audit of serverAudits({ url, fetchFn: fetchWithKey })) {
  const must = audit.name.startsWith('MUST');
  const result = await audit.fn();
  if (result.status === 'ok') {
    if (must) passed++;
    console.log(`ok    ${audit.id} ${audit.name}`);
  } else if (must) {
    failed++;
    console.log(`FAIL  ${audit.id} ${audit.name}: ${result.reason}`);
    if (result.response) {
      const body = await result.response.text().catch(() => '');
      console.log(`      status ${result.response.status} ${result.response.headers.get('content-type')} ${body.slice(0, 300)}`);
    }
  } else {
    console.log(`${result.status.padEnd(5)} ${audit.id} ${audit.name}: ${result.reason}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
