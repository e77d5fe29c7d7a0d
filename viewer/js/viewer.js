/* Causal profile viewer: one causal plot per unit (line, function or call
 * site) against one progress point, and the views beside them: the units
 * table (units.js), where the threads' time went (threads.js), the locks
 * report (locks.js) and the flame graph (flame.js).
 *
 * Reads only the JSON described in docs/analysis-format.md (the analysis),
 * docs/locks.md (the locks report) and docs/viewer.md (the flame tree); it
 * never parses a profile. The data comes from one of three places:
 *   - embedded in the page (<script id="coz-analysis" type="application/json">,
 *     coz-sources, coz-locks and coz-flame), written by `coz plot --html`;
 *   - served by `coz view` at ./analysis.json, ./locks.json, ./flame.json,
 *     snippets at ./source?line=... (relative URLs: the page is at /<token>/,
 *     and every request must carry the token);
 *   - files the user opens or drops (page opened from disk).
 * Plots are drawn with uPlot, and only for cards near the viewport, so a
 * profile with hundreds of units stays responsive.
 */
(function () {
  'use strict';

  var Coz = window.Coz;
  var isNum = Coz.isNum, pct = Coz.pct, num = Coz.num, make = Coz.make;

  var PLOT_HEIGHT = 190;            // px, CSS size of one plot
  var LAZY_MARGIN = '600px 0px';    // plots are made this far outside the viewport
  var SNIPPET_CONTEXT = 2;          // lines shown above and below the profiled line
  var X_PAD = 3;                    // percent of line speedup added either side of 0..100
  var TABS = ['plots', 'units', 'threads', 'locks', 'flame'];
  var PHASE_SHOWN = 0.95;           // a card shows its phase factor under this (coz report's phase column)

  var COLORS = {
    fit: '#1f5fa8',
    band: 'rgba(31, 95, 168, 0.16)',
    point: '#0b2545',
    fitContention: '#b3261e',
    bandContention: 'rgba(179, 38, 30, 0.14)',
    pointContention: '#6e1510',
    zero: '#9aa0a6',
    grid: '#e6e8eb',
    axis: '#3c4043'
  };

  var state = {
    analysis: null,
    source: 'none',          // 'server', 'embedded' or 'none': where snippets come from
    embeddedSources: {},
    snippetCache: new Map(), // spec -> Promise of snippet or null
    plots: new Map(),        // card element -> uPlot instance
    observer: null,
    tab: 'plots',
    // Locks report and flame tree: {status: 'none'|'loading'|'ok'|'unavailable'|'error', data, reason, hint}
    extra: {locks: {status: 'none'}, flame: {status: 'none'}},
    dirty: {units: true, threads: true, locks: true, flame: true}  // views to render again when next shown
  };

  var el = {};

  function $(id) { return document.getElementById(id); }

  // ------------------------------------------------------------------ messages

  function showMessage(text, kind) {
    el.message.textContent = '';
    el.message.className = kind || 'info';
    var lines = String(text).split('\n');
    el.message.appendChild(make('strong', null, lines[0]));
    for (var i = 1; i < lines.length; i++) el.message.appendChild(make('p', null, lines[i]));
    el.message.hidden = false;
  }

  function hideMessage() { el.message.hidden = true; }

  // ---------------------------------------------------------------- validation

  function strings(v) { return Array.isArray(v) ? v.filter(function (s) { return typeof s === 'string'; }) : []; }

  /* Returns {analysis, problems} or throws Error with a sentence for the user.
   * Fields newer than the first analyses (units, time on and off the CPU,
   * threads) are optional: an older analysis shows without them. */
  function validate(a) {
    if (a === null || typeof a !== 'object' || Array.isArray(a)) {
      throw new Error('This is JSON, but not an analysis (expected an object with "schema" and "lines").');
    }
    if (!('schema' in a) || !Array.isArray(a.lines)) {
      throw new Error('This is JSON, but not an analysis: it has no "schema" and "lines" fields.');
    }
    if (a.schema !== 1) {
      throw new Error('Analysis schema ' + JSON.stringify(a.schema) + ' is not supported; this viewer reads schema 1.');
    }
    var good = [], bad = 0;
    a.lines.forEach(function (l) {
      var ok = l && typeof l.line === 'string' && typeof l.progress_point === 'string' &&
        Array.isArray(l.points) && l.points.every(function (p) {
          return p && isNum(p.speedup) && isNum(p.program_speedup);
        });
      if (!ok) { bad++; return; }
      good.push(Object.assign({}, l, {
        unit: Coz.unitOf(l),
        contains: strings(l.contains),
        called_from: strings(l.called_from),
        calls: strings(l.calls),
        'function': typeof l['function'] === 'string' ? l['function'] : null,
        off_cpu: l.off_cpu && typeof l.off_cpu === 'object' && !Array.isArray(l.off_cpu) ? l.off_cpu : {},
        category: typeof l.category === 'string' ? l.category : null
      }));
    });
    var problems = [];
    if (bad) problems.push(bad + ' malformed line record' + (bad > 1 ? 's were' : ' was') + ' skipped.');
    var out = Object.assign({}, a, {lines: good});
    out.progress_points = Array.isArray(a.progress_points) ? a.progress_points : [];
    out.warnings = Array.isArray(a.warnings) ? a.warnings : [];
    out.omitted = Array.isArray(a.omitted) ? a.omitted : [];
    var isThread = function (t) { return t && typeof t === 'object' && isNum(t.wall_ns); };
    out.threads = Array.isArray(a.threads) ? a.threads.filter(isThread) : [];
    out.thread_groups = Array.isArray(a.thread_groups) ? a.thread_groups.filter(isThread) : [];
    var kinds = {};
    good.forEach(function (l) { kinds[l.unit] = true; });
    out._unitKinds = ['line', 'function', 'callsite'].filter(function (u) { return kinds[u]; });
    out._index = new Map();
    good.forEach(function (l) { out._index.set(l.progress_point + '\u0000' + Coz.unitKey(l), l); });
    return {analysis: out, problems: problems};
  }

  function looksLikeProfile(text) {
    var first = text.slice(0, 2000).split('\n')[0].trim();
    if (/^startup\t/.test(first)) return true;
    try { var r = JSON.parse(first); return r && r.type === 'startup'; } catch (e) { return false; }
  }

  /* What a JSON object is: 'locks' (coz locks --json), 'flame' (the flame tree
   * coz view serves), or 'analysis' (anything else is checked as one). */
  function kindOf(data) {
    if (data && typeof data === 'object' && !Array.isArray(data)) {
      if (Array.isArray(data.findings) && Array.isArray(data.locks)) return 'locks';
      if (data.tree && typeof data.tree === 'object' && typeof data.value === 'string') return 'flame';
    }
    return 'analysis';
  }

  // ------------------------------------------------------------------- loading

  function loadText(text, name) {
    var label = name ? name + ': ' : '';
    if (!text || !text.trim()) {
      return fail(label + 'the file is empty.', 'Make an analysis with: coz report profile.coz --json analysis.json');
    }
    var data;
    try {
      data = JSON.parse(text);
    } catch (e) {
      if (looksLikeProfile(text)) {
        return fail(label + 'this is a profile, not an analysis.',
          'Open it with "coz view ' + (name || 'profile.coz') + '", or make an analysis with: coz report profile.coz --json analysis.json');
      }
      return fail(label + 'not valid JSON (' + e.message + ').',
        'The viewer reads the analysis written by: coz report profile.coz --json analysis.json');
    }
    var kind = kindOf(data);
    if (kind !== 'analysis') {
      setExtra(kind, {status: 'ok', data: data, name: name || ''});
      if (!state.analysis) {
        showMessage((name || 'The file') + ' is a ' + (kind === 'locks' ? 'locks report' : 'flame graph') +
          ': see the "' + (kind === 'locks' ? 'Locks' : 'Flame graph') + '" view.\n' +
          'Open an analysis too (coz report profile.coz --json analysis.json) for the causal plots.', 'info');
      }
      activateTab(kind);
      return;
    }
    loadData(data, name);
  }

  function loadData(data, name) {
    var checked;
    try {
      checked = validate(data);
    } catch (e) {
      return fail((name ? name + ': ' : '') + e.message);
    }
    state.analysis = checked.analysis;
    state.analysis._problems = checked.problems;
    state.analysis._name = name || '';
    state.snippetCache = new Map();
    TABS.forEach(function (t) { state.dirty[t] = true; });
    setup();
  }

  function fail(text, hint) {
    state.analysis = null;
    clearPlots();
    el.plots.textContent = '';
    el.warnings.hidden = true;
    el.count.textContent = '';
    el.summary.textContent = 'No analysis loaded.';
    el.point.textContent = '';
    el.point.disabled = true;
    TABS.forEach(function (t) { state.dirty[t] = true; });
    if (state.tab !== 'plots') showView(state.tab);
    showMessage(text + (hint ? '\n' + hint : ''), 'error');
  }

  function readFiles(files) {
    if (!files || !files.length) return;
    // Analyses last, so that a locks report opened with one is not reported alone.
    var list = Array.prototype.slice.call(files);
    var read = list.map(function (file) {
      return new Promise(function (resolve) {
        var reader = new FileReader();
        reader.onload = function () { resolve({file: file, text: String(reader.result)}); };
        reader.onerror = function () { resolve({file: file, error: true}); };
        reader.readAsText(file);
      });
    });
    Promise.all(read).then(function (results) {
      // A file opened by hand has no server behind it for snippets.
      state.source = state.source === 'server' ? 'server' : 'none';
      results.sort(function (a, b) { return rank(a) - rank(b); });
      results.forEach(function (r) {
        if (r.error) fail(r.file.name + ': could not be read.');
        else loadText(r.text, r.file.name);
      });
    });
    function rank(r) {
      try { return r.error ? 2 : kindOf(JSON.parse(r.text)) === 'analysis' ? 1 : 0; } catch (e) { return 1; }
    }
  }

  // --------------------------------------------- locks report and flame tree

  function setExtra(kind, value) {
    state.extra[kind] = value;
    state.dirty[kind] = true;
    if (state.tab === kind) showView(kind);
  }

  /* The locks report or flame tree: embedded, fetched once from the server, or
   * opened by hand. Returns a Promise of the state.extra entry. */
  function loadExtra(kind) {
    var cur = state.extra[kind];
    if (cur.status !== 'none' || state.source !== 'server') return Promise.resolve(cur);
    state.extra[kind] = {status: 'loading'};
    var url = kind + '.json';
    return fetch(url, {cache: 'no-store'}).then(function (r) {
      if (!r.ok) throw new Error('the server answered ' + r.status + ' for ' + url);
      return r.json();
    }).then(function (data) {
      acceptExtra(kind, data, '');
      return state.extra[kind];
    }, function (e) {
      setExtra(kind, {status: 'error', reason: 'Could not load ' + url + ': ' + e.message + '.',
        hint: 'Is "coz view" still running? Reload the page.'});
      return state.extra[kind];
    });
  }

  function acceptExtra(kind, data, name) {
    if (data && typeof data === 'object' && typeof data.unavailable === 'string') {
      setExtra(kind, {status: 'unavailable', reason: data.unavailable, hint: data.hint || ''});
    } else if (kindOf(data) !== kind) {
      setExtra(kind, {status: 'error', reason: (name ? name + ': ' : '') + 'this is not a ' +
        (kind === 'locks' ? 'locks report' : 'flame tree') + '.', hint: ''});
    } else {
      setExtra(kind, {status: 'ok', data: data, name: name});
    }
  }

  // --------------------------------------------------------------------- setup

  function progressPointNames(a) {
    var seen = new Map();
    a.progress_points.forEach(function (p) {
      if (p && typeof p.name === 'string') seen.set(p.name, {name: p.name, kind: p.kind, lines: 0});
    });
    a.lines.forEach(function (l) {
      if (!seen.has(l.progress_point)) seen.set(l.progress_point, {name: l.progress_point, kind: l.kind, lines: 0});
      seen.get(l.progress_point).lines++;
    });
    return Array.from(seen.values());
  }

  function unitWord(n) {
    var onlyLines = !state.analysis || state.analysis._unitKinds.every(function (u) { return u === 'line'; });
    return (onlyLines ? 'line' : 'unit') + (n === 1 ? '' : 's');
  }

  function setup() {
    var a = state.analysis;
    hideMessage();

    var points = progressPointNames(a);
    el.point.textContent = '';
    points.forEach(function (p) {
      var o = make('option', null, p.name + ' \u00b7 ' + (p.kind || '?') + ' \u00b7 ' + p.lines + ' ' + unitWord(p.lines));
      o.value = p.name;
      el.point.appendChild(o);
    });
    var first = points.filter(function (p) { return p.lines > 0; })[0] || points[0];
    if (first) el.point.value = first.name;
    el.point.disabled = points.length < 2;

    var maxPoints = a.lines.reduce(function (m, l) { return Math.max(m, l.points.length); }, 0);
    el.minPoints.max = String(Math.max(maxPoints, 1));
    if (Number(el.minPoints.value) > maxPoints) el.minPoints.value = '0';
    el.minPointsValue.textContent = el.minPoints.value;

    // Unit kinds: the filter shows only when the analysis has more than one.
    el.unitFilter.value = 'all';
    Array.prototype.forEach.call(el.unitFilter.options, function (o) {
      o.hidden = o.value !== 'all' && a._unitKinds.indexOf(o.value) < 0;
    });
    el.unitFilterBox.hidden = a._unitKinds.length < 2;

    // Time on and off the CPU: the filter lists the categories present.
    var cats = {};
    a.lines.forEach(function (l) { if (l.category) cats[l.category] = true; });
    el.timeFilter.textContent = '';
    var opts = [['all', 'any'], ['cpu', 'mostly on the CPU'], ['off', 'mostly off the CPU (any wait)']];
    Coz.CATEGORIES.forEach(function (c) {
      if (c !== 'cpu' && cats[c]) opts.push([c, 'mostly waiting: ' + Coz.categoryLabel(c)]);
    });
    opts.forEach(function (o) { var e = make('option', null, o[1]); e.value = o[0]; el.timeFilter.appendChild(e); });
    el.timeFilter.value = 'all';
    el.timeFilterBox.hidden = Object.keys(cats).length === 0;
    el.timeLegend.hidden = el.timeFilterBox.hidden;

    var s = a.summary || {};
    var parts = [];
    if (a._name) parts.push(a._name);
    else if (Array.isArray(a.profiles) && a.profiles.length) parts.push(a.profiles.join(', '));
    if (isNum(s.runs)) parts.push(s.runs + ' run' + (s.runs === 1 ? '' : 's'));
    if (isNum(s.experiments)) parts.push(s.experiments + ' experiments');
    if (isNum(s.runtime_ns)) parts.push((s.runtime_ns / 1e9).toFixed(1) + ' s');
    parts.push('phase correction ' + (a.phase_correction === false ? 'off' : 'on'));
    el.summary.textContent = parts.join(' \u00b7 ');

    var notes = a._problems.concat(a.warnings.map(String));
    if (a.omitted.length) {
      notes.push(a.omitted.length + ' line/progress point pair' + (a.omitted.length === 1 ? ' was' : 's were') +
        ' left out of the analysis (for instance ' + a.omitted[0].line + ': ' +
        (a.omitted[0].detail || a.omitted[0].reason) + ').');
    }
    el.warningsList.textContent = '';
    notes.forEach(function (w) { el.warningsList.appendChild(make('li', null, w)); });
    el.warningsSummary.textContent = notes.length + ' note' + (notes.length === 1 ? '' : 's') + ' about this analysis';
    el.warnings.hidden = notes.length === 0;

    if (!a.lines.length) {
      clearPlots();
      el.plots.textContent = '';
      el.count.textContent = '';
      showMessage((a.diagnosis || 'This analysis has no line with enough data to plot.') +
        '\nRun the program longer or more often (coz run repeats runs and adds to the profile), then look again.', 'warning');
      if (state.tab !== 'plots') showView(state.tab);
      return;
    }
    render();
    if (state.tab !== 'plots') showView(state.tab);
  }

  // -------------------------------------------------------------- list & sort

  var SORTS = {
    impact: function (a, b) { return key(b.impact) - key(a.impact) || byName(a, b); },
    slope: function (a, b) { return key(b.slope) - key(a.slope) || byName(a, b); },
    max_speedup: function (a, b) { return key(b.max_speedup) - key(a.max_speedup) || byName(a, b); },
    name: byName
  };

  function key(v) { return isNum(v) ? v : -Infinity; }

  var fileOf = Coz.fileOf, lineNoOf = Coz.lineNoOf;

  function byName(a, b) {
    var fa = fileOf(a), fb = fileOf(b);
    if (fa !== fb) return fa < fb ? -1 : 1;
    return lineNoOf(a) - lineNoOf(b) || (a.line < b.line ? -1 : a.line > b.line ? 1 : 0) ||
      (a.unit < b.unit ? -1 : a.unit > b.unit ? 1 : 0);
  }

  function matchesTime(l, want) {
    if (want === 'all') return true;
    if (want === 'off') return !!Coz.offCpuCategory(l);
    return l.category === want;
  }

  /* The units of the progress point that pass the sidebar's filters, sorted. */
  function visibleLines() {
    var a = state.analysis;
    if (!a) return {list: [], total: 0};
    var point = el.point.value;
    var minPoints = Number(el.minPoints.value) || 0;
    var filter = el.filter.value.trim().toLowerCase();
    var unit = el.unitFilter.value || 'all';
    var time = el.timeFilter.value || 'all';
    var total = 0;
    var list = a.lines.filter(function (l) {
      if (l.progress_point !== point) return false;
      total++;
      if (l.points.length < minPoints) return false;
      if (unit !== 'all' && l.unit !== unit) return false;
      if (!matchesTime(l, time)) return false;
      return !filter || fileOf(l).toLowerCase().indexOf(filter) >= 0 ||
        (l.unit === 'function' && l.line.toLowerCase().indexOf(filter) >= 0);
    });
    list.sort(SORTS[el.sort.value] || SORTS.impact);
    return {list: list, total: total};
  }

  /* The curve of `line` (a 'path:line' or a function's name) for the progress
   * point, of the first unit kind in `units` that has one. */
  function findCurve(line, point, units) {
    var a = state.analysis;
    if (!a) return null;
    units = units || ['line', 'callsite', 'function'];
    for (var i = 0; i < units.length; i++) {
      var l = a._index.get(point + '\u0000' + units[i] + '\u0000' + line);
      if (l) return l;
    }
    return null;
  }

  /* The curve of `line` for the current progress point, else for any point. */
  function findAnyCurve(line, units, point) {
    var a = state.analysis;
    if (!a) return null;
    var here = findCurve(line, point || el.point.value, units);
    if (here) return here;
    var points = progressPointNames(a);
    for (var i = 0; i < points.length; i++) {
      var l = findCurve(line, points[i].name, units);
      if (l) return l;
    }
    return null;
  }

  // ------------------------------------------------------------------- render

  function clearPlots() {
    if (state.observer) state.observer.disconnect();
    state.plots.forEach(function (u) { u.destroy(); });
    state.plots.clear();
  }

  function render() {
    state.dirty.units = true;
    if (state.tab === 'units') showView('units');
    if (state.tab === 'flame') showView('flame', {keep: true});
    if (!state.analysis) return;
    clearPlots();
    var v = visibleLines();
    el.count.textContent = 'Showing ' + v.list.length + ' of ' + v.total + ' ' + unitWord(v.total) +
      ' for this progress point.';
    el.plots.textContent = '';
    if (!v.list.length) {
      el.plots.appendChild(make('p', 'empty', v.total ?
        'No ' + unitWord(1) + ' matches the filters. Lower the minimum number of points or change the other filters.' :
        'No ' + unitWord(1) + ' has results for this progress point.'));
      return;
    }
    var frag = document.createDocumentFragment();
    var cards = v.list.map(function (l, i) { var c = card(l, i + 1); frag.appendChild(c); return c; });
    el.plots.appendChild(frag);
    state.observer = new IntersectionObserver(onIntersect, {rootMargin: LAZY_MARGIN});
    cards.forEach(function (c) { state.observer.observe(c); });
  }

  function unitName(l) {
    var name = make('span', 'line-name');
    name.title = l.line + (l.unit === 'function' && fileOf(l) ? ' (' + fileOf(l) + ')' : '');
    if (l.unit === 'function') {
      name.classList.add('fn-name');
      name.appendChild(make('span', 'base', Coz.functionName(l.line).name));
      if (fileOf(l)) name.appendChild(make('span', 'dir', ' ' + Coz.basename(fileOf(l))));
      return name;
    }
    var file = fileOf(l), slash = file.lastIndexOf('/');
    if (slash >= 0) name.appendChild(make('span', 'dir', file.slice(0, slash + 1)));
    name.appendChild(make('span', 'base', file.slice(slash + 1) + ':' + lineNoOf(l)));
    return name;
  }

  function unitChip(l) {
    var c = make('span', 'unit-chip unit-' + l.unit, Coz.UNIT_LABEL[l.unit]);
    c.title = {line: 'a source line', 'function': 'a whole function', callsite: 'a call: the line that calls, and everything it calls'}[l.unit];
    return c;
  }

  /* One card: header, figures, time on and off the CPU, nesting, plot, source.
   * opts.rank: the number shown; opts.compact: no source box. */
  function card(l, rank, opts) {
    opts = opts || {};
    var a = state.analysis;
    var off = Coz.offCpuCategory(l);
    var c = make('article', 'card' + (l.contention ? ' contention' : '') + (off ? ' offcpu' : ''));
    c._line = l;
    c.tabIndex = -1;
    c.dataset.line = l.line;
    c.dataset.unit = l.unit;
    c.dataset.progressPoint = l.progress_point;
    if (l.category) c.dataset.category = l.category;
    if (off) c.style.setProperty('--cat', Coz.categoryColor(off));

    var head = make('header');
    if (rank) head.appendChild(make('span', 'rank', '#' + rank));
    if (a && a._unitKinds.length > 1) head.appendChild(unitChip(l));
    head.appendChild(unitName(l));
    if (off) head.appendChild(Coz.categoryBadge(off));
    if (l.contention) head.appendChild(make('span', 'badge badge-contention', 'contention'));
    if (l.kind === 'latency') head.appendChild(make('span', 'badge badge-latency', 'latency'));
    c.appendChild(head);

    var stats = make('div', 'stats');
    stat(stats, 'impact', pct(l.impact), 'mean predicted program speedup over ' + Coz.UNIT_LABEL[l.unit] + ' speedups 0-100%');
    var ci = Array.isArray(l.slope_ci) && isNum(l.slope_ci[0]) ?
      ' [' + num(l.slope_ci[0]) + ', ' + num(l.slope_ci[1]) + ']' : '';
    stat(stats, 'slope', num(l.slope) + ci, 'program speedup per unit of ' + Coz.UNIT_LABEL[l.unit] + ' speedup, with its 95% interval');
    stat(stats, 'max', pct(l.max_speedup), 'highest measured program speedup');
    // As `coz report`'s phase column: shown where eq. 8 scaled the curve.
    if (isNum(l.phase_factor) && l.phase_factor < PHASE_SHOWN) {
      stat(stats, 'phase', 'x' + l.phase_factor.toFixed(2), 'phase correction: every figure of this curve was ' +
        'multiplied by this factor (the ' + Coz.UNIT_LABEL[l.unit] + ' ran in only part of the run; eq. 8 of the COZ paper)');
    }
    stat(stats, 'exps', isNum(l.experiments) ? String(l.experiments) : 'n/a', 'experiments on this ' + Coz.UNIT_LABEL[l.unit]);
    c.appendChild(stats);

    var shares = Coz.unitShares(l);
    if (shares) {
      var t = make('div', 'time-share');
      t.appendChild(make('span', 'label', 'time'));
      t.appendChild(Coz.shareBar(shares, {label: 'time of its samples'}));
      var text = make('span', 'time-text', Coz.sharesText(shares));
      if (isNum(l.samples)) text.title = l.samples + ' samples (on and off the CPU)';
      t.appendChild(text);
      c.appendChild(t);
    }

    var rel = relations(l);
    if (rel) c.appendChild(rel);

    var plot = make('div', 'plot');
    plot.style.height = PLOT_HEIGHT + 'px';
    c.appendChild(plot);

    if (state.source !== 'none' && !opts.compact && snippetSpec(l)) c.appendChild(make('pre', 'source'));
    return c;
  }

  function stat(parent, label, value, title) {
    var s = make('span', 'stat');
    s.title = title;
    s.appendChild(make('span', 'label', label + ' '));
    s.appendChild(make('b', null, value));
    parent.appendChild(s);
  }

  /* Where a unit sits among the others: a line's or call site's function, the
   * functions a call site calls, and a function's lines and callers' call
   * sites (buttons that open their cards). Null when there is nothing. */
  function relations(l) {
    var box = make('div', 'relations');
    var any = false;
    if (l['function'] && l.unit !== 'function') {
      any = true;
      var p = make('div', 'rel');
      p.appendChild(make('span', 'label', 'in '));
      p.appendChild(unitLink(findCurve(l['function'], l.progress_point, ['function']), Coz.functionName(l['function']).name));
      box.appendChild(p);
    }
    if (l.unit === 'callsite' && l.calls.length) {
      any = true;
      var q = make('div', 'rel');
      q.appendChild(make('span', 'label', 'calls '));
      l.calls.forEach(function (fn, i) {
        if (i) q.appendChild(document.createTextNode(', '));
        q.appendChild(unitLink(findCurve(fn, l.progress_point, ['function']), Coz.functionName(fn).name));
      });
      box.appendChild(q);
    }
    if (l.unit === 'function' && (l.contains.length || l.called_from.length)) {
      any = true;
      var d = make('details', 'nest');
      var parts = [];
      if (l.contains.length) parts.push(l.contains.length + ' line' + (l.contains.length === 1 ? '' : 's') + ' in it');
      if (l.called_from.length) parts.push(l.called_from.length + ' call site' + (l.called_from.length === 1 ? '' : 's') + ' calling it');
      d.appendChild(make('summary', null, parts.join(', ')));
      var ul = make('ul', 'nest-list');
      l.contains.forEach(function (spec) { ul.appendChild(nestItem(findCurve(spec, l.progress_point, ['line']), spec, 'line')); });
      l.called_from.forEach(function (spec) { ul.appendChild(nestItem(findCurve(spec, l.progress_point, ['callsite']), spec, 'callsite')); });
      d.appendChild(ul);
      box.appendChild(d);
    }
    return any ? box : null;
  }

  function unitLink(target, text) {
    if (!target) return make('code', null, text);
    var b = Coz.button('link unit-link', text, 'show the ' + Coz.UNIT_LABEL[target.unit] + ' ' + target.line);
    b.addEventListener('click', function () { openUnit(target); });
    return b;
  }

  function nestItem(target, spec, unit) {
    var li = make('li');
    li.appendChild(make('span', 'unit-chip unit-' + unit, Coz.UNIT_LABEL[unit]));
    li.appendChild(unitLink(target, Coz.shortLine(spec)));
    if (target) {
      li.appendChild(make('span', 'nest-impact', pct(target.impact)));
      var off = Coz.offCpuCategory(target);
      if (off) li.appendChild(Coz.categoryBadge(off));
    }
    return li;
  }

  function onIntersect(entries) {
    entries.forEach(function (e) {
      var c = e.target;
      if (e.isIntersecting) {
        if (!state.plots.has(c)) state.plots.set(c, drawPlot(c, c._line));
        var pre = c.querySelector('pre.source');
        if (pre && !pre.dataset.loaded) { pre.dataset.loaded = '1'; showSnippet(pre, c._line); }
      } else if (state.plots.has(c)) {
        // Far from view: free the canvas, it is redrawn when it comes back.
        state.plots.get(c).destroy();
        state.plots.delete(c);
        c.classList.remove('plotted');
      }
    });
  }

  /* A card with its plot drawn now, for the views' side panels; free it with
   * releaseCards(container) before dropping the container's contents. */
  function drawnCard(l, opts) {
    var c = card(l, null, opts);
    c.classList.add('panel-card');
    requestAnimationFrame(function () {
      if (!c.isConnected) return;
      c._uplot = drawPlot(c, l);
      var pre = c.querySelector('pre.source');
      if (pre) { pre.dataset.loaded = '1'; showSnippet(pre, l); }
    });
    return c;
  }

  function releaseCards(container) {
    Array.prototype.forEach.call(container.querySelectorAll('.card'), function (c) {
      if (c._uplot) { c._uplot.destroy(); c._uplot = null; }
    });
  }

  /* Shows a unit's card in the causal plots: its progress point, the filters
   * cleared as far as they hide it, scrolled to and focused. */
  function openUnit(l) {
    if (!l || !state.analysis) return;
    activateTab('plots');
    if (el.point.value !== l.progress_point) el.point.value = l.progress_point;
    if (l.points.length < (Number(el.minPoints.value) || 0)) { el.minPoints.value = '0'; el.minPointsValue.textContent = '0'; }
    if (el.unitFilter.value !== 'all' && el.unitFilter.value !== l.unit) el.unitFilter.value = 'all';
    if (!matchesTime(l, el.timeFilter.value)) el.timeFilter.value = 'all';
    var f = el.filter.value.trim().toLowerCase();
    if (f && fileOf(l).toLowerCase().indexOf(f) < 0 && l.line.toLowerCase().indexOf(f) < 0) el.filter.value = '';
    render();
    var target = null;
    Array.prototype.some.call(el.plots.querySelectorAll('.card'), function (c) {
      if (c._line === l) { target = c; return true; }
      return false;
    });
    if (!target) return;
    target.scrollIntoView({block: 'center'});
    target.focus({preventScroll: true});
    target.classList.remove('flash');
    void target.offsetWidth;
    target.classList.add('flash');
  }

  // --------------------------------------------------------------------- plot

  function yRange(l) {
    var lo = 0, hi = 0;
    function take(v) { if (isNum(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }
    l.points.forEach(function (p) {
      take(p.program_speedup);
      if (Array.isArray(p.ci)) { take(p.ci[0]); take(p.ci[1]); }
    });
    fitAt(l, 100).forEach(take);
    take(fitAt(l, 0)[0]);
    lo *= 100; hi *= 100;
    var span = Math.max(hi - lo, 4);
    var pad = span * 0.08;
    return [lo - pad, lo + span + pad];
  }

  /* [fit, band low, band high] at line speedup x (percent), as fractions. */
  function fitAt(l, x) {
    var b = isNum(l.intercept) ? l.intercept : 0;
    var out = [isNum(l.slope) ? b + l.slope * x / 100 : null];
    if (Array.isArray(l.slope_ci) && isNum(l.slope_ci[0]) && isNum(l.slope_ci[1])) {
      out.push(b + l.slope_ci[0] * x / 100, b + l.slope_ci[1] * x / 100);
    }
    return out;
  }

  function drawPlot(c, l) {
    var div = c.querySelector('.plot');
    var colors = l.contention ?
      {fit: COLORS.fitContention, band: COLORS.bandContention, point: COLORS.pointContention} :
      {fit: COLORS.fit, band: COLORS.band, point: COLORS.point};
    var f0 = fitAt(l, 0), f1 = fitAt(l, 100);
    var data = [[0, 100], [f0[0] === null ? null : f0[0] * 100, f1[0] === null ? null : f1[0] * 100]];
    var series = [{}, {stroke: colors.fit, width: 2, points: {show: false}}];
    var bands;
    if (f0.length === 3) {
      data.push([f0[1] * 100, f1[1] * 100], [f0[2] * 100, f1[2] * 100]);
      series.push({stroke: 'transparent', width: 0, points: {show: false}},
        {stroke: 'transparent', width: 0, points: {show: false}});
      var upper = f1[2] >= f1[1] ? 3 : 2;
      bands = [{series: [upper, 5 - upper], fill: colors.band}];
    }
    var axisFont = '11px system-ui, sans-serif';
    var opts = {
      width: Math.max(div.clientWidth, 200),
      height: PLOT_HEIGHT,
      legend: {show: false},
      cursor: {show: false},
      // A little room either side so the points at 0% and 100% are whole.
      scales: {x: {time: false, range: [-X_PAD, 100 + X_PAD]}, y: {range: yRange(l)}},
      axes: [
        {label: Coz.UNIT_LABEL[l.unit] + ' speedup', labelSize: 16, size: 30, font: axisFont, labelFont: axisFont,
          stroke: COLORS.axis, grid: {stroke: COLORS.grid, width: 1}, ticks: {show: false},
          splits: function () { return [0, 20, 40, 60, 80, 100]; },
          values: function (u, vals) { return vals.map(function (v) { return v + '%'; }); }},
        {label: 'program speedup', labelSize: 16, size: 46, font: axisFont, labelFont: axisFont,
          stroke: COLORS.axis, grid: {stroke: COLORS.grid, width: 1}, ticks: {show: false},
          values: function (u, vals) { return vals.map(function (v) { return +v.toFixed(1) + '%'; }); }}
      ],
      series: series,
      hooks: {draw: [function (u) { drawPoints(u, l, colors.point); }]}
    };
    if (bands) opts.bands = bands;
    var u = new uPlot(opts, data, div);
    attachTooltip(u, l);
    c.classList.add('plotted');
    return u;
  }

  function drawPoints(u, l, color) {
    var ctx = u.ctx, dpr = window.devicePixelRatio || 1;
    var box = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(box.left, box.top, box.width, box.height);
    ctx.clip();
    // Zero line: above it the program gets faster, below slower.
    var y0 = Math.round(u.valToPos(0, 'y', true)) + 0.5;
    ctx.strokeStyle = COLORS.zero;
    ctx.lineWidth = dpr;
    ctx.setLineDash([4 * dpr, 3 * dpr]);
    ctx.beginPath(); ctx.moveTo(box.left, y0); ctx.lineTo(box.left + box.width, y0); ctx.stroke();
    ctx.setLineDash([]);
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 1.5 * dpr;
    var cap = 3.5 * dpr, r = 3.2 * dpr;
    l.points.forEach(function (p) {
      var x = u.valToPos(p.speedup * 100, 'x', true);
      if (Array.isArray(p.ci) && isNum(p.ci[0]) && isNum(p.ci[1])) {
        var ya = u.valToPos(p.ci[0] * 100, 'y', true), yb = u.valToPos(p.ci[1] * 100, 'y', true);
        ctx.beginPath();
        ctx.moveTo(x, ya); ctx.lineTo(x, yb);
        ctx.moveTo(x - cap, ya); ctx.lineTo(x + cap, ya);
        ctx.moveTo(x - cap, yb); ctx.lineTo(x + cap, yb);
        ctx.stroke();
      }
      ctx.beginPath();
      ctx.arc(x, u.valToPos(p.program_speedup * 100, 'y', true), r, 0, 2 * Math.PI);
      ctx.fill();
    });
    ctx.restore();
  }

  function attachTooltip(u, l) {
    var tip = make('div', 'tip');
    tip.hidden = true;
    u.over.appendChild(tip);
    var word = Coz.UNIT_LABEL[l.unit];
    u.over.addEventListener('mousemove', function (ev) {
      var rect = u.over.getBoundingClientRect();
      var mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
      var best = null, bestD = 14 * 14;
      l.points.forEach(function (p) {
        var dx = u.valToPos(p.speedup * 100, 'x') - mx, dy = u.valToPos(p.program_speedup * 100, 'y') - my;
        if (dx * dx + dy * dy < bestD) { bestD = dx * dx + dy * dy; best = p; }
      });
      if (!best) { tip.hidden = true; return; }
      var ci = Array.isArray(best.ci) ? ' [' + pct(best.ci[0]) + ', ' + pct(best.ci[1]) + ']' : '';
      tip.textContent = word + ' ' + pct(best.speedup, 0) + ' \u2192 program ' + pct(best.program_speedup) + ci +
        (isNum(best.experiments) ? ', ' + best.experiments + ' exp.' : '');
      tip.hidden = false;
      tip.style.left = Math.min(mx + 10, u.over.clientWidth - tip.offsetWidth) + 'px';
      tip.style.top = Math.max(my - 28, 0) + 'px';
    });
    u.over.addEventListener('mouseleave', function () { tip.hidden = true; });
  }

  function resizePlots() {
    function fit(u, c) {
      var w = Math.max(c.querySelector('.plot').clientWidth, 200);
      if (w !== u.width) u.setSize({width: w, height: PLOT_HEIGHT});
    }
    state.plots.forEach(fit);
    Array.prototype.forEach.call(document.querySelectorAll('.panel-card'), function (c) { if (c._uplot) fit(c._uplot, c); });
    var v = Coz.views[state.tab];
    if (v && v.resize) v.resize();
  }

  // ------------------------------------------------------------------ sources

  /* The 'path:line' whose source a card shows: the line or call site itself,
   * a function's first line; null when unknown. */
  function snippetSpec(l) {
    if (l.unit !== 'function') return l.line;
    return fileOf(l) && lineNoOf(l) > 0 ? fileOf(l) + ':' + lineNoOf(l) : null;
  }

  function snippet(spec) {
    if (state.source === 'embedded') return Promise.resolve(state.embeddedSources[spec] || null);
    if (state.source !== 'server') return Promise.resolve(null);
    if (!state.snippetCache.has(spec)) {
      state.snippetCache.set(spec, fetch('source?context=' + SNIPPET_CONTEXT + '&line=' + encodeURIComponent(spec))
        .then(function (r) { return r.ok ? r.json() : null; })
        .catch(function () { return null; }));
    }
    return state.snippetCache.get(spec);
  }

  function showSnippet(pre, l) {
    var spec = snippetSpec(l);
    snippet(spec).then(function (s) {
      pre.textContent = '';
      if (!s || !Array.isArray(s.lines)) {
        pre.classList.add('missing');
        pre.textContent = 'source not available for ' + fileOf(l);
        return;
      }
      var want = lineNoOf(l);
      var first = Math.max(s.first, want - SNIPPET_CONTEXT);
      var width = String(s.first + s.lines.length - 1).length;
      s.lines.forEach(function (text, i) {
        var n = s.first + i;
        if (n < first || n > want + SNIPPET_CONTEXT) return;
        var row = make('span', n === want ? 'src-line hit' : 'src-line');
        row.appendChild(make('span', 'src-no', String(n).padStart(width, ' ') + ' '));
        row.appendChild(document.createTextNode(text + '\n'));
        pre.appendChild(row);
      });
    });
  }

  // --------------------------------------------------------------------- tabs

  function activateTab(name, focus) {
    if (TABS.indexOf(name) < 0) name = 'plots';
    state.tab = name;
    TABS.forEach(function (t) {
      var tab = $('tab-' + t), panel = $('view-' + t);
      var on = t === name;
      tab.setAttribute('aria-selected', on ? 'true' : 'false');
      tab.tabIndex = on ? 0 : -1;
      panel.hidden = !on;
    });
    if (focus) $('tab-' + name).focus();
    if (location.hash !== '#' + name && history.replaceState) {
      try { history.replaceState(null, '', '#' + name); } catch (e) { /* file:// in some browsers */ }
    }
    document.body.dataset.view = name;
    if (name === 'plots') {
      // Cards laid out while hidden have no width: draw what is in view again.
      if (state.analysis) requestAnimationFrame(resizePlots);
    } else {
      showView(name);
    }
  }

  /* Renders a view when its data changed since it was last shown. */
  function showView(name, opts) {
    var v = Coz.views[name];
    if (!v || state.tab !== name) return;
    if (name === 'locks' || name === 'flame') {
      var ex = state.extra[name];
      if (ex.status === 'none' && state.source === 'server') {
        loadExtra(name);
        ex = state.extra[name];
      }
    }
    if (!state.dirty[name] && !(opts && opts.keep)) return;
    state.dirty[name] = false;
    v.render($('view-' + name), opts || {});
  }

  function tabKeys(e) {
    var i = TABS.indexOf(state.tab), next = null;
    if (e.key === 'ArrowRight') next = TABS[(i + 1) % TABS.length];
    else if (e.key === 'ArrowLeft') next = TABS[(i + TABS.length - 1) % TABS.length];
    else if (e.key === 'Home') next = TABS[0];
    else if (e.key === 'End') next = TABS[TABS.length - 1];
    if (next) { e.preventDefault(); activateTab(next, true); }
  }

  // ---------------------------------------------------------------- the API

  /* What the other views use. */
  Coz.app = {
    analysis: function () { return state.analysis; },
    point: function () { return el.point ? el.point.value : ''; },
    visibleLines: visibleLines,
    findCurve: findCurve,
    findAnyCurve: findAnyCurve,
    extra: function (kind) { return state.extra[kind]; },
    source: function () { return state.source; },
    card: card,
    drawnCard: drawnCard,
    releaseCards: releaseCards,
    openUnit: openUnit,
    unitChip: unitChip,
    unitName: unitName,
    activateTab: activateTab
  };

  // -------------------------------------------------------------------- start

  function embedded(id) {
    var node = document.getElementById(id);
    return node ? node.textContent : null;
  }

  function start() {
    ['message', 'plots', 'count', 'summary', 'warnings'].forEach(function (k) { el[k] = $(k); });
    el.point = $('progress-point');
    el.sort = $('sort-by');
    el.minPoints = $('min-points');
    el.minPointsValue = $('min-points-value');
    el.filter = $('file-filter');
    el.unitFilter = $('unit-filter');
    el.unitFilterBox = $('unit-filter-box');
    el.timeFilter = $('time-filter');
    el.timeFilterBox = $('time-filter-box');
    el.timeLegend = $('time-legend');
    el.fileInput = $('file-input');
    el.overlay = $('drop-overlay');
    el.warningsList = el.warnings.querySelector('ul');
    el.warningsSummary = el.warnings.querySelector('summary');
    el.timeLegend.appendChild(Coz.categoryLegend(['cpu', 'io', 'lock', 'sync', 'sleep', 'sched']));

    TABS.forEach(function (t) {
      $('tab-' + t).addEventListener('click', function () { activateTab(t); });
    });
    $('tabs').addEventListener('keydown', tabKeys);
    var fromHash = location.hash.replace(/^#/, '');
    activateTab(TABS.indexOf(fromHash) >= 0 ? fromHash : 'plots');

    if (typeof uPlot === 'undefined') {
      return showMessage('The charting library (uPlot) did not load.\n' +
        'Run "npm ci --prefix viewer" in the project (its setup script does this), then reload.', 'error');
    }

    el.point.addEventListener('change', render);
    el.sort.addEventListener('change', render);
    el.unitFilter.addEventListener('change', render);
    el.timeFilter.addEventListener('change', render);
    el.minPoints.addEventListener('input', function () {
      el.minPointsValue.textContent = el.minPoints.value;
      render();
    });
    var filterTimer = 0;
    el.filter.addEventListener('input', function () {
      clearTimeout(filterTimer);
      filterTimer = setTimeout(render, 120);
    });
    el.fileInput.addEventListener('change', function () {
      readFiles(el.fileInput.files);
      el.fileInput.value = '';
    });
    var resizeTimer = 0;
    window.addEventListener('resize', function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(resizePlots, 150);
    });

    var depth = 0;
    document.addEventListener('dragenter', function (e) { e.preventDefault(); depth++; el.overlay.hidden = false; });
    document.addEventListener('dragover', function (e) { e.preventDefault(); });
    document.addEventListener('dragleave', function () { if (--depth <= 0) { depth = 0; el.overlay.hidden = true; } });
    document.addEventListener('drop', function (e) {
      e.preventDefault();
      depth = 0;
      el.overlay.hidden = true;
      var files = e.dataTransfer && e.dataTransfer.files;
      if (files && files.length) readFiles(files);
    });

    var inline = embedded('coz-analysis');
    if (inline !== null) {
      var sources = embedded('coz-sources');
      if (sources) {
        try { state.embeddedSources = JSON.parse(sources) || {}; state.source = 'embedded'; } catch (e) { /* no snippets */ }
      }
      ['locks', 'flame'].forEach(function (kind) {
        var text = embedded('coz-' + kind);
        if (text === null) return;
        try { acceptExtra(kind, JSON.parse(text), ''); } catch (e) {
          setExtra(kind, {status: 'error', reason: 'The embedded ' + kind + ' data is not valid JSON (' + e.message + ').', hint: ''});
        }
      });
      return loadText(inline, '');
    }
    if (/^https?:$/.test(location.protocol)) {
      state.source = 'server';
      fetch('analysis.json', {cache: 'no-store'}).then(function (r) {
        if (!r.ok) throw new Error('the server answered ' + r.status + ' for analysis.json');
        return r.text();
      }).then(function (text) { loadText(text, ''); }, function (e) {
        fail('Could not load the analysis: ' + e.message + '.', 'Is "coz view" still running? Or open an analysis JSON file.');
      });
      if (state.tab === 'locks' || state.tab === 'flame') showView(state.tab);
      return;
    }
    showMessage('Open an analysis to see its causal plots.\n' +
      'Use "Open analysis JSON" or drop the file on this page. Make one with: coz report profile.coz --json analysis.json. ' +
      'Or run "coz view" next to your profile.', 'info');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
