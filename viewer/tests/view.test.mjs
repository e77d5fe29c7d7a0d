// The viewer served by `coz view --analysis realistic.json`: plots, sorting,
// filters, progress points, source snippets, and what the server refuses.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch, newPage, cozView, rawGet, cardLines, waitForCards, artifact, FIXTURES } from './helpers.mjs';

const FIXTURE = join(FIXTURES, 'realistic.json');
const analysis = JSON.parse(readFileSync(FIXTURE, 'utf8'));
const linesOf = (point) => analysis.lines.filter((l) => l.progress_point === point);

let view, url, browser;

before(async () => {
  view = cozView(['--analysis', FIXTURE]);
  url = await view.ready;
  browser = await launch();
});

after(async () => {
  await browser?.close();
  if (view && view.proc.exitCode === null) await view.stop();
});

async function open(viewport) {
  const page = await newPage(browser, viewport);
  await page.goto(url);
  await waitForCards(page);
  return page;
}

test('one plot per line of the default progress point, ranked by impact', async () => {
  const page = await open();
  const expected = linesOf('blocks_done').sort((a, b) => b.impact - a.impact).map((l) => l.line);
  assert.deepEqual(await cardLines(page), expected);
  assert.equal(await page.locator('#progress-point').inputValue(), 'blocks_done');
  // The first cards are drawn: each has a uPlot canvas.
  assert.ok(await page.locator('#plots .card').first().locator('canvas').count() >= 1);
  assert.match(await page.textContent('#count'), new RegExp(`Showing ${expected.length} of ${expected.length} `));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('sorting changes the order of the plots', async () => {
  const page = await open();
  const pts = linesOf('blocks_done');
  const cases = {
    slope: [...pts].sort((a, b) => b.slope - a.slope),
    max_speedup: [...pts].sort((a, b) => b.max_speedup - a.max_speedup),
    name: [...pts].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.lineno - b.lineno)),
  };
  const byImpact = await cardLines(page);
  // The fixture is made so that the four orders all differ from each other.
  const orders = [byImpact, ...Object.values(cases).map((ls) => ls.map((l) => l.line))].map((o) => o.join());
  assert.equal(new Set(orders).size, 4);
  for (const [key, want] of Object.entries(cases)) {
    await page.selectOption('#sort-by', key);
    assert.deepEqual(await cardLines(page), want.map((l) => l.line), `sort by ${key}`);
  }
  await page.selectOption('#sort-by', 'impact');
  assert.deepEqual(await cardLines(page), byImpact);
  await page.close();
});

test('the minimum-points and file-name filters hide lines', async () => {
  const page = await open();
  const all = linesOf('blocks_done');
  await page.locator('#min-points').fill('9');
  const many = all.filter((l) => l.points.length >= 9).map((l) => l.line).sort();
  assert.ok(many.length > 0 && many.length < all.length);
  assert.deepEqual((await cardLines(page)).sort(), many);

  await page.locator('#min-points').fill('0');
  await page.fill('#file-filter', 'hash.c');
  await page.waitForFunction(() => [...document.querySelectorAll('#plots .card')].every((c) => c.dataset.line.includes('hash.c')));
  const hash = all.filter((l) => l.file.includes('hash.c')).map((l) => l.line).sort();
  assert.deepEqual((await cardLines(page)).sort(), hash);

  await page.fill('#file-filter', 'no-such-file.c');
  await page.waitForSelector('#plots .empty');
  assert.equal(await page.locator('#plots .card').count(), 0);
  assert.match(await page.textContent('#plots .empty'), /No line matches the filters/);
  await page.close();
});

test('switching the progress point redraws the plots for that point', async () => {
  const page = await open();
  const options = await page.$$eval('#progress-point option', (os) => os.map((o) => o.value));
  assert.deepEqual(options.sort(), ['block', 'blocks_done']);
  const firstCanvas = await page.locator('#plots .card canvas').first().elementHandle();
  await page.selectOption('#progress-point', 'block');
  await waitForCards(page);
  const want = linesOf('block').sort((a, b) => b.impact - a.impact).map((l) => l.line);
  assert.deepEqual(await cardLines(page), want);
  assert.deepEqual(await page.$$eval('#plots .card', (cs) => [...new Set(cs.map((c) => c.dataset.progressPoint))]), ['block']);
  // The old canvases are gone (the plots were redrawn, not relabelled).
  assert.equal(await firstCanvas.evaluate((c) => c.isConnected), false);
  assert.equal(await page.locator('#plots .badge-latency').count(), want.length);
  await page.close();
});

