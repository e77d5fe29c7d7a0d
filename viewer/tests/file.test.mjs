// The viewer without a server: opened from disk with a file picked or
// dropped, and the self-contained page of `coz plot --html`.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launch, newPage, cardLines, waitForCards, pyExec, tempDir, FIXTURES, INDEX_URL, VIEWER } from './helpers.mjs';

const REALISTIC = join(FIXTURES, 'realistic.json');
const analysis = JSON.parse(readFileSync(REALISTIC, 'utf8'));
const defaultLines = analysis.lines.filter((l) => l.progress_point === 'blocks_done').map((l) => l.line);

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

async function openIndex() {
  const page = await newPage(browser);
  await page.goto(INDEX_URL);
  await page.waitForSelector('#message:not([hidden])');
  return page;
}

test('from disk, the page asks for a file and plots the one picked', async () => {
  const page = await openIndex();
  assert.match(await page.textContent('#message'), /Open an analysis/);
  await page.setInputFiles('#file-input', REALISTIC);
  await waitForCards(page);
  assert.deepEqual((await cardLines(page)).sort(), [...defaultLines].sort());
  assert.equal(await page.isHidden('#message'), true);
  // No server behind the page: no source boxes, no request but the page's own files.
  assert.equal(await page.locator('pre.source').count(), 0);
  assert.deepEqual(page.requests.filter((r) => !r.startsWith('file://')), []);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a file dropped on the page is opened', async () => {
  const page = await openIndex();
  const text = readFileSync(REALISTIC, 'utf8');
  await page.evaluate((t) => {
    const dt = new DataTransfer();
    dt.items.add(new File([t], 'dropped.json', { type: 'application/json' }));
    document.body.dispatchEvent(new DragEvent('dragenter', { dataTransfer: dt, bubbles: true }));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, text);
  await waitForCards(page);
  assert.equal(await page.locator('#plots .card').count(), defaultLines.length);
  assert.match(await page.textContent('#summary'), /dropped\.json/);
  assert.equal(await page.isHidden('#drop-overlay'), true);
  await page.close();
});

const badFiles = [
  ['empty.json', /empty\.json: the file is empty/],
  ['truncated.json', /truncated\.json: not valid JSON/],
  ['src/hash.c', /hash\.c: not valid JSON/],
];

for (const [name, message] of badFiles) {
  test(`a bad file (${name}) shows a message instead of plots`, async () => {
    const page = await openIndex();
    await page.setInputFiles('#file-input', REALISTIC);
    await waitForCards(page);
    await page.setInputFiles('#file-input', join(FIXTURES, name));
    await page.waitForSelector('#message.error');
    assert.match(await page.textContent('#message'), message);
    assert.equal(await page.locator('#plots .card').count(), 0);
    assert.deepEqual(page.errors, []);
    await page.close();
  });
}

test('a file that is JSON but not an analysis, or a profile, says so', async () => {
  const dir = tempDir();
  const cases = [
    ['list.json', '[1, 2, 3]', /not an analysis/],
    ['other.json', '{"name": "package", "version": "1.0"}', /no "schema" and "lines"/],
    ['future.json', '{"schema": 7, "lines": []}', /schema 7 is not supported/],
    ['profile.coz', '{"type":"startup","version":1}\n{"type":"experiment"}\n', /this is a profile, not an analysis/],
  ];
  const page = await openIndex();
  for (const [name, text, message] of cases) {
    writeFileSync(join(dir, name), text);
    await page.setInputFiles('#file-input', join(dir, name));
    await page.waitForFunction((n) => document.querySelector('#message.error')?.textContent.includes(n), name);
    assert.match(await page.textContent('#message'), message);
  }
  await page.close();
});

test('an analysis without usable lines shows its diagnosis', async () => {
  const page = await openIndex();
  await page.setInputFiles('#file-input', join(FIXTURES, 'no-lines.json'));
  await page.waitForSelector('#message.warning');
  assert.match(await page.textContent('#message'), /Only 4 experiments ran/);
  assert.match(await page.textContent('#warnings'), /1 line\/progress point pair was left out/);
  assert.equal(await page.locator('#plots .card').count(), 0);
  await page.close();
});

test('coz plot --html writes one self-contained page that works offline', async () => {
  const out = join(tempDir(), 'profile.html');
  const r = await pyExec(`
import sys
from cozprof import html_export, server
a = server.load_analysis_file(sys.argv[1])
html_export.write(a, sys.argv[2], server.search_dirs_for([], [sys.argv[3]]))
`, [REALISTIC, out, FIXTURES]);
  assert.equal(r.code, 0, r.stderr);
  const html = readFileSync(out, 'utf8');
  assert.doesNotMatch(html, /<script src=|<link rel="stylesheet"|(src|href)="https?:/);
  assert.match(html, /<meta http-equiv="Content-Security-Policy" content="default-src 'none';/);

  const page = await newPage(browser);
  // Any request but the page itself fails the test.
  await page.route('**/*', (route) => (route.request().url() === pathToFileURL(out).href ? route.continue() : route.abort()));
  await page.goto(pathToFileURL(out).href);
  await waitForCards(page);
  assert.deepEqual(page.requests, [pathToFileURL(out).href]);
  assert.deepEqual((await cardLines(page)).sort(), [...defaultLines].sort());
  const hit = page.locator('#plots .card[data-line="src/pipeline.c:37"] pre.source .hit');
  await hit.waitFor();
  assert.match(await hit.textContent(), /int32_t prev = table_lookup\(&dictionary, h\);/);
  await page.selectOption('#progress-point', 'block');
  await page.waitForFunction(() => document.querySelector('#plots .card')?.dataset.progressPoint === 'block');
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('without the charting library (setup not run) the page says what to do', async () => {
  const dir = tempDir();
  for (const rel of ['index.html', 'css', 'js']) cpSync(join(VIEWER, rel), join(dir, rel), { recursive: true });
  const page = await newPage(browser);
  await page.goto(pathToFileURL(join(dir, 'index.html')).href);
  await page.waitForSelector('#message.error');
  assert.match(await page.textContent('#message'), /charting library \(uPlot\) did not load.*npm ci --prefix viewer/s);
  await page.close();
});
