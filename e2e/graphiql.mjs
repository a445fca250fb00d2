// Drives the service's GraphiQL page in Debian's headless Chromium the way a person would: open
// the page, type the API key into the headers editor, type a query, press run, and wait for the
// expected text in the result pane. Meant to be run by a Go test against a live service.
//
// Environment:
//   GRAPHIQL_URL    page URL, on a loopback host (required), e.g. http://127.0.0.1:8080/graphql
//   QUERY           GraphQL query typed into the query editor (required)
//   EXPECT          substring expected in the result pane (required); GraphiQL pretty-prints
//                   the JSON response with two-space indents, e.g. "count": 42
//   API_KEY_HEADER  API-key header name (default x-api-key); the headers editor must start as
//                   {"<API_KEY_HEADER>": ""}
//   API_KEY         key typed into the headers editor (default empty)
//   SCREENSHOT      PNG path to save a screenshot to, on success and on failure (optional)
//   CHROMIUM        browser binary (default /usr/bin/chromium)
//   TIMEOUT_MS      bound on the whole run (default 60000)
//   STEPS_ON_STDIN  when 1, for a subscription: once EXPECT is shown, print "seen: <EXPECT as
//                   JSON>" and read steps from stdin, one JSON object a line, until it closes:
//                     {"expect": "text"}  wait for the text in the result pane (a later answer
//                                         of the stream), then print "seen: <text as JSON>"
//                     {"stop": true}      press the stop button, wait for the run button to be
//                                         back, then print "stopped"
//                   While the stream is on, the run button must read "Stop" (GraphiQL sees a
//                   subscription, not a query that has finished).
//
// Also checks that the headers editor starts as {"<API_KEY_HEADER>": ""} and that the key is
// not left in localStorage. Prints "1 passed, 0 failed" and exits 0, or the reason and
// "0 passed, 1 failed" and exits 1. Run it from any folder:
//   (cd e2e && npm install --ignore-scripts) && GRAPHIQL_URL=... QUERY=... EXPECT=... node e2e/graphiql.mjs
// Every request to a host other than localhost/127.0.0.0/8/[::1] is aborted and fails the run:
// the page must work in a closed network, so it may not load anything from outside.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const env = process.env;
const url = env.GRAPHIQL_URL || '';
const query = env.QUERY || '';
const expect = env.EXPECT || '';
const headerName = env.API_KEY_HEADER || 'x-api-key';
const apiKey = env.API_KEY || '';
const screenshot = env.SCREENSHOT || '';
const executablePath = env.CHROMIUM || '/usr/bin/chromium';
const totalTimeout = Number(env.TIMEOUT_MS || 60000);
const stepsOnStdin = env.STEPS_ON_STDIN === '1';
// Each step gets at most half the budget, so a stuck step reports itself, not the watchdog.
const stepTimeout = Math.min(20000, Math.floor(totalTimeout / 2));

// The key may be a real one: never print it.
const mask = (s) => (apiKey ? String(s).split(apiKey).join('***') : String(s));

function finish(ok, reason) {
  if (ok) {
    console.log('1 passed, 0 failed');
    process.exit(0);
  }
  console.log(`FAIL graphiql: ${mask(reason)}`);
  console.log('0 passed, 1 failed');
  process.exit(1);
}

