// A 500-line profile stays responsive: plots are drawn only near the
// viewport, and sorting or filtering re-renders quickly.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, newPage, tempDir, writeJson, cardLines, waitForCards, INDEX_URL } from './helpers.mjs';
import { manyLines } from './fixtures/generate.mjs';

const N = 500;
// Generous bounds for a slow 2-core CI machine; locally each takes ~100 ms.
const LOAD_BUDGET_MS = 3000;
const RESORT_BUDGET_MS = 1500;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test(`${N} lines: every line gets a card, few canvases exist, sorting stays fast`, async () => {
  const analysis = manyLines(N);
  const file = writeJson(tempDir(), 'big.json', analysis);
  const page = await newPage(browser);
  await page.goto(INDEX_URL);

  const t0 = Date.now();
  await page.setInputFiles('#file-input', file);
  await waitForCards(page);
  const loadMs = Date.now() - t0;
  console.log(`# ${N} lines: first plots after ${loadMs} ms`);
  assert.ok(loadMs < LOAD_BUDGET_MS, `first plots took ${loadMs} ms`);

  assert.equal(await page.locator('#plots .card').count(), N);
  const plotted = await page.locator('#plots .card.plotted').count();
  assert.ok(plotted > 0 && plotted < 40, `${plotted} plots drawn at once`);

  // Scrolling to the end draws the last cards and frees the first ones.
  await page.locator('#plots .card').last().scrollIntoViewIfNeeded();
  await page.waitForFunction(() => document.querySelector('#plots .card:last-child').classList.contains('plotted'));
  assert.equal(await page.locator('#plots .card').first().evaluate((c) => c.classList.contains('plotted')), false);
  assert.ok(await page.locator('canvas').count() < 80);

  const t1 = Date.now();
  await page.selectOption('#sort-by', 'name');
  await waitForCards(page);
  const sortMs = Date.now() - t1;
  console.log(`# ${N} lines: re-sorted in ${sortMs} ms`);
  assert.ok(sortMs < RESORT_BUDGET_MS, `sorting took ${sortMs} ms`);
  const names = await cardLines(page);
  const want = [...analysis.lines].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.lineno - b.lineno));
  assert.deepEqual(names, want.map((l) => l.line));

  await page.fill('#file-filter', 'module07.c');
  await page.waitForFunction(() => document.querySelectorAll('#plots .card').length === 20);
  assert.deepEqual(page.errors, []);
  await page.close();
});
