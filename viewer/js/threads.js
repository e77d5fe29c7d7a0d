/* The threads view: where each thread's wall time went (on the CPU, waiting
 * for I/O, a lock, another thread, sleeping, runnable but not running, other
 * waits, and the rest: mostly the profiler's pauses), per thread group and per
 * thread, as bperf shows it. Reads the analysis's `threads` and
 * `thread_groups` (docs/analysis-format.md).
 */
(function () {
  'use strict';

  var Coz = window.Coz;
  var make = Coz.make, isNum = Coz.isNum;

  var PARTS = ['cpu', 'io', 'lock', 'sync', 'sleep', 'sched', 'other', 'rest'];
  var view = {mode: 'share', expanded: new Set()};

  /* [[category, ns], ...] of a THREAD or GROUP record. */
  function parts(t) {
    var w = t.wait_ns && typeof t.wait_ns === 'object' ? t.wait_ns : {};
    return PARTS.map(function (c) {
      var v = c === 'cpu' ? t.cpu_ns : c === 'rest' ? t.rest_ns : w[c];
      return [c, isNum(v) && v > 0 ? v : 0];
    });
  }

  function render(panel) {
    var a = Coz.app.analysis();
    panel.textContent = '';
    if (!a) {
      panel.appendChild(Coz.note('No analysis loaded.\nOpen an analysis (coz report profile.coz --json analysis.json) to see its threads.'));
      return;
    }
    if (!a.threads.length && !a.thread_groups.length) {
      panel.appendChild(Coz.note('This analysis has no per-thread records.\n' +
        'Profiles written by this project\'s runtime record where each thread\'s time went (thread records); ' +
        'upstream COZ\'s profiles and older ones do not. Profile again with coz run.'));
      return;
    }
    var groups = a.thread_groups.length ? a.thread_groups : groupsOf(a.threads);
    var runs = new Set(a.threads.map(function (t) { return t.run; }));

    var bar = make('div', 'view-toolbar');
    var lab = make('label', null, 'Show ');
    var sel = make('select');
    sel.id = 'threads-mode';
    [['share', 'shares of wall time'], ['time', 'times']].forEach(function (o) {
      var e = make('option', null, o[1]);
      e.value = o[0];
      sel.appendChild(e);
    });
    sel.value = view.mode;
    sel.addEventListener('change', function () { view.mode = sel.value; render(panel); });
    lab.appendChild(sel);
    bar.appendChild(lab);
    bar.appendChild(Coz.categoryLegend(PARTS));
    panel.appendChild(bar);
    panel.appendChild(summary(groups));

    var wrap = make('div', 'table-wrap');
    var table = make('table', 'threads-table data-table');
    table.id = 'threads-table';
    var head = make('tr');
    var cols = [['thread group / thread', 'a group is the threads started with the same function; "main" is the main thread'],
      ['threads', 'threads in the group' + (runs.size > 1 ? ' (over ' + runs.size + ' runs)' : '')],
      ['wall', 'wall time: the sum of the threads\' lifetimes'], ['where the time went', 'share of the wall time']];
    PARTS.forEach(function (c) { cols.push([Coz.categoryLabel(c), Coz.CATEGORY[c].title]); });
    cols.forEach(function (h, i) {
      var th = make('th', i === 1 || i === 2 || i > 3 ? 'num' : null, h[0]);
      th.title = h[1];
      th.scope = 'col';
      head.appendChild(th);
    });
    var thead = make('thead');
    thead.appendChild(head);
    table.appendChild(thead);
    var body = make('tbody');
    groups.forEach(function (g) {
      var members = a.threads.filter(function (t) { return t.group === g.group; });
      var tr = row(g, g.group, members.length ? members : null, runs.size > 1, true);
      body.appendChild(tr);
      if (view.expanded.has(g.group)) members.forEach(function (t) { body.appendChild(row(t, threadName(t, runs.size > 1), null, false, false)); });
    });
    table.appendChild(body);
    wrap.appendChild(table);
    panel.appendChild(wrap);
  }

  function threadName(t, withRun) {
    return (t.thread || 'thread') + ' (tid ' + t.tid + (withRun && isNum(t.run) ? ', run ' + (t.run + 1) : '') + ')';
  }

  /* Groups summed from the threads, for an analysis that has only threads. */
  function groupsOf(threads) {
    var by = new Map();
    threads.forEach(function (t) {
      var g = by.get(t.group);
      if (!g) { g = {group: t.group, threads: 0, wall_ns: 0, cpu_ns: 0, rest_ns: 0, wait_ns: {}}; by.set(t.group, g); }
      g.threads++;
      g.wall_ns += t.wall_ns || 0;
      g.cpu_ns += t.cpu_ns || 0;
      g.rest_ns += t.rest_ns || 0;
      Object.keys(t.wait_ns || {}).forEach(function (k) { g.wait_ns[k] = (g.wait_ns[k] || 0) + (t.wait_ns[k] || 0); });
    });
    return Array.from(by.values());
  }

  /* One sentence over every group: how much of the threads' time was on the CPU, and the largest waits. */
  function summary(groups) {
    var total = {cpu_ns: 0, rest_ns: 0, wait_ns: {}, wall_ns: 0};
    groups.forEach(function (g) {
      total.wall_ns += g.wall_ns || 0;
      total.cpu_ns += g.cpu_ns || 0;
      total.rest_ns += g.rest_ns || 0;
      Object.keys(g.wait_ns || {}).forEach(function (k) { total.wait_ns[k] = (total.wait_ns[k] || 0) + (g.wait_ns[k] || 0); });
    });
    var p = parts(total).filter(function (x) { return x[1] > 0; });
    var wall = total.wall_ns || 1;
    var waits = p.filter(function (x) { return x[0] !== 'cpu' && x[0] !== 'rest'; }).sort(function (x, y) { return y[1] - x[1]; });
    var text = 'The threads spent ' + Coz.share((total.cpu_ns || 0) / wall) + ' of their ' + Coz.time(total.wall_ns) +
      ' on the CPU';
    if (waits.length) {
      text += ' and ' + Coz.share(waits.reduce(function (s, x) { return s + x[1]; }, 0) / wall) + ' waiting (' +
        waits.slice(0, 3).map(function (x) { return Coz.categoryLabel(x[0]) + ' ' + Coz.share(x[1] / wall); }).join(', ') + ')';
    }
    return make('p', 'view-summary', text + '.');
  }

  function row(t, name, members, withRun, isGroup) {
    var tr = make('tr', isGroup ? 'group-row' : 'child-row');
    tr.dataset.group = t.group;
    if (!isGroup) tr.dataset.tid = t.tid;
    var td = make('td', 'unit-cell');
    if (!isGroup) td.style.paddingLeft = '28px';
    if (isGroup && members) {
      var open = view.expanded.has(t.group);
      var b = Coz.button('toggle', open ? '\u25be' : '\u25b8');
      b.setAttribute('aria-expanded', open ? 'true' : 'false');
      b.setAttribute('aria-label', (open ? 'close' : 'open') + ' thread group ' + t.group + ': ' + members.length + ' threads');
      b.addEventListener('click', function () {
        if (view.expanded.has(t.group)) view.expanded.delete(t.group); else view.expanded.add(t.group);
        var expanded = view.expanded.has(t.group);
        b.textContent = expanded ? '\u25be' : '\u25b8';
        b.setAttribute('aria-expanded', expanded ? 'true' : 'false');
        b.setAttribute('aria-label', (expanded ? 'close' : 'open') + ' thread group ' + t.group + ': ' + members.length + ' threads');
        var next = tr.nextSibling;
        while (next && next.classList.contains('child-row')) { var n = next.nextSibling; next.remove(); next = n; }
        if (expanded) {
          var frag = document.createDocumentFragment();
          members.forEach(function (m) { frag.appendChild(row(m, threadName(m, withRun), null, false, false)); });
          tr.parentNode.insertBefore(frag, tr.nextSibling);
        }
      });
      td.appendChild(b);
    } else if (isGroup) {
      td.appendChild(make('span', 'toggle-space'));
    }
    td.appendChild(make('span', isGroup ? 'group-name' : 'thread-name', name));
    tr.appendChild(td);
    tr.appendChild(make('td', 'num', isGroup ? String(t.threads) : ''));
    tr.appendChild(make('td', 'num', Coz.time(t.wall_ns)));
    var p = parts(t);
    var wall = t.wall_ns > 0 ? t.wall_ns : p.reduce(function (s, x) { return s + x[1]; }, 0) || 1;
    var barCell = make('td', 'bar-cell');
    barCell.appendChild(Coz.shareBar(p, {total: Math.max(wall, p.reduce(function (s, x) { return s + x[1]; }, 0)),
      label: name, values: function (x) { return Coz.time(x[1] * wall); }, cls: 'wide'}));
    tr.appendChild(barCell);
    p.forEach(function (x) {
      var c = make('td', 'num cat-' + x[0], view.mode === 'share' ? Coz.share(x[1] / wall) : Coz.time(x[1]));
      c.title = Coz.categoryLabel(x[0]) + ': ' + Coz.time(x[1]) + ', ' + Coz.share(x[1] / wall) + ' of ' + Coz.time(t.wall_ns);
      if (x[1] === 0) c.classList.add('zero');
      tr.appendChild(c);
    });
    return tr;
  }

  Coz.views.threads = {render: render};
})();
