// The views beside the causal plots (Units, Threads, Locks, Flame graph) on
// profiles written by the runtime (tests/fixtures/real, see its README): each
// page is compared with what `coz view` serves for the same profile, never
// with numbers written here, since a remade profile has other numbers.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch, newPage, cozView, cozRun, rawGet, waitForCards, cardLines, tempDir, artifact, FIXTURES, REPO } from './helpers.mjs';

const REAL = join(FIXTURES, 'real');
const servers = {};   // fixture name -> {view, url, analysis, locks, flame}
let browser;

async function serve(name, extra = []) {
  const view = cozView([...extra, join(REAL, `${name}.coz`)]);
  const url = await view.ready;
  const get = async (what) => JSON.parse((await rawGet(url, what)).body);
  return { view, url, analysis: await get('analysis.json'), locks: await get('locks.json'), flame: await get('flame.json') };
}

before(async () => {
  browser = await launch();
  for (const name of ['units_sites', 'offcpu_mix', 'locks_granularity']) servers[name] = await serve(name);
});

after(async () => {
  await browser?.close();
  for (const s of Object.values(servers)) if (s.view.proc.exitCode === null) await s.view.stop();
});

async function open(name, hash = '', viewport = { width: 1280, height: 900 }) {
  const page = await newPage(browser, viewport);
  await page.goto(servers[name].url + hash);
  if (!hash) await waitForCards(page);
  return page;
}

