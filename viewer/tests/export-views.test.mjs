// The new views without `coz view`: in the self-contained page of
// `coz plot --html` (offline, everything embedded), from files opened by hand,
// and on a profile the runtime writes during the test.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { launch, newPage, cozRun, cozView, rawGet, tempDir, waitForCards, FIXTURES, INDEX_URL, REPO } from './helpers.mjs';

const REAL = join(FIXTURES, 'real');
const BUILD = process.env.COZ_BUILD_DIR || join(REPO, 'build');

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function embedded(html, id) {
  const m = new RegExp(`<script id="${id}" type="application/json">(.*?)</script>`, 's').exec(html);
  assert.ok(m, id);
  return JSON.parse(m[1]);
}

test('coz plot --html embeds the locks report and the flame tree, and every view works offline', async () => {
  const dir = tempDir();
  const out = join(dir, 'locks.html');
  const prof = join(REAL, 'locks_granularity.coz');
  const r = await cozRun(['plot', '--html', out, prof]);
  assert.equal(r.code, 0, r.stderr);
  const html = readFileSync(out, 'utf8');
  assert.doesNotMatch(html, /<script src=|<link rel="stylesheet"|(src|href)="https?:/);
  // d3 and d3-flame-graph are inlined with the viewer's own scripts.
  assert.match(html, /d3-flame-graph-label/);
  assert.ok(html.includes('Coz.views.flame'));

  // The data is that of coz locks --json and of coz view for the same profile.
  const locksJson = join(dir, 'locks.json');
  assert.equal((await cozRun(['locks', prof, '--json', locksJson])).code, 0);
  const want = JSON.parse(readFileSync(locksJson, 'utf8'));
  const locks = embedded(html, 'coz-locks');
  assert.deepEqual(locks.findings, want.findings);
  const view = cozView([prof]);
  try {
    const served = JSON.parse((await rawGet(await view.ready, 'flame.json')).body);
    assert.deepEqual(embedded(html, 'coz-flame'), served);
  } finally {
    await view.stop();
  }

  const page = await newPage(browser, { width: 1400, height: 900 });
  const self = pathToFileURL(out).href;
  await page.route('**/*', (route) => (route.request().url() === self ? route.continue() : route.abort()));
  await page.goto(self);
  await waitForCards(page);
  await page.click('#tab-locks');
  await page.waitForSelector('#locks-findings tr.lock-row[data-category="improper-granularity"]');
  await page.click('#tab-flame');
  await page.waitForSelector('#flame-chart g.frame[name="worker"]');
  await page.click('#flame-chart g.frame[name="worker"] rect');
  await page.locator('#flame-panel .frame-group[data-group="functions"] .card[data-line="worker"]').waitFor();
  await page.click('#tab-threads');
  await page.waitForSelector('#threads-table tr.group-row[data-group="worker"]');
  await page.click('#tab-units');
  await page.waitForSelector('#units-table tr[data-unit="function"][data-line="worker"]');
  // A function's card shows the source of its first line, embedded too.
  await page.click('#units-table tr[data-line="worker"] .unit-open');
  const sources = embedded(html, 'coz-sources');
  const fn = embedded(html, 'coz-analysis').lines.find((l) => l.unit === 'function');
  if (existsSync(fn.file)) {
    assert.ok(sources[`${fn.file}:${fn.lineno}`], Object.keys(sources).join());
    await page.locator('#units-panel pre.source .hit').waitFor();
  }
  assert.deepEqual(page.requests, [self]);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('coz plot --html of a profile without stacks or counters says so in those views', async () => {
  const out = join(tempDir(), 'old.html');
  const r = await cozRun(['plot', '--html', out, join(REPO, 'tests', 'fixtures', 'profiles', 'throughput.coz')]);
  assert.equal(r.code, 0, r.stderr);
  const html = readFileSync(out, 'utf8');
  assert.match(embedded(html, 'coz-flame').unavailable, /no stacks/);
  assert.equal(typeof embedded(html, 'coz-locks').unavailable, 'string');
  const page = await newPage(browser);
  await page.goto(pathToFileURL(out).href + '#flame');
  await page.waitForSelector('#view-flame .view-note.warning');
  assert.match(await page.textContent('#view-flame'), /No flame graph: the profile has no stacks/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('from disk, a locks report opened with the analysis fills the Locks view', async () => {
  const dir = tempDir();
  const prof = join(REAL, 'locks_granularity.coz');
  const a = join(dir, 'analysis.json');
  const l = join(dir, 'locks.json');
  assert.equal((await cozRun(['report', prof, '--json', a])).code, 0);
  assert.equal((await cozRun(['locks', prof, '--json', l])).code, 0);
  const page = await newPage(browser);
  await page.goto(INDEX_URL);
  await page.waitForSelector('#message:not([hidden])');
  // Before a report is opened, the view says how to make one.
  await page.click('#tab-locks');
  assert.match(await page.textContent('#view-locks'), /No locks report loaded.*coz locks profile\.coz --json locks\.json/s);
  await page.setInputFiles('#file-input', [l, a]);
  await page.waitForSelector('#locks-findings tr.lock-row');
  assert.match(await page.textContent('.locks-head h2'), /locks\.json/);
  // The causal predictions in it open the analysis's plots.
  await page.locator('#locks-findings .lock-details .sections .causal button').first().click();
  await page.waitForFunction(() => !document.getElementById('view-plots').hidden);
  await waitForCards(page);
  // The flame graph needs the profile's stacks, which an analysis does not hold.
  await page.click('#tab-flame');
  assert.match(await page.textContent('#view-flame'), /No flame graph: it is made from the profile's stacks/);
  assert.deepEqual(page.requests.filter((u) => !u.startsWith('file://')), []);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('a profile the runtime writes now shows its threads and its flame graph', async (t) => {
  const bench = join(BUILD, 'benchmarks', 'offcpu_mix');
  if (!existsSync(join(BUILD, 'libcoz', 'libcoz.so')) || !existsSync(bench)) {
    t.skip(`no build in ${BUILD} (libcoz/libcoz.so and benchmarks/offcpu_mix): run scripts/bootstrap.sh`);
    return;
  }
  const prof = join(tempDir(), 'now.coz');
  // Sampling only: stacks, thread records and counters, in well under a second.
  const r = await cozRun(['run', '--sampling-only', '-o', prof, '---', bench, '--short']);
  assert.equal(r.code, 0, r.stderr);
  const view = cozView([prof]);
  try {
    const url = await view.ready;
    const analysis = JSON.parse((await rawGet(url, 'analysis.json')).body);
    assert.deepEqual(analysis.thread_groups.map((g) => g.group).sort(), ['main', 'side']);
    const page = await newPage(browser);
    await page.goto(url + '#threads');
    await page.waitForSelector('#threads-table');
    assert.deepEqual((await page.$$eval('#threads-table tr.group-row', (rs) => rs.map((r) => r.dataset.group))).sort(), ['main', 'side']);
    await page.click('#tab-flame');
    await page.waitForSelector('#flame-chart g.frame[name="main"]');
    // The side thread sleeps: with waits, its sleep is a frame of its own.
    await page.selectOption('#flame-kinds', 'all');
    await page.waitForSelector('#flame-chart g.frame[name="[wait: sleep]"]');
    // No experiment ran: the causal plots say why, the other views still work.
    await page.click('#tab-plots');
    assert.match(await page.textContent('#message'), /experiment/i);
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await view.stop();
  }
});
