/* Shared pieces of the viewer's views (viewer.js, units.js, threads.js,
 * locks.js, flame.js): formatting, element making, the categories of time on
 * and off the CPU with their colours, and the names of units of virtual
 * speedup. Plain script, no build step: everything hangs off window.Coz.
 */
(function () {
  'use strict';

  var Coz = window.Coz = window.Coz || {};

  // ---------------------------------------------------------------- formatting

  function isNum(v) { return typeof v === 'number' && isFinite(v); }

  /* Fraction as a signed percentage: +12.5%, -3.0%, 0.0%. */
  function pct(v, digits) {
    if (!isNum(v)) return 'n/a';
    var s = (v * 100).toFixed(digits === undefined ? 1 : digits);
    if (/^-0(\.0*)?$/.test(s)) s = s.slice(1);
    return (v > 0 && Number(s) !== 0 ? '+' : '') + s + '%';
  }

  /* Fraction as an unsigned share: 12%, 0.4%, <0.1%. */
  function share(v) {
    if (!isNum(v)) return 'n/a';
    var p = v * 100;
    if (p === 0) return '0%';
    if (p < 0.1) return '<0.1%';
    return (p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%';
  }

  function num(v, digits) { return isNum(v) ? v.toFixed(digits === undefined ? 2 : digits) : 'n/a'; }

  /* Nanoseconds, three significant digits: 850 ns, 12.5 us, 3.20 ms, 1.25 s. */
  function time(ns) {
    if (!isNum(ns)) return 'n/a';
    var a = Math.abs(ns);
    if (a >= 1e9) return sig(ns / 1e9) + ' s';
    if (a >= 1e6) return sig(ns / 1e6) + ' ms';
    if (a >= 1e3) return sig(ns / 1e3) + ' us';
    return Math.round(ns) + ' ns';
  }

  function sig(v) { return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2); }

  /* Events per second: 950/s, 2.2k/s, 6.1M/s. */
  function rate(v) {
    if (!isNum(v)) return 'n/a';
    if (v >= 1e9) return sig(v / 1e9) + 'G/s';
    if (v >= 1e6) return sig(v / 1e6) + 'M/s';
    if (v >= 1e3) return sig(v / 1e3) + 'k/s';
    return (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + '/s';
  }

  function make(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function button(cls, text, title) {
    var b = make('button', cls, text);
    b.type = 'button';
    if (title) b.title = title;
    return b;
  }

  /* A short note in a view: <div class="view-note KIND"><strong>first line</strong><p>rest</p></div>. */
  function note(text, kind) {
    var box = make('div', 'view-note ' + (kind || 'info'));
    box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    var lines = String(text).split('\n');
    box.appendChild(make('strong', null, lines[0]));
    for (var i = 1; i < lines.length; i++) if (lines[i]) box.appendChild(make('p', null, lines[i]));
    return box;
  }

  function basename(path) {
    if (typeof path !== 'string') return '';
    var i = path.lastIndexOf('/');
    return i >= 0 ? path.slice(i + 1) : path;
  }

  /* 'dir/file.c:12' -> 'file.c:12' (what tables show; the full text goes in the title). */
  function shortLine(spec) {
    if (typeof spec !== 'string') return '';
    var m = /^(.*):(\d+)$/.exec(spec);
    return m ? basename(m[1]) + ':' + m[2] : basename(spec);
  }

  // ---------------------------------------------------- time on and off the CPU

  /* Categories of where time goes, in the order bars stack them. `cpu` is time
   * on the CPU; the others are the wait categories of the analysis and of the
   * thread records; `rest` is what a thread's wall time leaves over (mostly the
   * profiler's own pauses). */
  var CATEGORIES = ['cpu', 'io', 'lock', 'sync', 'sleep', 'sched', 'other', 'rest'];
  var CATEGORY = {
    cpu: {label: 'CPU', color: '#3b6fb6', title: 'on the CPU'},
    io: {label: 'I/O', color: '#8a4fbf', title: 'waiting for I/O (read, write, fsync, poll, ...)'},
    lock: {label: 'lock', color: '#c2362b', title: 'waiting for a lock (mutex, read-write or spin lock)'},
    sync: {label: 'sync', color: '#e08a1e', title: 'waiting for another thread (condition variable, barrier, semaphore, join)'},
    sleep: {label: 'sleep', color: '#1e9b8a', title: 'sleeping (nanosleep, usleep, ...)'},
    sched: {label: 'sched', color: '#8d8f92', title: 'runnable but not running (preempted, waiting for a CPU)'},
    other: {label: 'other', color: '#b9a27c', title: 'off the CPU in no interposed call'},
    rest: {label: 'profiler', color: '#d9dde3', title: 'wall time not accounted for above: mostly the profiler\'s own pauses (virtual speedup delays)'}
  };

  function categoryLabel(cat) { return (CATEGORY[cat] || {label: cat}).label; }
  function categoryColor(cat) { return (CATEGORY[cat] || {color: '#999'}).color; }

  /* [[category, fraction], ...] of a unit's samples (analysis fields
   * on_cpu_share and off_cpu), or null when the analysis has none. */
  function unitShares(l) {
    if (!l || !isNum(l.on_cpu_share)) return null;
    var parts = [['cpu', l.on_cpu_share]];
    var off = l.off_cpu && typeof l.off_cpu === 'object' ? l.off_cpu : {};
    CATEGORIES.forEach(function (c) {
      if (c !== 'cpu' && isNum(off[c]) && off[c] > 0) parts.push([c, off[c]]);
    });
    Object.keys(off).forEach(function (c) {   // a category this viewer does not know yet
      if (CATEGORIES.indexOf(c) < 0 && isNum(off[c]) && off[c] > 0) parts.push([c, off[c]]);
    });
    return parts;
  }

  /* A unit is marked off-CPU when its category (the largest share) is a wait. */
  function offCpuCategory(l) {
    return l && typeof l.category === 'string' && l.category !== 'cpu' ? l.category : null;
  }

  function sharesText(parts, values) {
    return parts.filter(function (p) { return p[1] > 0; }).map(function (p) {
      return categoryLabel(p[0]) + ' ' + share(p[1]) + (values ? ' (' + values(p) + ')' : '');
    }).join(' \u00b7 ');
  }

  /* A horizontal stacked bar of shares (fractions of one whole). */
  function shareBar(parts, opts) {
    opts = opts || {};
    var total = opts.total || parts.reduce(function (s, p) { return s + (p[1] > 0 ? p[1] : 0); }, 0) || 1;
    var bar = make('span', 'sharebar' + (opts.cls ? ' ' + opts.cls : ''));
    bar.setAttribute('role', 'img');
    var text = sharesText(parts.map(function (p) { return [p[0], p[1] / total]; }), opts.values);
    bar.setAttribute('aria-label', (opts.label ? opts.label + ': ' : '') + text);
    bar.title = text;
    parts.forEach(function (p) {
      if (!(p[1] > 0)) return;
      var seg = make('span', 'seg seg-' + p[0]);
      seg.style.width = (100 * p[1] / total) + '%';
      seg.style.background = categoryColor(p[0]);
      bar.appendChild(seg);
    });
    return bar;
  }

  function categoryBadge(cat) {
    var b = make('span', 'badge badge-cat badge-cat-' + cat, categoryLabel(cat));
    b.style.borderColor = categoryColor(cat);
    b.style.color = cat === 'rest' ? '#444' : categoryColor(cat);
    b.title = 'most of its samples are ' + ((CATEGORY[cat] || {}).title || cat);
    return b;
  }

  /* Legend of categories: <span class="cat-legend"><i></i>CPU ...</span>. */
  function categoryLegend(cats) {
    var box = make('div', 'cat-legend');
    cats.forEach(function (c) {
      var s = make('span', null);
      s.title = (CATEGORY[c] || {}).title || c;
      var key = make('i', 'cat-key');
      key.style.background = categoryColor(c);
      s.appendChild(key);
      s.appendChild(document.createTextNode(categoryLabel(c)));
      box.appendChild(s);
    });
    return box;
  }

  // ------------------------------------------------------------------- units

  var UNIT_LABEL = {line: 'line', 'function': 'function', callsite: 'call site'};

  function unitOf(l) { return l && (l.unit === 'function' || l.unit === 'callsite') ? l.unit : 'line'; }

  function unitKey(l) { return unitOf(l) + '\u0000' + l.line; }

  function fileOf(l) {
    if (typeof l.file === 'string') return l.file;
    return unitOf(l) === 'function' ? '' : l.line.replace(/:\d+$/, '');
  }

  function lineNoOf(l) {
    if (isNum(l.lineno)) return l.lineno;
    var m = /:(\d+)$/.exec(l.line);
    return m ? Number(m[1]) : 0;
  }

  /* A function as the analysis names it: 'name', or 'name [path]' when two
   * in-scope functions share the name. */
  function functionName(text) {
    var m = /^(.*) \[(.*)\]$/.exec(text || '');
    return m ? {name: m[1], path: m[2]} : {name: text || '', path: null};
  }

  Coz.isNum = isNum;
  Coz.pct = pct;
  Coz.share = share;
  Coz.num = num;
  Coz.time = time;
  Coz.rate = rate;
  Coz.make = make;
  Coz.button = button;
  Coz.note = note;
  Coz.basename = basename;
  Coz.shortLine = shortLine;
  Coz.CATEGORIES = CATEGORIES;
  Coz.CATEGORY = CATEGORY;
  Coz.categoryLabel = categoryLabel;
  Coz.categoryColor = categoryColor;
  Coz.unitShares = unitShares;
  Coz.offCpuCategory = offCpuCategory;
  Coz.sharesText = sharesText;
  Coz.shareBar = shareBar;
  Coz.categoryBadge = categoryBadge;
  Coz.categoryLegend = categoryLegend;
  Coz.UNIT_LABEL = UNIT_LABEL;
  Coz.unitOf = unitOf;
  Coz.unitKey = unitKey;
  Coz.fileOf = fileOf;
  Coz.lineNoOf = lineNoOf;
  Coz.functionName = functionName;
  Coz.views = Coz.views || {};
})();