const tail = (spec) => spec.replace(/^.*\//, '');   // '/x/units_sites.c:20' -> 'units_sites.c:20'
const pct = (text) => Number(/([\d.]+)%/.exec(text)[1]);

test('the page has five tabs; keys, clicks and the address choose the view', async () => {
  const page = await open('units_sites');
  assert.deepEqual(await page.$$eval('#tabs [role=tab]', (ts) => ts.map((t) => t.textContent)),
    ['Causal plots', 'Units', 'Threads', 'Locks', 'Flame graph']);
  const shown = () => page.$$eval('[role=tabpanel]', (ps) => ps.filter((p) => !p.hidden).map((p) => p.id));
  assert.deepEqual(await shown(), ['view-plots']);
  await page.click('#tab-threads');
  assert.deepEqual(await shown(), ['view-threads']);
  assert.equal(await page.getAttribute('#tab-threads', 'aria-selected'), 'true');
  assert.equal(await page.getAttribute('#tab-plots', 'aria-selected'), 'false');
  await page.focus('#tab-threads');
  await page.keyboard.press('ArrowRight');
  assert.deepEqual(await shown(), ['view-locks']);
  await page.keyboard.press('End');
  assert.deepEqual(await shown(), ['view-flame']);
  assert.match(page.url(), /#flame$/);
  await page.keyboard.press('Home');
  assert.deepEqual(await shown(), ['view-plots']);
  // The address opens a view directly, and the page asks only under its token.
  const direct = await open('units_sites', '#units');
  await direct.waitForSelector('#units-table');
  assert.deepEqual(await direct.$$eval('[role=tabpanel]', (ps) => ps.filter((p) => !p.hidden).map((p) => p.id)), ['view-units']);
  for (const p of [page, direct]) {
    assert.deepEqual(p.requests.filter((r) => !r.startsWith(servers.units_sites.url)), []);
    assert.deepEqual(p.errors, []);
    await p.close();
  }
});

test('units: every kind side by side, a function opens to its lines and its callers\' call sites', async () => {
  const { analysis } = servers.units_sites;
  const work = analysis.lines.find((l) => l.unit === 'function' && l.line === 'work');
  assert.ok(work && work.contains.length === 1 && work.called_from.length === 2, JSON.stringify(work));
  const page = await open('units_sites', '#units');
  await page.waitForSelector('#units-table');
  const rows = () => page.$$eval('#units-table tbody tr', (rs) => rs.map((r) => ({
    unit: r.dataset.unit, line: r.dataset.line, child: r.classList.contains('child-row'),
    kind: r.cells[1].textContent, rel: r.querySelector('.rel-label')?.textContent || null })));

  // Nested (the default): the units nested under a function are not at the top.
  const nested = new Set([...work.contains, ...work.called_from]);
  const fnMain = analysis.lines.find((l) => l.unit === 'function' && l.line === 'main');
  for (const s of fnMain.contains) nested.add(s);
  const top = await rows();
  assert.deepEqual(top.map((r) => r.line).sort(), analysis.lines.map((l) => l.line).filter((s) => !nested.has(s)).sort());
  assert.ok(top.every((r) => !r.child));
  assert.deepEqual(top.find((r) => r.line === 'work').kind, 'function');

  // Opening `work`: its line, then the call sites that call it, right under it.
  await page.click('#units-table tr[data-line="work"] button.toggle');
  const open1 = await rows();
  const at = open1.findIndex((r) => r.line === 'work');
  const kids = open1.slice(at + 1, at + 1 + 3);
  assert.deepEqual(kids.map((r) => [r.unit, r.line, r.rel, r.child, r.kind]), [
    ['line', work.contains[0], 'line in it', true, 'line'],
    ['callsite', work.called_from[0], 'calls it from', true, 'call site'],
    ['callsite', work.called_from[1], 'calls it from', true, 'call site'],
  ]);
  assert.equal(await page.getAttribute('#units-table tr[data-line="work"] button.toggle', 'aria-expanded'), 'true');
  await page.screenshot({ path: artifact('viewer-units.png'), fullPage: true });

  // A name shows the unit's plot and figures in the panel.
  await page.click(`#units-table tr.child-row[data-line="${work.called_from[0]}"] .unit-open`);
  const card = page.locator('#units-panel .card');
  await card.locator('canvas').first().waitFor();
  assert.equal(await card.getAttribute('data-line'), work.called_from[0]);
  assert.equal(await card.getAttribute('data-unit'), 'callsite');
  // "Open in causal plots" goes to its card.
  await page.click('#units-panel button:has-text("Open in causal plots")');
  await page.waitForFunction(() => !document.getElementById('view-plots').hidden);
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.line), work.called_from[0]);

  // Flat: every unit of the progress point, each with its kind.
  await page.click('#tab-units');
  await page.uncheck('#units-nest');
  const flat = await rows();
  assert.deepEqual(flat.map((r) => `${r.unit} ${r.line}`).sort(), analysis.lines.map((l) => `${l.unit} ${l.line}`).sort());
  const label = { line: 'line', function: 'function', callsite: 'call site' };
  assert.ok(flat.every((r) => r.kind === label[r.unit]), JSON.stringify(flat));
  // The sidebar's unit filter applies here too.
  await page.selectOption('#unit-filter', 'function');
  assert.deepEqual((await rows()).map((r) => r.line).sort(), ['main', 'work']);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('off-CPU lines are marked with their category and their on/off-CPU shares', async () => {
  const { analysis } = servers.offcpu_mix;
  const off = analysis.lines.filter((l) => l.category && l.category !== 'cpu');
  const on = analysis.lines.filter((l) => l.category === 'cpu');
  assert.ok(off.length >= 1 && on.length >= 1, 'the fixture has lines on and off the CPU');
  const page = await open('offcpu_mix');
  const cards = page.locator('#plots .card');
  assert.deepEqual((await cardLines(page)).sort(), analysis.lines.map((l) => l.line).sort());
  for (const l of analysis.lines) {
    const c = page.locator(`#plots .card[data-line="${l.line}"]`);
    assert.equal(await c.getAttribute('data-category'), l.category);
    const text = await c.locator('.time-share .time-text').textContent();
    // The text gives each share; the biggest is the category's.
    const cpu = Math.round(100 * l.on_cpu_share);
    if (cpu > 0) assert.ok(Math.abs(pct(/CPU ([\d.<]+%)/.exec(text)[1]) - 100 * l.on_cpu_share) < 1, text);
    for (const [k, v] of Object.entries(l.off_cpu)) {
      const m = new RegExp(`${k} ([\\d.]+)%`).exec(text);
      assert.ok(m && Math.abs(Number(m[1]) - 100 * v) < 1, `${l.line}: ${k} in "${text}"`);
    }
    if (l.category === 'cpu') {
      assert.equal(await c.evaluate((e) => e.classList.contains('offcpu')), false);
      assert.equal(await c.locator('header .badge-cat').count(), 0);
    } else {
      assert.equal(await c.evaluate((e) => e.classList.contains('offcpu')), true);
      assert.equal(await c.locator('header .badge-cat').textContent(), l.category);
    }
  }
  await page.screenshot({ path: artifact('viewer-offcpu.png'), fullPage: true });
  // The sidebar filter keeps the lines mostly off the CPU, or one category.
  await page.selectOption('#time-filter', 'off');
  assert.deepEqual((await cardLines(page)).sort(), off.map((l) => l.line).sort());
  await page.selectOption('#time-filter', 'cpu');
  assert.deepEqual((await cardLines(page)).sort(), on.map((l) => l.line).sort());
  await page.selectOption('#time-filter', 'sleep');
  assert.deepEqual((await cardLines(page)).sort(), analysis.lines.filter((l) => l.category === 'sleep').map((l) => l.line).sort());
  // The Units view carries the same marks.
  await page.selectOption('#time-filter', 'all');
  await page.click('#tab-units');
  for (const l of off) {
    assert.equal(await page.locator(`#units-table tr[data-line="${l.line}"] .badge-cat`).textContent(), l.category);
  }
  assert.ok(await cards.count() > 0);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('threads: each group\'s and thread\'s time on the CPU and in each wait, as the analysis says', async () => {
  const { analysis } = servers.offcpu_mix;
  const page = await open('offcpu_mix', '#threads', { width: 1400, height: 800 });
  await page.waitForSelector('#threads-table');
  const groups = await page.$$eval('#threads-table tr.group-row', (rs) => rs.map((r) => r.dataset.group));
  assert.deepEqual(groups, analysis.thread_groups.map((g) => g.group));
  const cats = ['cpu', 'io', 'lock', 'sync', 'sleep', 'sched', 'other', 'rest'];
  const value = (t, c) => (c === 'cpu' ? t.cpu_ns : c === 'rest' ? t.rest_ns : t.wait_ns[c]);
  const check = async (row, t) => {
    for (const c of cats) {
      const text = await row.locator(`td.cat-${c}`).textContent();
      const want = 100 * value(t, c) / t.wall_ns;
      if (text === '<0.1%') assert.ok(want < 0.1, `${c}: ${text} vs ${want}`);
      else assert.ok(Math.abs(pct(text) - want) <= 0.5 + want * 0.01, `${t.group} ${c}: ${text} vs ${want}`);
    }
  };
  for (const g of analysis.thread_groups) await check(page.locator(`#threads-table tr.group-row[data-group="${g.group}"]`), g);
  // The side thread mostly sleeps, the main thread mostly computes: the fixture's point.
  const side = analysis.thread_groups.find((g) => g.group === 'side');
  assert.ok(side.wait_ns.sleep > side.cpu_ns, JSON.stringify(side));
  assert.match(await page.textContent('.view-summary'), /The threads spent [\d.]+% of their [\d.]+ s on the CPU and [\d.]+% waiting \(sleep/);

  // A group opens to its threads, by tid.
  for (const g of analysis.thread_groups) await page.click(`#threads-table tr.group-row[data-group="${g.group}"] button.toggle`);
  const tids = await page.$$eval('#threads-table tr.child-row', (rs) => rs.map((r) => Number(r.dataset.tid)).sort());
  assert.deepEqual(tids, analysis.threads.map((t) => t.tid).sort());
  for (const t of analysis.threads) await check(page.locator(`#threads-table tr.child-row[data-tid="${t.tid}"]`), t);
  // Times instead of shares.
  await page.selectOption('#threads-mode', 'time');
  assert.match(await page.locator('#threads-table tr.group-row td.cat-cpu').first().textContent(), /^[\d.]+ (ns|us|ms|s)$/);
  await page.selectOption('#threads-mode', 'share');
  assert.deepEqual(page.errors, []);
  await page.screenshot({ path: artifact('viewer-threads.png'), fullPage: true });
  await page.close();
});

test('locks: the findings of coz locks --json, with their critical sections\' causal predictions', async () => {
  const { locks, url } = servers.locks_granularity;
  assert.equal(locks.schema, 1);
  // The served report is the one coz locks --json writes for the file.
  const out = join(tempDir(), 'locks.json');
  const r = await cozRun(['locks', join(REAL, 'locks_granularity.coz'), '--json', out]);
  assert.equal(r.code, 0, r.stderr);
  const cli = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(locks.findings.map((f) => [f.category, f.quadrant, f.lock]), cli.findings.map((f) => [f.category, f.quadrant, f.lock]));

  const first = locks.findings[0];
  assert.equal(first.category, 'improper-granularity');
  const lock = locks.locks.find((l) => l.key === first.lock);
  const page = await newPage(browser, { width: 1400, height: 1000 });
  await page.goto(url + '#locks');
  await page.waitForSelector('#locks-findings');
  const row = page.locator('#locks-findings tr.lock-row').first();
  assert.equal(await row.getAttribute('data-category'), 'improper-granularity');
  assert.match(await row.textContent(), new RegExp(`improper-granularity.*${first.quadrant}.*${tail(lock.site).replace('.', '\\.')}`));
  // The first finding is open: why, fix, and each critical section's predictions.
  const details = page.locator('#locks-findings .lock-details').first();
  assert.match(await details.textContent(), new RegExp(`why: ${first.reason.slice(0, 30).replace(/[()]/g, '.')}`));
  assert.match(await details.textContent(), /fix: split the lock/);
  const joined = lock.critical_sections.flatMap((cs) => cs.causal);
  assert.ok(joined.length >= 1, 'the fixture joins predictions to its critical section');
  const links = await details.locator('.sections .causal').allTextContents();
  assert.deepEqual(links.map((t) => t.replace(/\s+/g, ' ').trim()),
    joined.map((c) => `${tail(c.line)} (${c.role}) ${(c.predicted['0.5'] > 0 ? '+' : '') + (100 * c.predicted['0.5']).toFixed(1)}%`));
  // A prediction opens its causal plot.
  await details.locator('.sections .causal button').first().click();
  await page.waitForFunction(() => !document.getElementById('view-plots').hidden);
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.line), joined[0].line);
  await page.click('#tab-locks');
  // Thread groups, as the report has them.
  assert.deepEqual(await page.$$eval('#locks-groups-table tbody tr', (rs) => rs.map((r) => r.cells[0].textContent.replace(/ \(slowest\)$/, ''))),
    locks.load_imbalance.groups.map((g) => g.group));
  // Every lock family, closed until asked.
  await page.click('#locks-all summary');
  assert.equal(await page.locator('#locks-every tr.lock-row').count(), locks.locks.length);
  await page.click('#locks-all summary');
  // Joins, apart from the locks: the report's, per call site.
  assert.ok(locks.joins.length >= 1, 'the fixture\'s main thread joins its workers');
  await page.click('#locks-joins summary');
  const joinRows = await page.$$eval('#locks-joins-table tbody tr', (rs) => rs.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.deepEqual(joinRows.map((r) => [tail(r[0]), Number(r[1]), Number(r[2].split(' ')[0])]),
    locks.joins.map((j) => [tail(j.site), j.figures.acquisitions, j.figures.contended]));
  assert.match(await page.locator('#locks-joins summary').textContent(),
    new RegExp(`${locks.joins.reduce((n, j) => n + j.figures.acquisitions, 0)} calls`));
  assert.deepEqual(page.errors, []);
  await page.screenshot({ path: artifact('viewer-locks.png'), fullPage: true });
  await page.close();
});

test('flame graph: the profile\'s stacks, and a frame\'s causal predictions on a click', async () => {
  const { analysis, flame, url } = servers.units_sites;
  assert.equal(flame.schema, 1);
  const page = await newPage(browser, { width: 1400, height: 900 });
  await page.goto(url + '#flame');
  await page.waitForSelector('#flame-chart g.frame[name="work"]');
  const names = await page.$$eval('#flame-chart g.frame', (gs) => gs.map((g) => g.getAttribute('name')));
  for (const n of ['all', 'main', 'work']) assert.ok(names.includes(n), names.join());
  // Frames are the served tree's functions (threads merged; CPU time only by default).
  const served = new Set();
  const walk = (n) => { served.add(n.name); n.children.forEach(walk); };
  walk(flame.tree);
  assert.ok(names.every((n) => n === 'all' || served.has(n)), names.join());
  assert.ok(!names.some((n) => n.startsWith('[wait:') || n.startsWith('thread ')), names.join());
  // Labels can be read: the widest frames show their whole name (once drawn: labels follow a transition).
  await page.waitForFunction(() => document.querySelector('#flame-chart g.frame[name="work"] .d3-flame-graph-label')?.textContent === 'work');

  await page.click('#flame-chart g.frame[name="work"] rect');
  const panel = page.locator('#flame-panel');
  await panel.locator('.frame-head h3:text-is("work")').waitFor();
  const group = async (g) => panel.locator(`.frame-group[data-group="${g}"] .card`).evaluateAll((cs) => cs.map((c) => `${c.dataset.unit} ${c.dataset.line}`));
  const work = analysis.lines.find((l) => l.unit === 'function' && l.line === 'work');
  assert.deepEqual(await group('functions'), ['function work']);
  assert.deepEqual(await group('lines'), work.contains.map((s) => `line ${s}`));
  assert.deepEqual((await group('callers')).sort(), work.called_from.map((s) => `callsite ${s}`).sort());
  await panel.locator('.frame-group[data-group="functions"] .card canvas').first().waitFor();
  await page.screenshot({ path: artifact('viewer-flame.png'), fullPage: true });

  // `main` has its own predictions: its function, its line, and the call sites in it.
  await page.click('#flame-reset');
  await page.click('#flame-chart g.frame[name="main"] rect');
  await panel.locator('.frame-head h3:text-is("main")').waitFor();
  const inMain = analysis.lines.filter((l) => l.unit === 'callsite' && l.function === 'main').map((l) => `callsite ${l.line}`);
  assert.deepEqual((await group('sitesIn')).sort(), inMain.sort());
  // A frame without predictions says so.
  await page.click('#flame-reset');
  await page.click('#flame-chart g.frame[name="_start"] rect');
  await panel.locator('.frame-head h3:text-is("_start")').waitFor();
  assert.match(await panel.textContent(), /No causal prediction for _start/);
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('flame graph: waits in their category, threads apart, and the keyboard', async () => {
  const { flame, analysis, url } = servers.offcpu_mix;
  const page = await newPage(browser, { width: 1280, height: 900 });
  await page.goto(url + '#flame');
  await page.waitForSelector('#flame-chart g.frame');
  const names = () => page.$$eval('#flame-chart g.frame', (gs) => gs.map((g) => g.getAttribute('name')));
  assert.ok(!(await names()).includes('[wait: sleep]'));
  await page.selectOption('#flame-kinds', 'all');
  await page.waitForSelector('#flame-chart g.frame[name="[wait: sleep]"]');
  const fill = await page.getAttribute('#flame-chart g.frame[name="[wait: sleep]"] rect', 'fill');
  assert.equal(fill, await page.evaluate(() => window.Coz.categoryColor('sleep')));
  // Only waits: no frame keeps CPU time of its own.
  await page.selectOption('#flame-kinds', 'off');
  assert.match(await page.textContent('#flame-status'), /off the CPU/);
  // One tower per thread.
  await page.selectOption('#flame-split', 'thread');
  await page.waitForSelector('#flame-chart g.frame[name^="thread "]');
  const threads = (await names()).filter((n) => n.startsWith('thread '));
  const servedThreads = flame.tree.children.map((c) => c.name);
  assert.ok(threads.length >= 1 && threads.every((t) => servedThreads.includes(t)), threads.join());
  // A thread frame shows where that thread's time went.
  const sideThread = threads.find((t) => / group side\)$/.test(t));
  await page.click(`#flame-chart g.frame[name="${sideThread}"] rect`);
  const side = analysis.threads.find((t) => t.group === 'side');
  assert.match(await page.textContent('#flame-panel'), new RegExp(`Where its [\\d.]+ s of wall time went`));
  assert.ok(sideThread.includes(`tid ${side.tid}`));
  // Keyboard: focus, move up from the root, Enter shows the frame.
  await page.selectOption('#flame-split', 'all');
  await page.focus('#flame-chart');
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowUp');
  assert.equal(await page.locator('#flame-chart g.frame.kbd-focus').count(), 1);
  const focused = await page.getAttribute('#flame-chart g.frame.kbd-focus', 'name');
  await page.keyboard.press('Enter');
  await page.locator(`#flame-panel .frame-head h3:text-is("${focused}")`).waitFor();
  // Search marks the matching frames.
  await page.fill('#flame-search', 'nanosleep');
  await page.waitForFunction(() => /match "nanosleep"/.test(document.getElementById('flame-status').textContent));
  assert.deepEqual(page.errors, []);
  await page.close();
});

test('coz view --analysis has no stacks or locks unless --locks names a report', async () => {
  const dir = tempDir();
  const a = join(dir, 'analysis.json');
  const l = join(dir, 'locks.json');
  const prof = join(REAL, 'locks_granularity.coz');
  assert.equal((await cozRun(['report', prof, '--json', a])).code, 0);
  assert.equal((await cozRun(['locks', prof, '--json', l])).code, 0);
  const view = cozView(['--analysis', a]);
  try {
    const url = await view.ready;
    const page = await newPage(browser);
    await page.goto(url + '#locks');
    await page.waitForSelector('#view-locks .view-note.warning');
    assert.match(await page.textContent('#view-locks'), /No locks report: coz view --analysis shows no locks report unless --locks names one/);
    await page.click('#tab-flame');
    await page.waitForSelector('#view-flame .view-note.warning');
    assert.match(await page.textContent('#view-flame'), /No flame graph: coz view --analysis has no stacks/);
    await page.close();
  } finally {
    await view.stop();
  }
  const withLocks = cozView(['--analysis', a, '--locks', l]);
  try {
    const url = await withLocks.ready;
    const page = await newPage(browser);
    await page.goto(url + '#locks');
    await page.waitForSelector('#locks-findings');
    assert.equal(await page.getAttribute('#locks-findings tr.lock-row', 'data-category'), 'improper-granularity');
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await withLocks.stop();
  }
  const bad = await cozRun(['view', '--no-browser', '--analysis', a, '--locks', a]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /not a locks report/);
  assert.doesNotMatch(bad.stderr, /Traceback/);
});

test('a profile without stacks or lock counters says so in those views', async () => {
  const view = cozView([join(REPO, 'tests', 'fixtures', 'profiles', 'throughput.coz')]);
  try {
    const url = await view.ready;
    const page = await newPage(browser);
    await page.goto(url);
    await waitForCards(page);
    await page.click('#tab-flame');
    await page.waitForSelector('#view-flame .view-note.warning');
    assert.match(await page.textContent('#view-flame'), /the profile has no stacks/);
    await page.click('#tab-locks');
    await page.waitForSelector('#view-locks .view-note.warning');
    assert.match(await page.textContent('#view-locks'), /No locks report: /);
    await page.click('#tab-threads');
    assert.match(await page.textContent('#view-threads'), /no per-thread records/);
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await view.stop();
  }
});

test('without the flame-graph library the view says how to install it, and the others work', async () => {
  const page = await newPage(browser);
  await page.route(/\/node_modules\/d3(-flame-graph)?\/dist\//, (route) => route.abort());
  await page.goto(servers.units_sites.url + '#flame');
  await page.waitForSelector('#view-flame .view-note.error');
  assert.match(await page.textContent('#view-flame'), /flame-graph library \(d3, d3-flame-graph\) did not load.*npm ci --prefix viewer/s);
  await page.click('#tab-plots');
  await waitForCards(page);
  await page.click('#tab-locks');
  await page.waitForSelector('#view-locks .view-note');
  assert.deepEqual(page.errors, []);
  await page.close();
});
