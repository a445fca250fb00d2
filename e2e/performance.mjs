// Opens docs/examples/performance.html in Debian's headless Chromium and reports what its charts
// show: meant to be run by a Go test (systemtest/performance_test.go) against a live service, which
// compares each report with SQL.
//
// Environment:
//   PAGE_URL     the page, on a loopback origin the service allows (CORS), with its fragment
//                (#api=...&key=...&month=...)
//   CHROMIUM     browser binary (default /usr/bin/chromium)
//   TIMEOUT_MS   bound on the whole run (default 90000)
//   SCREENSHOT   when set, a PNG of the whole page is written there after the first report
//
// Prints "SHOWN <json>" each time what the charts show changes, once all four have been drawn:
// {heat: [[day_of_week, hour_of_day, count]...], turnout: [row...], travel: [row...],
// comparison: [row...]}, each value as the page's data-* attributes carry it. Exits when its
// standard input closes ("0 failed") or at the timeout, a page error or an error in the console
// ("1 failed"). Requests
// off the loopback host are aborted.
import { chromium } from 'playwright-core';

const env = process.env;
const timeout = Number(env.TIMEOUT_MS || 90000);
const key = new URLSearchParams((env.PAGE_URL || '').split('#')[1] || '').get('key') || '';
const mask = (s) => (key ? String(s).split(key).join('***') : String(s));

let browser, finished = false;
// finish reports once: closing the browser at the end fails the page reads still under way.
async function finish(ok, reason) {
  if (finished) return;
  finished = true;
  if (!ok) console.log(`FAIL performance: ${mask(reason)}`);
  console.log(ok ? '0 failed' : '1 failed');
  await browser?.close().catch(() => {});
  process.exit(ok ? 0 : 1);
}
setTimeout(() => finish(false, `not done within TIMEOUT_MS=${timeout}`), timeout).unref();

const loopback = (raw) => {
  const u = new URL(raw);
  return ['data:', 'about:'].includes(u.protocol) || /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/.test(u.hostname);
};

// What the charts show, read from the page's elements (null until all four are drawn).
function extract() {
  const num = (v) => (v === undefined || v === '' ? null : Number(v));
  const heat = [...document.querySelectorAll('#heat rect.cell')].map((e) => [num(e.dataset.dow), num(e.dataset.hour), num(e.dataset.count)]);
  const interval = (id) => [...document.querySelectorAll(`#${id} g.row`)].map((e) => ({
    station: e.dataset.station ?? null, count: num(e.dataset.count), measured: num(e.dataset.measured),
    fractile: num(e.dataset.fractile), within: num(e.dataset.within), share: num(e.dataset.share),
    ci_low: num(e.dataset.ciLow), ci_high: num(e.dataset.ciHigh),
  }));
  const comparison = [...document.querySelectorAll('#comparison tbody tr')].map((e) => ({
    station: e.dataset.noStation ? null : e.dataset.station, previous: num(e.dataset.previous), current: num(e.dataset.current),
    change: num(e.dataset.change), change_ratio: num(e.dataset.changeRatio),
    previous_fractile: num(e.dataset.previousFractile), current_fractile: num(e.dataset.currentFractile),
  }));
  const out = { heat, turnout: interval('turnout'), travel: interval('travel'), comparison };
  return heat.length && out.turnout.length && out.travel.length && comparison.length ? out : null;
}

try {
  browser = await chromium.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  const context = await browser.newContext({ viewport: { width: 1340, height: 900 } });
  await context.route('**/*', (route) => (loopback(route.request().url()) ? route.continue() : route.abort('blockedbyclient')));
  const page = await context.newPage();
  page.on('pageerror', (e) => finish(false, `page error: ${e}`));
  page.on('console', (m) => { if (m.type() === 'error') finish(false, `console error: ${m.text()}`); });
  process.stdin.on('end', () => finish(true)).resume();
  await page.goto(env.PAGE_URL);
  let last = '', lastStatus = '';
  for (;;) {
    const shown = await page.evaluate(extract);
    const text = shown && JSON.stringify(shown);
    if (text && text !== last) {
      if (!last && env.SCREENSHOT) await page.screenshot({ path: env.SCREENSHOT, fullPage: true });
      console.log(`SHOWN ${text}`);
      last = text;
    }
    if (!shown) {
      const status = await page.evaluate(() => document.getElementById('status')?.innerText);
      if (status !== lastStatus && /error|HTTP|ended/.test(status || '')) console.log(`STATUS ${mask(status)}`);
      lastStatus = status;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
} catch (e) {
  await finish(false, e.message || e);
}
