/* Causal profile viewer: one causal plot per line against one progress point.
 *
 * Reads only the analysis JSON described in docs/analysis-format.md; it never
 * parses a profile. The data comes from one of three places:
 *   - embedded in the page (<script id="coz-analysis" type="application/json">,
 *     written by `coz plot --html`), with source snippets in #coz-sources;
 *   - served by `coz view` at ./analysis.json, snippets at ./source?line=...
 *     (relative URLs: the page is at /<token>/, and every request must carry
 *     the token);
 *   - a file the user opens or drops (page opened from disk).
 * Plots are drawn with uPlot, and only for cards near the viewport, so a
 * profile with hundreds of lines stays responsive.
 */
(function () {
  'use strict';

  var PLOT_HEIGHT = 190;            // px, CSS size of one plot
  var LAZY_MARGIN = '600px 0px';    // plots are made this far outside the viewport
  var SNIPPET_CONTEXT = 2;          // lines shown above and below the profiled line
  var X_PAD = 3;                    // percent of line speedup added either side of 0..100

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
    snippetCache: new Map(), // line -> Promise of snippet or null
    plots: new Map(),        // card element -> uPlot instance
    observer: null
  };

  var el = {};

  function $(id) { return document.getElementById(id); }

  // ---------------------------------------------------------------- formatting

  function isNum(v) { return typeof v === 'number' && isFinite(v); }

  function pct(v, digits) {
    if (!isNum(v)) return 'n/a';
    var s = (v * 100).toFixed(digits === undefined ? 1 : digits);
    if (s === '-0.0' || s === '-0') s = s.slice(1);
    return (v > 0 && Number(s) !== 0 ? '+' : '') + s + '%';
  }

  function num(v, digits) { return isNum(v) ? v.toFixed(digits === undefined ? 2 : digits) : 'n/a'; }

  function make(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

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

  /* Returns {analysis, problems} or throws Error with a sentence for the user. */
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
      if (ok) good.push(l); else bad++;
    });
    var problems = [];
    if (bad) problems.push(bad + ' malformed line record' + (bad > 1 ? 's were' : ' was') + ' skipped.');
    var out = Object.assign({}, a, {lines: good});
    out.progress_points = Array.isArray(a.progress_points) ? a.progress_points : [];
    out.warnings = Array.isArray(a.warnings) ? a.warnings : [];
    out.omitted = Array.isArray(a.omitted) ? a.omitted : [];
    return {analysis: out, problems: problems};
  }

  function looksLikeProfile(text) {
    var first = text.slice(0, 2000).split('\n')[0].trim();
    if (/^startup\t/.test(first)) return true;
    try { var r = JSON.parse(first); return r && r.type === 'startup'; } catch (e) { return false; }
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
    showMessage(text + (hint ? '\n' + hint : ''), 'error');
  }

  function readFile(file) {
    if (!file) return;
    var reader = new FileReader();
    reader.onload = function () {
      // A file opened by hand has no server behind it for snippets.
      state.source = state.source === 'server' ? 'server' : 'none';
      loadText(String(reader.result), file.name);
    };
    reader.onerror = function () { fail(file.name + ': could not be read.'); };
    reader.readAsText(file);
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

  function setup() {
    var a = state.analysis;
    hideMessage();

    var points = progressPointNames(a);
    el.point.textContent = '';
    points.forEach(function (p) {
      var o = make('option', null, p.name + ' \u00b7 ' + (p.kind || '?') + ' \u00b7 ' + p.lines + ' line' + (p.lines === 1 ? '' : 's'));
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

    var s = a.summary || {};
    var parts = [];
    if (a._name) parts.push(a._name);
    else if (Array.isArray(a.profiles) && a.profiles.length) parts.push(a.profiles.join(', '));
    if (isNum(s.runs)) parts.push(s.runs + ' run' + (s.runs === 1 ? '' : 's'));
    if (isNum(s.experiments)) parts.push(s.experiments + ' experiments');
    if (isNum(s.runtime_ns)) parts.push((s.runtime_ns / 1e9).toFixed(1) + ' s');
    parts.push('phase correction ' + (a.phase_correction === false ? 'off' : 'on'));
    el.summary.textContent = parts.join(' · ');

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
      return;
    }
    render();
  }

  // -------------------------------------------------------------- list & sort

  var SORTS = {
    impact: function (a, b) { return key(b.impact) - key(a.impact) || byName(a, b); },
    slope: function (a, b) { return key(b.slope) - key(a.slope) || byName(a, b); },
    max_speedup: function (a, b) { return key(b.max_speedup) - key(a.max_speedup) || byName(a, b); },
    name: byName
  };

  function key(v) { return isNum(v) ? v : -Infinity; }

  function fileOf(l) { return typeof l.file === 'string' ? l.file : l.line.replace(/:\d+$/, ''); }

  function lineNoOf(l) {
    if (isNum(l.lineno)) return l.lineno;
    var m = /:(\d+)$/.exec(l.line);
    return m ? Number(m[1]) : 0;
  }

  function byName(a, b) {
    var fa = fileOf(a), fb = fileOf(b);
    return fa < fb ? -1 : fa > fb ? 1 : lineNoOf(a) - lineNoOf(b);
  }

  function visibleLines() {
    var a = state.analysis;
    var point = el.point.value;
    var minPoints = Number(el.minPoints.value) || 0;
    var filter = el.filter.value.trim().toLowerCase();
    var total = 0;
    var list = a.lines.filter(function (l) {
      if (l.progress_point !== point) return false;
      total++;
      if (l.points.length < minPoints) return false;
      return !filter || fileOf(l).toLowerCase().indexOf(filter) >= 0;
    });
    list.sort(SORTS[el.sort.value] || SORTS.impact);
    return {list: list, total: total};
  }

  // ------------------------------------------------------------------- render

  function clearPlots() {
    if (state.observer) state.observer.disconnect();
    state.plots.forEach(function (u) { u.destroy(); });
    state.plots.clear();
  }

  function render() {
    if (!state.analysis) return;
    clearPlots();
    var v = visibleLines();
    el.count.textContent = 'Showing ' + v.list.length + ' of ' + v.total + ' line' + (v.total === 1 ? '' : 's') +
      ' for this progress point.';
    el.plots.textContent = '';
    if (!v.list.length) {
      el.plots.appendChild(make('p', 'empty', v.total ?
        'No line matches the filters. Lower the minimum number of points or change the file name filter.' :
        'No line has results for this progress point.'));
      return;
    }
    var frag = document.createDocumentFragment();
    var cards = v.list.map(function (l, i) { var c = card(l, i + 1); frag.appendChild(c); return c; });
    el.plots.appendChild(frag);
    state.observer = new IntersectionObserver(onIntersect, {rootMargin: LAZY_MARGIN});
    cards.forEach(function (c) { state.observer.observe(c); });
  }

  function card(l, rank) {
    var c = make('article', 'card' + (l.contention ? ' contention' : ''));
    c._line = l;
    c.dataset.line = l.line;
    c.dataset.progressPoint = l.progress_point;

    var head = make('header');
    head.appendChild(make('span', 'rank', '#' + rank));
    var file = fileOf(l), slash = file.lastIndexOf('/');
    var name = make('span', 'line-name');
    name.title = l.line;
    if (slash >= 0) name.appendChild(make('span', 'dir', file.slice(0, slash + 1)));
    name.appendChild(make('span', 'base', file.slice(slash + 1) + ':' + lineNoOf(l)));
    head.appendChild(name);
    if (l.contention) head.appendChild(make('span', 'badge badge-contention', 'contention'));
    if (l.kind === 'latency') head.appendChild(make('span', 'badge badge-latency', 'latency'));
    c.appendChild(head);

    var stats = make('div', 'stats');
    stat(stats, 'impact', pct(l.impact), 'mean predicted program speedup over line speedups 0-100%');
    var ci = Array.isArray(l.slope_ci) && isNum(l.slope_ci[0]) ?
      ' [' + num(l.slope_ci[0]) + ', ' + num(l.slope_ci[1]) + ']' : '';
    stat(stats, 'slope', num(l.slope) + ci, 'program speedup per unit of line speedup, with its 95% interval');
    stat(stats, 'max', pct(l.max_speedup), 'highest measured program speedup');
    stat(stats, 'exps', isNum(l.experiments) ? String(l.experiments) : 'n/a', 'experiments on this line');
    c.appendChild(stats);

    var plot = make('div', 'plot');
    plot.style.height = PLOT_HEIGHT + 'px';
    c.appendChild(plot);

    if (state.source !== 'none') c.appendChild(make('pre', 'source'));
    return c;
  }

  function stat(parent, label, value, title) {
    var s = make('span', 'stat');
    s.title = title;
    s.appendChild(make('span', 'label', label + ' '));
    s.appendChild(make('b', null, value));
    parent.appendChild(s);
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
        {label: 'line speedup', labelSize: 16, size: 30, font: axisFont, labelFont: axisFont,
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
    attachTooltip(u, l, div);
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

  function attachTooltip(u, l, div) {
    var tip = make('div', 'tip');
    tip.hidden = true;
    u.over.appendChild(tip);
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
      tip.textContent = 'line ' + pct(best.speedup, 0) + ' \u2192 program ' + pct(best.program_speedup) + ci +
        (isNum(best.experiments) ? ', ' + best.experiments + ' exp.' : '');
      tip.hidden = false;
      tip.style.left = Math.min(mx + 10, u.over.clientWidth - tip.offsetWidth) + 'px';
      tip.style.top = Math.max(my - 28, 0) + 'px';
    });
    u.over.addEventListener('mouseleave', function () { tip.hidden = true; });
  }

  function resizePlots() {
    state.plots.forEach(function (u, c) {
      var w = Math.max(c.querySelector('.plot').clientWidth, 200);
      if (w !== u.width) u.setSize({width: w, height: PLOT_HEIGHT});
    });
  }

  // ------------------------------------------------------------------ sources

  function snippet(l) {
    if (state.source === 'embedded') return Promise.resolve(state.embeddedSources[l.line] || null);
    if (state.source !== 'server') return Promise.resolve(null);
    if (!state.snippetCache.has(l.line)) {
      state.snippetCache.set(l.line, fetch('source?context=' + SNIPPET_CONTEXT + '&line=' + encodeURIComponent(l.line))
        .then(function (r) { return r.ok ? r.json() : null; })
        .catch(function () { return null; }));
    }
    return state.snippetCache.get(l.line);
  }

  function showSnippet(pre, l) {
    snippet(l).then(function (s) {
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
    el.fileInput = $('file-input');
    el.overlay = $('drop-overlay');
    el.warningsList = el.warnings.querySelector('ul');
    el.warningsSummary = el.warnings.querySelector('summary');

    if (typeof uPlot === 'undefined') {
      return showMessage('The charting library (uPlot) did not load.\n' +
        'Run "npm ci --prefix viewer" in the project (its setup script does this), then reload.', 'error');
    }

    el.point.addEventListener('change', render);
    el.sort.addEventListener('change', render);
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
      readFile(el.fileInput.files[0]);
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
      if (files && files.length) readFile(files[0]);
    });

    var inline = embedded('coz-analysis');
    if (inline !== null) {
      var sources = embedded('coz-sources');
      if (sources) {
        try { state.embeddedSources = JSON.parse(sources) || {}; state.source = 'embedded'; } catch (e) { /* no snippets */ }
      }
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
      return;
    }
    showMessage('Open an analysis to see its causal plots.\n' +
      'Use "Open analysis JSON" or drop the file on this page. Make one with: coz report profile.coz --json analysis.json. ' +
      'Or run "coz view" next to your profile.', 'info');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
