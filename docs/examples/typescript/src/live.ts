// Follows a live answer of the /graphql endpoint over GraphQL over Server-Sent Events (the
// graphql-sse client, distinct connections mode: one POST with Accept: text/event-stream per
// subscription) and prints the first answers: the current one at once, then each new one that a
// load of the data brings.
//
// The document is src/live.graphql; its result and variable types come from the endpoint's SDL
// file (schema/graphql/public.graphql) through graphql-codegen, so a field the endpoint lacks,
// or a wrong argument, fails `npm run codegen`, and a wrong use of the answer fails `tsc`.
//
//   npm ci && npm run codegen && npm run build
//   EMSQUERY_API_KEY=$(cat ../../../.demo/api-key) node dist/live.js 2025-01-01 2025-03-31 [ANSWERS]
//
// Env: GRAPHQL_URL (default http://127.0.0.1:9090/graphql), EMSQUERY_API_KEY,
// API_KEY_HEADER (default x-api-key). ANSWERS (default 2) is how many answers to print before
// leaving; 0 follows until the service ends the stream.
import { print } from 'graphql';
import { createClient, type ExecutionResult } from 'graphql-sse';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';

import { MonthlyMissionsDocument } from './generated/graphql.js';

const env = process.env;
const [start, end, answers = '2'] = process.argv.slice(2);
const key = env.EMSQUERY_API_KEY;
if (!start || !end || !key) {
  console.error('usage: EMSQUERY_API_KEY=<key> node dist/live.js START_DATE END_DATE [ANSWERS]');
  process.exit(2);
}
const wanted = Number(answers);

const client = createClient({
  url: env.GRAPHQL_URL ?? 'http://127.0.0.1:9090/graphql',
  headers: { [env.API_KEY_HEADER ?? 'x-api-key']: key },
  // The service speaks the distinct connections mode (the client's default, said here so that
  // nobody turns it into the single connection mode, which the service does not serve).
  singleConnection: false,
  // A refusal (401, 403, 429) is reported at once instead of being retried with back-off.
  retryAttempts: 0,
});

// follow subscribes to a typed document: each answer has the document's result type.
function follow<Data, Variables extends Record<string, unknown>>(
  doc: TypedDocumentNode<Data, Variables>,
  variables: Variables,
): AsyncIterableIterator<ExecutionResult<Data, unknown>> {
  return client.iterate<Data>({ query: print(doc), variables });
}

let n = 0;
try {
  for await (const answer of follow(MonthlyMissionsDocument, { start, end })) {
    if (answer.errors?.length || !answer.data) {
      throw new Error(`answer with errors: ${JSON.stringify(answer.errors)}`);
    }
    const months = answer.data.record_series;
    const total = months.reduce((sum, m) => sum + m.count, 0);
    n++;
    console.log(`answer ${n}: ${months.map((m) => `${m.bucket} ${m.count}`).join(', ')} (${total} records)`);
    if (n === wanted) {
      break; // leaving the loop ends the subscription: the client closes its request
    }
  }
} catch (err) {
  console.error(err instanceof Error ? err.message : JSON.stringify(err));
  process.exitCode = 1;
} finally {
  client.dispose();
}