function isLoopback(raw) {
  let u;
  try {
    u = new URL(raw);
  } catch {
    return false;
  }
  // Not network requests at all.
  if (u.protocol === 'data:' || u.protocol === 'blob:' || u.protocol === 'about:') return true;
  if (!['http:', 'https:', 'ws:', 'wss:'].includes(u.protocol)) return false;
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

if (!url || !query || !expect) finish(false, 'GRAPHIQL_URL, QUERY and EXPECT must be set');
if (!isLoopback(url) || !/^https?:/.test(url)) finish(false, `GRAPHIQL_URL must be http(s) on a loopback host, got ${url}`);

// A stuck browser must not hang the Go test that runs this.
setTimeout(() => finish(false, `no result within TIMEOUT_MS=${totalTimeout}`), totalTimeout).unref();

const blocked = [];
const consoleErrors = [];
let browser;
let page;

async function readEditor(selector) {
  // The CodeMirror 5 instance hangs off its wrapper element; reading its value is exact, where
  // the DOM only holds the visible lines.
  return page.evaluate((sel) => {
    const el = document.querySelector(sel);
    if (!el) return null;
    return el.CodeMirror ? el.CodeMirror.getValue() : el.innerText;
  }, selector);
}

async function replaceEditorText(selector, text) {
  await page.locator(selector).click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.press('Backspace');
  // insertText sends one input event, as a paste would: typing key by key would trigger
  // GraphiQL's bracket auto-closing and autocomplete pop-ups and mangle the text.
  await page.keyboard.insertText(text);
  await page.keyboard.press('Escape');
}

const resultEditor = '.result-window .CodeMirror';
const executeButton = '.graphiql-execute-button';

async function waitForResult(want) {
  try {
    await page.waitForFunction(
      ({ sel, want }) => {
        const el = document.querySelector(sel);
        const text = el ? (el.CodeMirror ? el.CodeMirror.getValue() : el.innerText) : '';
        return text.includes(want);
      },
      { sel: resultEditor, want },
      { timeout: stepTimeout, polling: 100 },
    );
  } catch {
    const got = (await readEditor(resultEditor)) ?? '(no result pane)';
    throw new Error(`result pane never contained ${JSON.stringify(want)}; it shows: ${got.slice(0, 500)}`);
  }
}

async function executeButtonSays(word) {
  const label = (await page.locator(executeButton).getAttribute('aria-label')) || '';
  if (!label.startsWith(word)) throw new Error(`the run button says ${JSON.stringify(label)}, want ${word}`);
}

// The Go test drives the steps: it changes the data between them, and only it knows the answers.
async function runSteps() {
  await executeButtonSays('Stop');
  console.log(`seen: ${JSON.stringify(expect)}`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const step = JSON.parse(line);
    if (step.stop) {
      await page.locator(executeButton).click();
      await page.locator(`${executeButton}[aria-label^="Execute"]`).waitFor({ timeout: stepTimeout });
      console.log('stopped');
      continue;
    }
    await waitForResult(step.expect);
    await executeButtonSays('Stop');
    console.log(`seen: ${JSON.stringify(step.expect)}`);
  }
}

async function run() {
  browser = await chromium.launch({
    executablePath,
    headless: true,
    timeout: stepTimeout,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    // Second fence behind the request router below: anything that would still leave the machine
    // (browser-internal traffic the router does not see) goes to a closed local port instead.
    proxy: { server: 'http://127.0.0.1:9', bypass: 'localhost,127.0.0.1,[::1]' },
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, serviceWorkers: 'block' });
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (isLoopback(u)) return route.continue();
    blocked.push(u);
    return route.abort('blockedbyclient');
  });
  page = await context.newPage();
  page.on('websocket', (ws) => {
    if (!isLoopback(ws.url())) blocked.push(ws.url());
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(msg.text());
  });
  page.on('pageerror', (err) => consoleErrors.push(`uncaught: ${err.message}`));
  page.setDefaultTimeout(stepTimeout);

  const resp = await page.goto(url, { waitUntil: 'load', timeout: stepTimeout });
  if (!resp || resp.status() !== 200) throw new Error(`GET ${url}: status ${resp ? resp.status() : 'none'}`);
  const ctype = resp.headers()['content-type'] || '';
  if (!ctype.startsWith('text/html')) throw new Error(`GET ${url}: content-type ${ctype}, want text/html`);

  // Every asset has been requested by now: fail at once rather than after a timeout.
  if (blocked.length > 0) throw new Error('page load tried to reach outside');

  const queryEditor = '.graphiql-query-editor .CodeMirror';
  await page.locator(queryEditor).waitFor({ state: 'visible' });

  // Show the headers pane (the page opens it already; clicking is harmless) and check it starts
  // with the configured header and an empty key, as the contract asks.
  await page.locator('.graphiql-editor-tools button', { hasText: /^Headers$/ }).click();
  const headersEditor = '.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror';
  await page.locator(headersEditor).waitFor({ state: 'visible' });
  const initial = await readEditor(headersEditor);
  let initialJSON;
  try {
    initialJSON = JSON.parse(initial);
  } catch {
    throw new Error(`headers editor does not start with JSON: ${JSON.stringify(initial)}`);
  }
  if (JSON.stringify(initialJSON) !== JSON.stringify({ [headerName]: '' })) {
    throw new Error(`headers editor starts with ${JSON.stringify(initial)}, want {"${headerName}": ""}`);
  }

  const headersText = JSON.stringify({ [headerName]: apiKey });
  await replaceEditorText(headersEditor, headersText);
  const typedHeaders = await readEditor(headersEditor);
  if (typedHeaders !== headersText) throw new Error(`headers editor holds ${JSON.stringify(typedHeaders)} after typing`);

  await replaceEditorText(queryEditor, query);
  const typedQuery = await readEditor(queryEditor);
  if (typedQuery !== query) throw new Error(`query editor holds ${JSON.stringify(typedQuery)} after typing`);

  await page.locator(executeButton).click();

  await waitForResult(expect);
  if (stepsOnStdin) await runSteps();

  // The key must not be kept in the browser: GraphiQL writes its tabs and history to
  // localStorage (debounced by 500 ms), and the page is meant to strip headers from them.
  if (apiKey) {
    await page.waitForTimeout(800);
    const stored = await page.evaluate((key) => {
      const hits = [];
      for (let i = 0; i < localStorage.length; i++) {
        const k = localStorage.key(i);
        if ((localStorage.getItem(k) || '').includes(key)) hits.push(k);
      }
      return hits;
    }, apiKey);
    if (stored.length > 0) throw new Error(`the API key was saved in localStorage under ${stored.join(', ')}`);
  }
}

let failure = null;
try {
  await run();
} catch (err) {
  // Playwright's messages carry ANSI colours and a call log; keep the first line, plain.
  failure = (err && err.message ? err.message : String(err)).replace(/\x1b\[[0-9;]*m/g, '').split('\nCall log:')[0].trim();
}
if (screenshot && page) {
  try {
    await page.screenshot({ path: screenshot, fullPage: false });
  } catch (err) {
    console.log(`screenshot not saved: ${err.message}`);
  }
}
if (browser) await browser.close().catch(() => {});

if (blocked.length > 0) {
  failure = `the page tried to reach non-loopback addresses (blocked): ${[...new Set(blocked)].join(', ')}` + (failure ? `; also: ${failure}` : '');
}
if (consoleErrors.length > 0) {
  // Console errors explain most failures (a CSP refusal, a script that did not load); on
  // success they are still worth a look (a 401 while the key was still empty is expected).
  console.error(`browser console errors:\n  ${consoleErrors.slice(0, 20).map(mask).join('\n  ')}`);
}
finish(!failure, failure);
