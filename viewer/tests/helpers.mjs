// Shared pieces of the viewer tests: the browser (Debian's chromium through
// playwright-core, never a downloaded one) and `coz view` as a child process.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { request } from 'node:http';
import { chromium } from 'playwright-core';

export const VIEWER = dirname(dirname(fileURLToPath(import.meta.url)));
export const REPO = dirname(VIEWER);
export const FIXTURES = join(VIEWER, 'tests', 'fixtures');
export const ARTIFACTS = join(REPO, 'tests', 'artifacts');
export const INDEX_URL = pathToFileURL(join(VIEWER, 'index.html')).href;

const CHROMIUM = process.env.COZ_CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

// A page that fails the test on any script error and records every request.
export async function newPage(browser, viewport = { width: 1280, height: 900 }) {
  const page = await browser.newPage({ viewport });
  page.errors = [];
  page.requests = [];
  page.on('pageerror', (e) => page.errors.push(String(e)));
  page.on('request', (r) => page.requests.push(r.url()));
  return page;
}

export function tempDir() {
  return mkdtempSync(join(tmpdir(), 'coz-viewer-test-'));
}

export function writeJson(dir, name, obj) {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify(obj));
  return p;
}

export function artifact(name) {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}

function python(args, opts = {}) {
  const env = { ...process.env, PYTHONPATH: join(REPO, 'python') + (process.env.PYTHONPATH ? ':' + process.env.PYTHONPATH : '') };
  delete env.DISPLAY;
  delete env.WAYLAND_DISPLAY;
  return spawn(process.env.COZ_PYTHON || process.env.PYTHON || 'python3', ['-m', 'cozprof', ...args], { env, cwd: opts.cwd || REPO });
}

// Starts `coz view --no-browser --port 0 ARGS`, resolves once it prints its
// address (http://127.0.0.1:PORT/TOKEN/: every URL of the server is under the token).
export function cozView(args, opts = {}) {
  const proc = python(['view', '--no-browser', '--port', '0', ...args], opts);
  let out = '', err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('coz view did not start: ' + err)), 15000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /serving (http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{43,}\/) /.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`coz view exited (${code}): ${err}`)); });
  });
  return {
    proc, ready, exited,
    output: () => ({ stdout: out, stderr: err }),
    async stop(signal = 'SIGINT') { proc.kill(signal); return exited; },
  };
}

// Runs a python -m cozprof command to completion.
export function cozRun(args, opts = {}) {
  const proc = python(args, opts);
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, stdout: out, stderr: err })));
}

// Runs python code (with the package importable) to completion; args are sys.argv[1:].
export function pyExec(code, args = []) {
  const env = { ...process.env, PYTHONPATH: join(REPO, 'python') };
  const proc = spawn(process.env.COZ_PYTHON || process.env.PYTHON || 'python3', ['-c', code, ...args], { env, cwd: REPO });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  return new Promise((resolve) => proc.on('exit', (code) => resolve({ code, stdout: out, stderr: err })));
}

// A GET with the request target sent exactly as given (no URL normalisation,
// so '..' and '//' reach the server as an attacker would send them). A target
// that does not start with '/' is put under the base's path (the token), as
// the page's own relative requests are.
export function rawGet(base, target, headers = {}) {
  const u = new URL(base);
  const path = target.startsWith('/') ? target : u.pathname + target;
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

// Texts of the cards' line names, in page order.
export async function cardLines(page) {
  return page.$$eval('#plots .card', (cs) => cs.map((c) => c.dataset.line));
}

export async function waitForCards(page) {
  await page.waitForSelector('#plots .card.plotted');
}
