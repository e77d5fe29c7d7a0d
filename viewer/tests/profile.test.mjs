// `coz view PROFILE` end to end: the real analysis of a fixture profile
// (tests/fixtures/profiles, made by hand, see the README there) in the page.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launch, newPage, cozView, cozRun, rawGet, cardLines, waitForCards, tempDir, artifact, REPO } from './helpers.mjs';

const PROFILE = join(REPO, 'tests', 'fixtures', 'profiles', 'latency.legacy.coz');

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('coz view analyses a profile and shows both of its progress points', async () => {
  const view = cozView([PROFILE]);
  try {
    const url = await view.ready;
    const served = JSON.parse((await rawGet(url, 'analysis.json')).body);
    assert.equal(served.phase_correction, true);
    const points = [...new Set(served.lines.map((l) => l.progress_point))].sort();
    assert.ok(points.length >= 2, JSON.stringify(points));

    const page = await newPage(browser);
    await page.goto(url);
    await waitForCards(page);
    for (const point of points) {
      await page.selectOption('#progress-point', point);
      await page.waitForFunction((p) => document.querySelector('#plots .card')?.dataset.progressPoint === p, point);
      const want = served.lines.filter((l) => l.progress_point === point).map((l) => l.line);
      assert.deepEqual((await cardLines(page)).sort(), want.sort());
    }
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await view.stop();
  }
});

test('coz view --no-phase-correction passes the choice to the analysis', async () => {
  const view = cozView(['--no-phase-correction', PROFILE]);
  try {
    const served = JSON.parse((await rawGet(await view.ready, 'analysis.json')).body);
    assert.equal(served.phase_correction, false);
    assert.ok(served.lines.every((l) => l.phase_factor === 1));
  } finally {
    await view.stop();
  }
});

test('coz view without a profile fails with one line saying what to do', async () => {
  const r = await cozRun(['view', '--no-browser'], { cwd: tempDir() });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^coz: error: profile\.coz: no such profile file\ncoz: .*coz run/);
  assert.doesNotMatch(r.stderr, /Traceback/);
});

test('coz view shows a profile written by the runtime, and the screenshot is saved', async () => {
  // tests/fixtures/profiles/real_pipeline.coz: benchmarks/pipeline profiled by
  // libcoz.so in causal mode (see the README there).
  const real = join(REPO, 'tests', 'fixtures', 'profiles', 'real_pipeline.coz');
  const view = cozView([real]);
  try {
    const url = await view.ready;
    const served = JSON.parse((await rawGet(url, 'analysis.json')).body);
    const stage2 = served.lines.find((l) => l.line.endsWith('/benchmarks/pipeline.c:90'));
    assert.ok(stage2, JSON.stringify(served.lines.map((l) => l.line)));
    const page = await newPage(browser, { width: 1400, height: 1000 });
    await page.goto(url);
    await waitForCards(page);
    const shown = await cardLines(page);
    assert.deepEqual(shown.sort(), served.lines.map((l) => l.line).sort());
    assert.equal(shown.length >= 1, true);
    assert.deepEqual(page.errors, []);
    await page.screenshot({ path: artifact('viewer-real-profile.png'), fullPage: true });
    await page.close();
  } finally {
    await view.stop();
  }
});
