// Subscribes to one of the service's live answers with the graphql-sse package's own client, in
// its "distinct connections" mode (one POST with Accept: text/event-stream per subscription),
// the mode the service serves. Meant to be run by a Go test, which reads the lines as they come.
//
// Env: GRAPHQL_URL (e.g. http://127.0.0.1:9090/graphql), API_KEY_HEADER (default x-api-key),
// API_KEY, QUERY (default: subscription { records_count { count } }), TIMEOUT_MS (default 120000).
//
// Prints one JSON line per sink callback, flushed as it happens:
//   {"next": <execution result>}
//   {"complete": true}                          the server ended the stream with event: complete
//   {"error": "<message>", "status": <HTTP status or null>}
// and exits 0 after complete or error (1 on the watchdog).
import { createClient } from 'graphql-sse';

const env = process.env;
const url = env.GRAPHQL_URL;
const header = env.API_KEY_HEADER || 'x-api-key';
const key = env.API_KEY || '';
const query = env.QUERY || 'subscription { records_count { count } }';
const timeout = Number(env.TIMEOUT_MS || 120000);
if (!url) {
  console.error('GRAPHQL_URL is required');
  process.exit(2);
}

// The key may be a real one: never print it.
const mask = (s) => (key ? String(s).split(key).join('***') : String(s));
const emit = (obj) => process.stdout.write(mask(JSON.stringify(obj)) + '\n');

setTimeout(() => {
  emit({ error: `watchdog: nothing ended the subscription within TIMEOUT_MS=${timeout}`, status: null });
  process.exit(1);
}, timeout).unref();

const client = createClient({
  url,
  headers: { [header]: key },
  singleConnection: false,
  // No retries: the client would otherwise retry a refusal or a stream cut without complete
  // (both are its NetworkError) with back-off, and the test would see neither as what it is.
  retryAttempts: 0,
});

await new Promise((resolve) => {
  client.subscribe(
    { query },
    {
      next: (result) => emit({ next: result }),
      complete: () => {
        emit({ complete: true });
        resolve();
      },
      error: (err) => {
        // A NetworkError carries the refused response; anything else is an Error, or (GraphQL
        // errors before the stream starts) an array of them.
        const message = err instanceof Error ? err.message : JSON.stringify(err);
        emit({ error: message, status: err && err.response ? err.response.status : null });
        resolve();
      },
    },
  );
});
client.dispose();
process.exit(0);