test('contention lines are marked and source lines are shown', async () => {
  const page = await open({ width: 1400, height: 1900 });
  const contended = linesOf('blocks_done').filter((l) => l.contention).map((l) => l.line);
  assert.ok(contended.length > 0);
  assert.deepEqual(await page.$$eval('#plots .card.contention', (cs) => cs.map((c) => c.dataset.line)), contended);
  const card = page.locator('#plots .card[data-line="src/hash.c:22"]');
  await card.locator('pre.source .hit').waitFor();
  assert.match(await card.locator('pre.source .hit').textContent(), /^\s*22 \s*slot = \(slot \+ 1\) & \(TABLE_SIZE - 1\);/);
  // Screenshot of a real-looking profile, for people to look at.
  await page.waitForFunction(() => document.querySelectorAll('#plots .card.plotted').length === document.querySelectorAll('#plots .card').length);
  await page.waitForFunction(() => [...document.querySelectorAll('pre.source')].every((p) => p.childNodes.length > 0));
  await page.screenshot({ path: artifact('viewer.png') });
  assert.deepEqual(page.errors, []);
  // Nothing was asked of any host but the server itself.
  assert.deepEqual(page.requests.filter((r) => !r.startsWith(url)), []);
  await page.close();
});

test('the server refuses everything outside the page, the analysis and named sources', async () => {
  // Under the token: traversal, unnamed files and lines that do not exist.
  for (const target of ['../../etc/passwd', '..%2f..%2fetc%2fpasswd', '/etc/passwd',
    'js/../../python/cozprof/server.py', 'node_modules/playwright-core/package.json', 'tests/fixtures/realistic.json',
    'source?line=/etc/passwd:1', 'source?line=../../../../etc/passwd:1', 'source?line=src/../../fixtures/realistic.json:1',
    'source?line=/proc/self/environ:1', 'source?line=src/hash.c', 'source?line=src/hash.c:0',
    'source?line=src/hash.c:99999', 'source?line=src/hash.c:%C2%B2']) {
    const r = await rawGet(url, target);
    assert.ok([403, 404].includes(r.status), `${target} gave ${r.status}`);
    assert.doesNotMatch(r.body, /root:|import json|PATH=/);
  }
  const ok = await rawGet(url, 'source?line=src%2Fhash.c%3A22');
  assert.equal(ok.status, 200);
  const snip = JSON.parse(ok.body);
  assert.equal(snip.lineno, 22);
  assert.equal(snip.lines[snip.lineno - snip.first], '        slot = (slot + 1) & (TABLE_SIZE - 1);');
  const data = await rawGet(url, 'analysis.json');
  assert.equal(data.status, 200);
  assert.deepEqual(JSON.parse(data.body).lines.map((l) => l.line), analysis.lines.map((l) => l.line));
  // Without the token (another user of the machine can reach 127.0.0.1 too): nothing at all.
  for (const target of ['/', '/index.html', '/analysis.json', '/js/viewer.js', '/source?line=src%2Fhash.c%3A22',
    '//etc/passwd', '/../../etc/passwd']) {
    const r = await rawGet(url, target);
    assert.equal(r.status, 403, target);
    assert.doesNotMatch(r.body, /hash\.c|<html|root:/);
  }
  // A page of another site reaching us by DNS rebinding names another host.
  assert.equal((await rawGet(url, 'analysis.json', { Host: 'evil.example:80' })).status, 403);
});

test('the page asks for its analysis and sources under the token', async () => {
  const page = await open({ width: 1400, height: 1900 });
  await page.locator('#plots .card pre.source .hit').first().waitFor();
  const root = new URL(url).pathname;
  const own = page.requests.map((r) => new URL(r)).filter((u) => u.pathname !== '/favicon.ico');
  assert.ok(own.some((u) => u.pathname === root + 'analysis.json'));
  assert.ok(own.some((u) => u.pathname === root + 'source'));
  assert.deepEqual(own.filter((u) => !u.pathname.startsWith(root)).map((u) => u.href), []);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('the address without the token says how to get in', async () => {
  const page = await newPage(browser);
  const resp = await page.goto(new URL('/', url).href);
  assert.equal(resp.status(), 403);
  assert.match(await page.textContent('body'), /open the full URL that 'coz view' printed/);
  // The token without its slash is sent to the page.
  const bare = await page.goto(url.replace(/\/$/, ''));
  assert.equal(new URL(bare.url()).pathname, new URL(url).pathname);
  assert.equal(bare.status(), 200);
  await page.close();
});

test('Ctrl-C stops coz view cleanly', async () => {
  const other = cozView(['--analysis', FIXTURE]);
  await other.ready;
  const { code } = await other.stop('SIGINT');
  assert.equal(code, 0);
  assert.doesNotMatch(other.output().stderr, /Traceback/);
  assert.match(other.output().stdout, /stopped/);
});

test('a card shows the phase factor that scaled its curve, as coz report does', async () => {
  // Every line of the fixture was scaled by 0.93 (its phase_factor).
  const page = await open();
  const card = page.locator('#plots .card').first();
  const phase = card.locator('.stats .stat', { hasText: 'phase' });
  assert.equal((await phase.textContent()).trim(), 'phase x0.93');
  assert.match(await phase.getAttribute('title'), /multiplied by this factor/);
  assert.deepEqual(page.errors, []);
  await page.close();
});
