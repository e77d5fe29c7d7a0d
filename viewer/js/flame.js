/* The flame graph view: the profile's stacks (the flame tree coz view serves,
 * docs/viewer.md) drawn with d3-flame-graph, beside the causal plots. Time on
 * the CPU by default; waits can be added (each blocked sample ends in a
 * "[wait: KIND]" frame coloured by its category). Threads are merged, split
 * by thread group, or shown one by one.
 *
 * Clicking a frame (or Enter on it, with the keyboard) zooms to it and shows
 * its causal predictions: the curves of the function, of its lines, of the
 * call sites in it and of the call sites that call it, matched by the
 * function's name (and file) against the analysis (the `function`, `calls`
 * fields and function units of docs/analysis-format.md).
 */
(function () {
  'use strict';

  var Coz = window.Coz;
  var make = Coz.make, isNum = Coz.isNum;

  var CELL = 18;                       // px, one frame's height
  var MIN_FRAME = 1.5;                 // px, narrower frames are not drawn
  var WAIT = /^\[wait: ([a-z]+)\]$/;
  var THREAD = /^thread (.*) \(tid (\d+), group (.*)\)$/;
  var KIND_CHOICES = [['cpu', 'on the CPU'], ['all', 'on and off the CPU (waits)'], ['off', 'off the CPU (waits only)']];
  var SPLIT_CHOICES = [['all', 'all threads together'], ['group', 'by thread group'], ['thread', 'by thread']];

  var view = {kinds: 'cpu', split: 'all', chart: null, root: null, focus: null, selected: null, panel: null,
    container: null, data: null, total: 0, predicted: null, search: ''};

  function kindSet(choice) {
    var s = new Set(Coz.CATEGORIES.filter(function (c) { return c !== 'rest'; }));
    if (choice === 'cpu') return new Set(['cpu']);
    if (choice === 'off') s.delete('cpu');
    return s;
  }

  // --------------------------------------------------------- the tree drawn

  function blank(name, file) {
    return {name: name, file: file, time_ns: 0, samples: 0, self_time_ns: 0, self_samples: 0, pruned: {}, children: [], _by: new Map()};
  }

  /* Adds a served node's subtree into `into` (same name and file), summing. */
  function mergeInto(into, node) {
    var stack = [[into, node]];
    while (stack.length) {
      var pair = stack.pop(), t = pair[0], n = pair[1];
      t.time_ns += n.time_ns || 0;
      t.samples += n.samples || 0;
      t.self_time_ns += n.self_time_ns || 0;
      t.self_samples += n.self_samples || 0;
      var pr = n.pruned && typeof n.pruned === 'object' ? n.pruned : {};
      Object.keys(pr).forEach(function (k) {
        var v = Array.isArray(pr[k]) ? pr[k] : [0, 0];
        var cur = t.pruned[k] || (t.pruned[k] = [0, 0]);
        cur[0] += v[0] || 0;
        cur[1] += v[1] || 0;
      });
      (Array.isArray(n.children) ? n.children : []).forEach(function (c) {
        var key = c.name + '\u0000' + (c.file || '');
        var child = t._by.get(key);
        if (!child) { child = blank(c.name, c.file || null); t._by.set(key, child); t.children.push(child); }
        stack.push([child, c]);
      });
    }
    return into;
  }

  /* The served tree (root, then one node per thread) as the split asks. */
  function split(tree, how) {
    var threads = Array.isArray(tree.children) ? tree.children : [];
    if (how === 'thread') return tree;
    var root = blank('all', null);
    if (how === 'all') {
      root.time_ns = tree.time_ns || 0;
      threads.forEach(function (t) { mergeInto(root, {children: t.children, pruned: t.pruned, time_ns: 0}); });
      return root;
    }
    var groups = new Map();
    threads.forEach(function (t) {
      var m = THREAD.exec(t.name || '');
      var g = m ? m[3] : '?';
      if (!groups.has(g)) { groups.set(g, blank('group ' + g, null)); groups.get(g).count = 0; root.children.push(groups.get(g)); }
      var node = groups.get(g);
      node.count++;
      mergeInto(node, t);
    });
    root.children.forEach(function (n) { n.name = 'group ' + n.name.slice(6) + ' (' + n.count + ' thread' + (n.count === 1 ? '' : 's') + ')'; });
    return root;
  }

  /* The tree d3-flame-graph draws: value = the time of the kinds asked, frames
   * with none left out. Iterative: stacks can be thousands of frames deep. */
  function filtered(tree, kinds) {
    var out = {name: tree.name, file: tree.file || null, value: 0, children: []};
    var order = [];
    var stack = [[tree, out, null]];
    while (stack.length) {
      var item = stack.pop(), n = item[0], o = item[1];
      order.push(item);
      var m = n.file ? null : WAIT.exec(n.name || '');
      if (m) {
        o.kind = m[1];
        o.own = kinds.has(m[1]) ? n.time_ns || 0 : 0;
        continue;
      }
      var own = kinds.has('cpu') ? n.self_time_ns || 0 : 0;
      var pr = n.pruned && typeof n.pruned === 'object' ? n.pruned : {};
      Object.keys(pr).forEach(function (k) { if (kinds.has(k) && Array.isArray(pr[k])) own += pr[k][1] || 0; });
      o.own = own;
      o.self = kinds.has('cpu') ? n.self_time_ns || 0 : 0;
      (Array.isArray(n.children) ? n.children : []).forEach(function (c) {
        var oc = {name: c.name, file: c.file || null, value: 0, children: []};
        o.children.push(oc);
        stack.push([c, oc, o]);
      });
    }
    // Children were pushed after their parents: sum from the end.
    for (var i = order.length - 1; i >= 0; i--) {
      var node = order[i][1];
      node.value = node.own + node.children.reduce(function (s, c) { return s + c.value; }, 0);
      node.children = node.children.filter(function (c) { return c.value > 0; });
      delete node.own;
    }
    return out;
  }

  // ------------------------------------------------------------ predictions

  /* Which curves of the progress point belong to a frame's function. */
  function predictionsFor(frame) {
    var a = Coz.app.analysis();
    if (!a || !frame) return null;
    var point = Coz.app.point();
    var name = frame.name, file = frame.file;
    function fnMatch(text) {
      var f = Coz.functionName(text);
      return f.name === name && (!f.path || !file || f.path === file);
    }
    function fileOk(l) { var f = Coz.fileOf(l); return !file || !f || f === file; }
    var withFunctions = a.lines.some(function (l) { return l['function'] || l.unit === 'function'; });
    var out = {functions: [], lines: [], sitesIn: [], callers: [], byFile: !withFunctions, elsewhere: 0};
    a.lines.forEach(function (l) {
      var group = null;
      if (l.unit === 'function') group = fnMatch(l.line) && fileOk(l) ? 'functions' : null;
      else if (l['function'] && fnMatch(l['function'])) group = l.unit === 'line' ? 'lines' : 'sitesIn';
      else if (l.unit === 'callsite' && l.calls.some(fnMatch)) group = 'callers';
      else if (!withFunctions && l.unit === 'line' && file && Coz.fileOf(l) === file) group = 'lines';
      if (!group) return;
      if (l.progress_point === point) out[group].push(l); else out.elsewhere++;
    });
    ['functions', 'lines', 'sitesIn', 'callers'].forEach(function (g) {
      out[g].sort(function (x, y) { return (y.impact || 0) - (x.impact || 0); });
    });
    return out;
  }

  /* Names of the functions with a curve for the progress point (frames to mark). */
  function predictedNames() {
    var a = Coz.app.analysis(), names = new Set();
    if (!a) return names;
    var point = Coz.app.point();
    a.lines.forEach(function (l) {
      if (l.progress_point !== point) return;
      if (l.unit === 'function') names.add(Coz.functionName(l.line).name);
      if (l['function']) names.add(Coz.functionName(l['function']).name);
      l.calls.forEach(function (c) { names.add(Coz.functionName(c).name); });
    });
    return names;
  }

  // ------------------------------------------------------------------ render

  function render(panel, opts) {
    var ex = Coz.app.extra('flame');
    if (opts && opts.keep && view.chart && ex.status === 'ok' && panel.contains(view.container)) {
      // The progress point changed: colours and predictions follow it.
      view.predicted = predictedNames();
      view.chart.update();
      markFocus();
      showFrame(view.selected);
      return;
    }
    destroy();
    panel.textContent = '';
    if (ex.status === 'loading' || (ex.status === 'none' && Coz.app.source() === 'server')) {
      panel.appendChild(Coz.note('Loading the flame graph\u2026'));
      return;
    }
    if (ex.status === 'none') {
      panel.appendChild(Coz.note('No flame graph: it is made from the profile\'s stacks.\n' +
        'Run "coz view profile.coz" or "coz plot --html out.html profile.coz"; an analysis JSON alone has no stacks.'));
      return;
    }
    if (ex.status === 'unavailable') {
      panel.appendChild(Coz.note('No flame graph: ' + ex.reason + '.\n' + (ex.hint || ''), 'warning'));
      return;
    }
    if (ex.status === 'error') {
      panel.appendChild(Coz.note(ex.reason + '\n' + (ex.hint || ''), 'error'));
      return;
    }
    if (typeof d3 === 'undefined' || typeof flamegraph === 'undefined' || typeof flamegraph.default !== 'function') {
      panel.appendChild(Coz.note('The flame-graph library (d3, d3-flame-graph) did not load.\n' +
        'Run "npm ci --prefix viewer" in the project (its setup script does this), then reload.', 'error'));
      return;
    }
    var data = ex.data;
    if (data.schema !== 1 || !data.tree || typeof data.tree !== 'object') {
      panel.appendChild(Coz.note('This flame graph data is not supported (schema ' + JSON.stringify(data.schema) + ').\n' +
        'This viewer reads schema 1.', 'error'));
      return;
    }
    view.data = data;

    var bar = make('div', 'view-toolbar');
    bar.appendChild(select('flame-kinds', 'Time', KIND_CHOICES, view.kinds, function (v) { view.kinds = v; view.selected = null; draw(); }));
    bar.appendChild(select('flame-split', 'Threads', SPLIT_CHOICES, view.split, function (v) { view.split = v; view.selected = null; draw(); }));
    var sl = make('label', null, 'Find ');
    var search = make('input');
    search.type = 'search';
    search.id = 'flame-search';
    search.placeholder = 'function name';
    search.value = view.search;
    var timer = 0;
    search.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { view.search = search.value.trim(); applySearch(); }, 150);
    });
    sl.appendChild(search);
    bar.appendChild(sl);
    var reset = Coz.button('secondary', 'Reset zoom');
    reset.id = 'flame-reset';
    reset.addEventListener('click', function () { if (view.chart) view.chart.resetZoom(); });
    bar.appendChild(reset);
    panel.appendChild(bar);

    var legend = make('div', 'flame-legend muted small');
    var mark = make('span', 'flame-key flame-key-predicted');
    legend.appendChild(mark);
    legend.appendChild(document.createTextNode(' has causal predictions for this progress point \u00b7 '));
    var plain = make('span', 'flame-key flame-key-plain');
    legend.appendChild(plain);
    legend.appendChild(document.createTextNode(' no prediction \u00b7 waits in their category\'s colour. '));
    legend.appendChild(make('span', null, 'Keyboard: focus the graph, arrows move (up: callee, down: caller, left/right: neighbours), ' +
      'Enter zooms and shows predictions, Escape resets.'));
    if (data.pruned_nodes > 0) {
      legend.appendChild(make('span', null, ' ' + data.pruned_nodes + ' of the smallest frames were left out (their time stays in their callers).'));
    }
    panel.appendChild(legend);

    var layout = make('div', 'split');
    var left = make('div', 'flame-wrap');
    var status = make('p', 'flame-status muted small');
    status.id = 'flame-status';
    status.setAttribute('aria-live', 'polite');
    left.appendChild(status);
    var chartBox = make('div', 'flame-chart');
    chartBox.id = 'flame-chart';
    chartBox.tabIndex = 0;
    chartBox.setAttribute('role', 'application');
    chartBox.setAttribute('aria-roledescription', 'flame graph');
    chartBox.setAttribute('aria-label', 'flame graph: arrow keys move between frames, Enter shows a frame\'s causal predictions');
    chartBox.addEventListener('keydown', onKey);
    left.appendChild(chartBox);
    layout.appendChild(left);
    var side = make('aside', 'side-panel');
    side.id = 'flame-panel';
    side.setAttribute('aria-live', 'polite');
    layout.appendChild(side);
    panel.appendChild(layout);
    view.container = chartBox;
    view.panel = side;
    view.status = status;
    draw();
  }

  function select(id, label, choices, value, onChange) {
    var lab = make('label', null, label + ' ');
    var s = make('select');
    s.id = id;
    choices.forEach(function (c) { var o = make('option', null, c[1]); o.value = c[0]; s.appendChild(o); });
    s.value = value;
    s.addEventListener('change', function () { onChange(s.value); });
    lab.appendChild(s);
    return lab;
  }

  function destroy() {
    if (view.chart) {
      try { view.chart.destroy(); } catch (e) { /* already gone */ }
    }
    if (view.panel) Coz.app.releaseCards(view.panel);
    view.chart = null;
    view.root = null;
    view.focus = null;
  }

  function draw() {
    if (view.chart) { try { view.chart.destroy(); } catch (e) { /* gone */ } }
    Coz.app.releaseCards(view.panel);
    view.container.textContent = '';
    view.focus = null;
    var tree = filtered(split(view.data.tree, view.split), kindSet(view.kinds));
    view.total = tree.value;
    view.predicted = predictedNames();
    if (!tree.value) {
      view.chart = null;
      view.container.appendChild(Coz.note('No samples of this kind.\n' + (view.kinds === 'cpu' ?
        'The threads were never sampled on the CPU: choose "on and off the CPU" to see where they waited.' :
        'Choose another kind of time.')));
      showFrame(null);
      return;
    }
    var width = Math.max(view.container.clientWidth, 320);
    var reduce = window.matchMedia && window.matchMedia('(prefers-reduced-motion: reduce)').matches;
    var chart = flamegraph.default()
      .width(width)
      .cellHeight(CELL)
      .minFrameSize(MIN_FRAME)
      .transitionDuration(reduce ? 0 : 250)
      .selfValue(false)
      .sort(true)
      .setColorMapper(colour)
      .setLabelHandler(label)
      .setDetailsElement(view.status)
      .onClick(function (d) { view.focus = d; markFocus(); showFrame(d); });
    view.chart = chart;
    d3.select(view.container).datum(tree).call(chart);
    view.root = rootNode();
    view.status.textContent = 'Total: ' + Coz.time(view.total) + ' ' + KIND_CHOICES.filter(function (c) { return c[0] === view.kinds; })[0][1] +
      '. Hover a frame for its time; click it for its causal predictions.';
    if (view.search) applySearch();
    showFrame(null);
  }

  function rootNode() {
    var nodes = d3.select(view.container).selectAll('g.frame').data();
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      while (n.parent) n = n.parent;
      return n;
    }
    return null;
  }

  function colour(d, original) {
    if (d.highlight) return '#e600e6';
    var data = d.data;
    if (data.kind) return Coz.categoryColor(data.kind);
    if (d.depth === 0 || /^(thread|group) /.test(data.name) && !data.file) return '#c9ced6';
    if (view.predicted && view.predicted.has(data.name)) return predictedColour(data.name);
    return original;
  }

  /* Blues for frames with predictions (a stable shade per name). */
  function predictedColour(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    var light = 62 + (h % 14);
    return 'hsl(' + (205 + (h % 18)) + ', 62%, ' + light + '%)';
  }

  function label(d) {
    var data = d.data;
    var part = view.total ? d.value / view.total : 0;
    return data.name + (data.file ? ' (' + Coz.basename(data.file) + ')' : '') + ': ' + Coz.time(d.value) + ', ' +
      Coz.share(part) + ' of the total' + (isNum(data.self) && data.self > 0 ? ', itself ' + Coz.time(data.self) + ' on the CPU' : '');
  }

  function applySearch() {
    if (!view.chart) return;
    if (!view.search) { view.chart.clear(); return; }
    view.chart.setSearchHandler(function (results, sum, total) {
      view.status.textContent = results.length + ' frame' + (results.length === 1 ? '' : 's') + ' match "' + view.search + '": ' +
        Coz.time(sum) + ', ' + Coz.share(total ? sum / total : 0) + ' of the total.';
    });
    view.chart.search(view.search);
  }

  // ---------------------------------------------------------------- keyboard

  function kids(n) { return (n.children || []).filter(function (c) { return c.value > 0; }); }

  function onKey(e) {
    if (!view.chart) return;
    var n = view.focus || view.root;
    if (!n) return;
    var next = null;
    if (!view.focus && /^Arrow/.test(e.key)) next = view.root;
    else if (e.key === 'ArrowUp') next = kids(n).sort(function (x, y) { return y.value - x.value; })[0] || null;
    else if (e.key === 'ArrowDown') next = n.parent || null;
    else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      if (n.parent) {
        var sib = kids(n.parent).sort(function (x, y) { return x.x0 - y.x0; });
        var i = sib.indexOf(n) + (e.key === 'ArrowLeft' ? -1 : 1);
        next = sib[i] || null;
      }
    } else if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      view.chart.zoomTo(n);   // calls onClick: focus, predictions
      return;
    } else if (e.key === 'Escape') {
      e.preventDefault();
      view.chart.resetZoom();
      return;
    } else {
      return;
    }
    e.preventDefault();
    if (next) {
      view.focus = next;
      markFocus();
      view.status.textContent = label(next);
    }
  }

  function markFocus() {
    if (!view.container) return;
    d3.select(view.container).selectAll('g.frame').classed('kbd-focus', function (d) { return d === view.focus; });
  }

  // ------------------------------------------------------------ side panel

  function showFrame(d) {
    var side = view.panel;
    if (!side) return;
    Coz.app.releaseCards(side);
    side.textContent = '';
    view.selected = d || null;
    if (!d) {
      side.appendChild(Coz.note('Click a frame\nIts causal predictions (the function, its lines, the call sites in it and those that call it) show here.'));
      return;
    }
    var data = d.data;
    var head = make('div', 'frame-head');
    head.appendChild(make('h3', null, data.name));
    if (data.file) head.appendChild(make('p', 'muted small', data.file));
    head.appendChild(make('p', 'small', Coz.time(d.value) + ', ' + Coz.share(view.total ? d.value / view.total : 0) + ' of the total' +
      (isNum(data.self) && data.self > 0 ? '; itself on the CPU ' + Coz.time(data.self) : '')));
    side.appendChild(head);

    var m = THREAD.exec(data.name);
    if (d.depth === 0 || (m && !data.file) || /^group /.test(data.name)) {
      side.appendChild(threadInfo(m, data.name));
      return;
    }
    var frame = data;
    if (data.kind) {
      side.appendChild(make('p', null, 'Time waiting (' + Coz.categoryLabel(data.kind) + ') in ' +
        (d.parent ? d.parent.data.name : 'its caller') + '. Its predictions are those of the function that waited:'));
      frame = d.parent ? d.parent.data : data;
    }
    var p = predictionsFor(frame);
    if (!p) {
      side.appendChild(Coz.note('No analysis loaded: no causal predictions to show.'));
      return;
    }
    var groups = [['functions', 'The function'], ['lines', p.byFile ? 'Lines of its file (the analysis does not say which function a line is in)' : 'Its lines'],
      ['sitesIn', 'Call sites in it'], ['callers', 'Call sites that call it']];
    var shown = 0;
    groups.forEach(function (g) {
      var list = p[g[0]];
      if (!list.length) return;
      var sec = make('section', 'frame-group');
      sec.dataset.group = g[0];
      sec.appendChild(make('h4', null, g[1] + ' (' + list.length + ')'));
      list.slice(0, 6).forEach(function (l) {
        sec.appendChild(Coz.app.drawnCard(l, {compact: true}));
        var go = Coz.button('link', 'open in causal plots');
        go.addEventListener('click', function () { Coz.app.openUnit(l); });
        sec.appendChild(go);
        shown++;
      });
      if (list.length > 6) sec.appendChild(make('p', 'muted small', (list.length - 6) + ' more in the causal plots.'));
      side.appendChild(sec);
    });
    if (!shown) {
      side.appendChild(Coz.note('No causal prediction for ' + frame.name + ' at progress point ' + Coz.app.point() + '.\n' +
        'Experiments speed up the units that run most; none covered this function' +
        (p.elsewhere ? ' for this progress point (' + p.elsewhere + ' curve' + (p.elsewhere === 1 ? '' : 's') + ' for other points: change it in the sidebar)' : '') +
        '. A longer run, or coz run --fixed-line FILE:LINE on one of its lines, measures it.'));
    }
  }

  /* A thread's (or a group's) time, from the analysis's thread records. */
  function threadInfo(m, name) {
    var a = Coz.app.analysis();
    var box = make('div');
    if (!a || !m && !/^group /.test(name)) {
      box.appendChild(make('p', 'muted', 'Click a function frame for its causal predictions.'));
      return box;
    }
    var rec = null;
    if (m) rec = a.threads.filter(function (t) { return String(t.tid) === m[2]; })[0];
    else {
      var g = /^group (.*) \(\d+ threads?\)$/.exec(name);
      rec = g ? a.thread_groups.filter(function (t) { return t.group === g[1]; })[0] : null;
    }
    if (!rec) {
      box.appendChild(make('p', 'muted', 'The analysis has no thread record for it. Click a function frame for its causal predictions.'));
      return box;
    }
    var w = rec.wait_ns || {};
    var parts = Coz.CATEGORIES.map(function (c) {
      return [c, c === 'cpu' ? rec.cpu_ns || 0 : c === 'rest' ? rec.rest_ns || 0 : w[c] || 0];
    });
    box.appendChild(make('p', null, 'Where its ' + Coz.time(rec.wall_ns) + ' of wall time went:'));
    box.appendChild(Coz.shareBar(parts, {total: rec.wall_ns || 1, cls: 'wide', label: name,
      values: function (x) { return Coz.time(x[1] * (rec.wall_ns || 1)); }}));
    box.appendChild(make('p', 'small', Coz.sharesText(parts.map(function (x) { return [x[0], x[1] / (rec.wall_ns || 1)]; }))));
    var go = Coz.button('link', 'all threads in the Threads view');
    go.addEventListener('click', function () { Coz.app.activateTab('threads'); });
    box.appendChild(go);
    return box;
  }

  function resize() {
    if (view.chart && view.container && view.container.isConnected) {
      var w = Math.max(view.container.clientWidth, 320);
      if (Math.abs(w - view.chart.width()) > 4) draw();
    }
  }

  Coz.views.flame = {render: render, resize: resize};
})();
