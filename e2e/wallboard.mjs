// Opens docs/examples/wallboard.html in Debian's headless Chromium and follows its live answers:
// meant to be run by a Go test (app/wallboard_test.go) against a live service.
//
// Environment:
//   PAGE_URL     the page, on a loopback origin the service allows (CORS), with its fragment
//                (#api=...&key=...)
//   EXPECT       the records_count the page must show first
//   EXPECT_ROWS  text the urgency table must show first (its rows' text, tab-separated cells,
//                one row per line)
//   EXPECT_NEXT  the records_count the page must show after the test changed the data
//   CHROMIUM     browser binary (default /usr/bin/chromium)
//   TIMEOUT_MS   bound on the whole run (default 60000)
//
// Prints "first shown" once the first answers are on the page (the Go test then changes the
// data), then "1 passed, 0 failed" when the new count is shown, or the reason and "0 passed,
// 1 failed". Requests off the loopback host are aborted.
import { chromium } from 'playwright-core';

const env = process.env;
const timeout = Number(env.TIMEOUT_MS || 60000);
const key = new URLSearchParams((env.PAGE_URL || '').split('#')[1] || '').get('key') || '';
const mask = (s) => (key ? String(s).split(key).join('***') : String(s));

function finish(ok, reason) {
  if (!ok) console.log(`FAIL wallboard: ${mask(reason)}`);
  console.log(ok ? '1 passed, 0 failed' : '0 passed, 1 failed');
  process.exit(ok ? 0 : 1);
}
setTimeout(() => finish(false, `not done within TIMEOUT_MS=${timeout}`), timeout).unref();

const loopback = (raw) => {
  const u = new URL(raw);
  return ['data:', 'about:'].includes(u.protocol) || /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/.test(u.hostname);
};

async function waitText(page, selector, want, what) {
  await page.waitForFunction(([sel, w]) => document.querySelector(sel)?.innerText.trim() === w, [selector, want], { timeout: timeout / 2 })
    .catch(async () => {
      const got = await page.evaluate((sel) => document.querySelector(sel)?.innerText, selector);
      const status = await page.evaluate(() => document.getElementById('status')?.innerText);
      throw new Error(`${what}: want ${JSON.stringify(want)}, page shows ${JSON.stringify(got)} (status: ${status})`);
    });
}

try {
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  const context = await browser.newContext();
  await context.route('**/*', (route) => (loopback(route.request().url()) ? route.continue() : route.abort('blockedbyclient')));
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(env.PAGE_URL);
  await waitText(page, '#total', env.EXPECT, 'first records_count');
  await waitText(page, '#urgency', env.EXPECT_ROWS, 'first unique_counts');
  console.log('first shown');
  await waitText(page, '#total', env.EXPECT_NEXT, 'records_count after the change');
  if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`);
  await browser.close();
  finish(true);
} catch (e) {
  finish(false, e.message || e);
}
