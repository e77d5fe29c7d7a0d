/* The locks view: the report of `coz locks --json` (docs/locks.md) beside the
 * causal plots. Findings ranked, each with its SyncPerf category, quadrant
 * and figures; a finding opens to its reason and fix, its objects, its
 * acquisition sites (per call site, with the causal prediction of the site's
 * line when the analysis has one) and its critical sections with the causal
 * predictions joined to them. Then every lock family, the other
 * synchronization objects, the thread groups' load imbalance, and the joins
 * per call site.
 */
(function () {
  'use strict';

  var Coz = window.Coz;
  var make = Coz.make, isNum = Coz.isNum, share = Coz.share, time = Coz.time;

  var view = {open: null};   // keys of the rows left open (null: the first finding)

  var CATEGORY_TITLE = {
    'asymmetric-contention': 'locks of one call site contended unequally',
    'over-synchronization': 'a lock no other thread ever took',
    'improper-granularity': 'too much or too little work per acquisition',
    'improper-primitive': 'a lock where an atomic instruction (or a blocking wait) would do',
    'load-imbalance': 'thread groups wait unequally for each other'
  };

  function dash() { return make('span', 'muted', '\u2014'); }

  function render(panel) {
    panel.textContent = '';
    var ex = Coz.app.extra('locks');
    if (ex.status === 'loading' || (ex.status === 'none' && Coz.app.source() === 'server')) {
      panel.appendChild(Coz.note('Loading the locks report\u2026'));
      return;
    }
    if (ex.status === 'none') {
      panel.appendChild(Coz.note('No locks report loaded.\nMake one with "coz locks profile.coz --json locks.json" and open it ' +
        'with "Open analysis JSON" (or drop it here); "coz view profile.coz" and "coz plot --html" include it.'));
      return;
    }
    if (ex.status === 'unavailable') {
      panel.appendChild(Coz.note('No locks report: ' + ex.reason + '.\n' + (ex.hint || ''), 'warning'));
      return;
    }
    if (ex.status === 'error') {
      panel.appendChild(Coz.note(ex.reason + '\n' + (ex.hint || ''), 'error'));
      return;
    }
    try {
      draw(panel, ex.data, ex.name);
    } catch (e) {
      panel.textContent = '';
      panel.appendChild(Coz.note('This locks report could not be shown (' + e.message + ').\n' +
        'Write it again with this version of coz: coz locks profile.coz --json locks.json', 'error'));
    }
  }

  function list(v) { return Array.isArray(v) ? v : []; }

  function draw(panel, r, name) {
    if (r.schema !== 1) {
      panel.appendChild(Coz.note('Locks report schema ' + JSON.stringify(r.schema) + ' is not supported; this viewer reads schema 1.', 'error'));
      return;
    }
    var run = r.run || {};
    var head = make('div', 'locks-head');
    var title = 'Locks of ' + (run.argv0 ? Coz.basename(run.argv0) : 'the program') +
      (isNum(run.pid) ? ' (pid ' + run.pid + (run.mode ? ', ' + run.mode + ' run' : '') +
        (isNum(run.elapsed_ns) && run.elapsed_ns > 0 ? ', ' + time(run.elapsed_ns) : '') + ')' : '') +
      (run.path ? ' in ' + run.path : '') + (name ? ' \u00b7 ' + name : '');
    head.appendChild(make('h2', null, title));
    var th = r.thresholds || {};
    head.appendChild(make('p', 'muted small', 'Thresholds: frequent from ' + Coz.rate(th.frequency) +
      '; contended from ' + share(th.contention) + ' of acquisitions or of the users\' time; long critical sections ' +
      time(th.long_hold_ns) + ', short ' + time(th.short_hold_ns) + '; asymmetry ' + (isNum(th.asymmetry) ? th.asymmetry + 'x' : 'n/a') +
      '; imbalance ' + share(th.imbalance) + ' of lifetime (docs/locks.md).'));
    var others = list(r.other_runs);
    if (others.length) {
      head.appendChild(make('p', 'muted small', others.length + ' other run' + (others.length === 1 ? ' has' : 's have') +
        ' counters (pid ' + others.map(function (o) { return o.pid; }).join(', ') + '); coz locks --pid chooses one.'));
    }
    if (r.causal && r.causal.available === false) {
      head.appendChild(make('p', 'muted small', 'No causal predictions: ' + (r.causal.note || 'the profile has no experiments') + '.'));
    }
    panel.appendChild(head);
    if (list(r.warnings).length) {
      var w = make('details', 'notes');
      w.appendChild(make('summary', null, r.warnings.length + ' note' + (r.warnings.length === 1 ? '' : 's') + ' about this report'));
      var ul = make('ul');
      r.warnings.forEach(function (x) { ul.appendChild(make('li', null, String(x))); });
      w.appendChild(ul);
      panel.appendChild(w);
    }
    if (r.diagnosis) panel.appendChild(Coz.note(String(r.diagnosis), 'warning'));

    var byKey = new Map();
    list(r.locks).concat(list(r.other_synchronization)).forEach(function (l) { if (l && l.key) byKey.set(l.key, l); });

    var findings = list(r.findings);
    panel.appendChild(make('h3', null, 'Findings, ranked'));
    if (!findings.length) {
      panel.appendChild(make('p', 'muted', 'No lock or thread group calls for a fix at these thresholds.'));
    } else {
      if (view.open === null) view.open = new Set(['finding:' + (findings[0].rank || 1)]);
      var t = table('locks-findings', ['#', 'category', 'quadrant', 'lock', 'acq/s', 'contention', 'waiting',
        'waited (mean)', 'hold', 'threads', 'causal @50%'], [4, 5, 6, 7, 8, 9]);
      findings.forEach(function (f) {
        var lock = f.lock ? byKey.get(f.lock) : null;
        addRow(t, 'finding:' + f.rank, findingCells(f, lock), function (box) { details(box, lock, f, r); }, f.category);
      });
      panel.appendChild(t.wrap);
    }

    var locks = list(r.locks);
    var all = make('details', 'section');
    all.id = 'locks-all';
    all.appendChild(make('summary', null, 'Every lock family (' + locks.length + ')'));
    if (locks.length) {
      var t2 = table('locks-every', ['', 'lock', 'quadrant', 'category', 'acq/s', 'contention', 'waiting', 'waited (mean)', 'hold', 'threads'],
        [4, 5, 6, 7, 8, 9]);
      locks.forEach(function (l) {
        addRow(t2, 'lock:' + l.key, [null, lockName(l), l.quadrant || dash(), l.category ? badge(l.category) : dash()]
          .concat(figureCells(l)), function (box) { details(box, l, null, r); }, l.category);
      });
      all.appendChild(t2.wrap);
    } else {
      all.appendChild(make('p', 'muted', 'The run took no lock.'));
    }
    panel.appendChild(all);

    var sync = list(r.other_synchronization);
    var other = make('details', 'section');
    other.appendChild(make('summary', null, 'Condition variables, barriers, semaphores, futexes (' + sync.length + ')'));
    if (sync.length) {
      var t3 = table('locks-other', ['', 'object', 'waits', 'waited (mean)', 'waiting', 'threads'], [2, 3, 4, 5]);
      sync.forEach(function (l) {
        var fg = l.figures || {};
        addRow(t3, 'sync:' + l.key, [null, lockName(l), num0(fg.acquisitions),
          time(fg.wait_ns) + (isNum(fg.mean_wait_ns) ? ' (' + time(fg.mean_wait_ns) + ')' : ''),
          share(fg.waiting_share), num0(l.threads)], function (box) { details(box, l, null, r); });
      });
      other.appendChild(t3.wrap);
    }
    panel.appendChild(other);

    panel.appendChild(imbalance(r.load_imbalance));
    panel.appendChild(joinsSection(list(r.joins)));
  }

  // Joins, per call site, apart from the locks: a join that waits is the
  // joiner waiting for another thread's work (load imbalance), not
  // contention for data (docs/locks.md, section 2).
  function joinsSection(joins) {
    var box = make('details', 'section');
    box.id = 'locks-joins';
    var calls = 0, waited = 0, total = 0;
    joins.forEach(function (j) {
      var fg = j.figures || {};
      calls += isNum(fg.acquisitions) ? fg.acquisitions : 0;
      waited += isNum(fg.contended) ? fg.contended : 0;
      total += isNum(fg.wait_ns) ? fg.wait_ns : 0;
    });
    box.appendChild(make('summary', null, 'Joins (' + joins.length + ' call site' + (joins.length === 1 ? '' : 's') +
      (joins.length ? ', ' + calls + ' calls, ' + waited + ' waited for a thread still running, ' + time(total) + ' in all' : '') + ')'));
    if (!joins.length) {
      box.appendChild(make('p', 'muted', 'The run joined no thread.'));
      return box;
    }
    var t = table('locks-joins-table', ['join site', 'calls', 'waited', 'total wait', 'mean wait'], [1, 2, 3, 4]);
    joins.forEach(function (j) {
      var fg = j.figures || {};
      var tr = make('tr', 'join-row');
      tr.dataset.key = j.key || '';
      var site = make('code', null, j.site ? Coz.shortLine(j.site) : (j.key || '?'));
      site.title = j.site || j.key || '';
      [site, num0(fg.acquisitions), num0(fg.contended) + (isNum(fg.contention) ? ' (' + share(fg.contention) + ')' : ''),
        time(fg.wait_ns), time(fg.mean_wait_ns)].forEach(function (c, i) {
        var td = make('td', i ? 'num' : null);
        if (typeof c === 'string') td.textContent = c; else td.appendChild(c);
        tr.appendChild(td);
      });
      t.body.appendChild(tr);
    });
    box.appendChild(t.wrap);
    return box;
  }

  function num0(v) { return isNum(v) ? String(Math.round(v)) : 'n/a'; }

  function badge(cat) {
    var b = make('span', 'badge lockcat lockcat-' + cat, cat);
    b.title = CATEGORY_TITLE[cat] || cat;
    return b;
  }

  function lockName(l) {
    var s = make('span', 'lock-name');
    s.title = l.key || '';
    s.appendChild(make('span', 'muted', (l.kind || 'lock') + ' '));
    s.appendChild(make('code', null, l.site ? Coz.shortLine(l.site) : (l.key || '?')));
    var n = l.objects || 0;
    if (n > 1 || l.folded_objects) {
      s.appendChild(make('span', 'muted', ' (' + n + ' object' + (n === 1 ? '' : 's') + (l.folded_objects ? ' and more' : '') + ')'));
    }
    return s;
  }

  function figureCells(l) {
    var fg = l.figures || {};
    return [Coz.rate(fg.frequency), share(fg.contention), share(fg.waiting_share),
      time(fg.wait_ns) + (isNum(fg.mean_wait_ns) && fg.mean_wait_ns > 0 ? ' (' + time(fg.mean_wait_ns) + ')' : ''),
      time(fg.mean_hold_ns), num0(l.threads)];
  }

  function findingCells(f, lock) {
    var cells = [String(f.rank), badge(f.category), f.quadrant || dash()];
    if (f.basis === 'trylock' && lock) cells[1].textContent = f.category + ' (try-lock)';
    if (lock) {
      cells.push(lockName(lock));
      var fc = figureCells(lock);
      if (f.basis === 'trylock') fc[1] = share((lock.figures || {}).trylock_failure_rate) + ' failed';
      cells = cells.concat(fc);
    } else {
      cells.push(make('span', null, f.category === 'load-imbalance' ? 'thread groups' : (f.lock || '?')));
      for (var i = 0; i < 6; i++) cells.push(dash());
    }
    cells.push(causalCell(f.best_causal));
    return cells;
  }

  /* "file.c:57 +8.5%" with a button that opens the plot, for a CAUSAL object. */
  function causalCell(c) {
    if (!c || typeof c.line !== 'string') return dash();
    var box = make('span', 'causal');
    var pred = c.predicted && c.predicted['0.5'];
    var curve = Coz.app.findAnyCurve(c.line, ['line', 'callsite', 'function'], c.progress_point);
    var label = Coz.shortLine(c.line) + (c.role ? ' (' + c.role + ')' : '');
    if (curve) {
      var b = Coz.button('link', label, 'show the causal plot of ' + c.line + ' for ' + (c.progress_point || 'its progress point'));
      b.addEventListener('click', function () { Coz.app.openUnit(curve); });
      box.appendChild(b);
    } else {
      var s = make('code', null, label);
      s.title = c.line;
      box.appendChild(s);
    }
    box.appendChild(make('b', isNum(pred) && pred > 0 ? 'gain' : null, ' ' + Coz.pct(pred)));
    return box;
  }

  function table(id, headers, numeric) {
    var wrap = make('div', 'table-wrap');
    var t = make('table', 'data-table locks-table');
    t.id = id;
    var thead = make('thead'), tr = make('tr');
    headers.forEach(function (h, i) {
      var th = make('th', numeric.indexOf(i) >= 0 ? 'num' : null, h);
      th.scope = 'col';
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.appendChild(thead);
    var body = make('tbody');
    t.appendChild(body);
    wrap.appendChild(t);
    return {wrap: wrap, body: body, numeric: numeric};
  }

  /* A row whose first cell opens a detail row below it. */
  function addRow(t, key, cells, fill, category) {
    var body = t.body;
    var tr = make('tr', 'lock-row');
    tr.dataset.key = key;
    if (category) tr.dataset.category = category;
    var open = view.open && view.open.has(key);
    cells.forEach(function (c, i) {
      var td = make('td', t.numeric.indexOf(i) >= 0 ? 'num' : null);
      if (i === 0) {
        var b = Coz.button('toggle', (open ? '\u25be ' : '\u25b8 ') + (c || ''));
        b.setAttribute('aria-expanded', open ? 'true' : 'false');
        b.setAttribute('aria-label', (open ? 'close ' : 'open ') + 'details of ' + key.replace(/^[a-z]+:/, ''));
        b.addEventListener('click', function () { toggle(b, tr, key, cells.length, fill, c); });
        td.appendChild(b);
      } else if (typeof c === 'string') {
        td.textContent = c;
      } else if (c) {
        td.appendChild(c);
      }
      tr.appendChild(td);
    });
    body.appendChild(tr);
    if (open) body.appendChild(detailRow(cells.length, fill));
  }

  function detailRow(span, fill) {
    var tr = make('tr', 'detail-row');
    var td = make('td');
    td.colSpan = span;
    var box = make('div', 'lock-details');
    fill(box);
    td.appendChild(box);
    tr.appendChild(td);
    return tr;
  }

  function toggle(b, tr, key, span, fill, label) {
    if (!view.open) view.open = new Set();
    var next = tr.nextSibling;
    if (view.open.has(key)) {
      view.open.delete(key);
      if (next && next.classList.contains('detail-row')) next.remove();
    } else {
      view.open.add(key);
      tr.parentNode.insertBefore(detailRow(span, fill), tr.nextSibling);
    }
    var open = view.open.has(key);
    b.textContent = (open ? '\u25be ' : '\u25b8 ') + (label || '');
    b.setAttribute('aria-expanded', open ? 'true' : 'false');
    b.setAttribute('aria-label', (open ? 'close ' : 'open ') + 'details of ' + key.replace(/^[a-z]+:/, ''));
  }

  /* The detail of a lock family (and of the finding about it). */
  function details(box, l, f, r) {
    var reason = (f && f.reason) || (l && l.reason);
    var fix = (f && f.suggestion) || (l && l.suggestion);
    if (reason) box.appendChild(para('why', reason));
    if (fix) box.appendChild(para('fix', fix));
    if (f && f.category === 'load-imbalance') {
      box.appendChild(make('p', 'muted small', 'The thread groups are below, under "Thread groups".'));
      if (f.best_causal) box.appendChild(para('slowest group\'s hottest line', causalCell(f.best_causal)));
      return;
    }
    if (!l) return;
    if (l.trylock) box.appendChild(para('try-locks', l.trylock.reason + (l.trylock.suggestion ? ' Fix: ' + l.trylock.suggestion : '')));
    var fg = l.figures || {};
    box.appendChild(para('figures', Coz.rate(fg.frequency) + ' (' + num0(fg.acquisitions) + ' acquisitions), ' +
      share(fg.contention) + ' contended, users waiting ' + share(fg.waiting_share) + ' of their time, waited ' + time(fg.wait_ns) +
      ' in all (' + time(fg.wait_per_acquisition_ns) + ' per acquisition), held ' + time(fg.mean_hold_ns) + ' per acquisition (' +
      share(fg.hold_share) + ' of the run)' + (fg.trylocks ? ', ' + fg.trylocks + ' try-locks (' + share(fg.trylock_failure_rate) + ' failed)' : '') +
      (l.single_thread ? '; used by one thread only' : '') + '.'));
    var byQ = l.members_by_quadrant && typeof l.members_by_quadrant === 'object' ? l.members_by_quadrant : {};
    var qs = Object.keys(byQ).sort();
    if (qs.length) box.appendChild(para('objects by quadrant', qs.map(function (q) { return q + ': ' + byQ[q]; }).join(', ')));
    if (l.asymmetry) box.appendChild(para('asymmetry', asymmetryText(l.asymmetry)));

    var sites = list(l.sites);
    if (sites.length) {
      box.appendChild(make('h4', null, 'Acquisition sites (' + sites.length + ')'));
      var t = table('', ['call site', 'acquisitions', 'contended', 'waited', 'mean hold', 'try-locks', 'causal @50% (site\'s line)'],
        [1, 2, 3, 4, 5]);
      t.wrap.querySelector('table').classList.add('sites-table');
      sites.forEach(function (s) {
        var tr = make('tr');
        var site = make('td');
        var code = make('code', null, Coz.shortLine(s.site));
        code.title = s.site || '';
        site.appendChild(code);
        tr.appendChild(site);
        var acq = s.acquisitions || 0;
        [num0(s.acquisitions), num0(s.contended) + (acq ? ' (' + share((s.contended || 0) / acq) + ')' : ''),
          time(s.wait_ns), acq ? time((s.hold_ns || 0) / acq) : 'n/a',
          s.trylocks ? s.trylocks + ' (' + (s.trylock_failures || 0) + ' failed)' : '0'].forEach(function (v) {
          tr.appendChild(make('td', 'num', v));
        });
        var c = make('td');
        var curve = typeof s.site === 'string' ? Coz.app.findAnyCurve(s.site, ['callsite', 'line']) : null;
        c.appendChild(curve ? causalCell({line: curve.line, progress_point: curve.progress_point, predicted: curve.predicted,
          role: curve.unit === 'callsite' ? 'call site' : null}) : dash());
        tr.appendChild(c);
        t.body.appendChild(tr);
      });
      box.appendChild(t.wrap);
    }
    var sections = list(l.critical_sections);
    if (sections.length) {
      box.appendChild(make('h4', null, 'Critical sections'));
      var ul = make('ul', 'sections');
      sections.forEach(function (cs) {
        var li = make('li');
        var lines = list(cs.lines);
        var range = lines.length ? Coz.shortLine(lines[0]) + (lines.length > 1 ? '\u2013' + String(lines[lines.length - 1]).replace(/^.*:/, '') : '') :
          Coz.shortLine(cs.site);
        li.appendChild(make('code', null, range));
        li.appendChild(make('span', 'muted', ' (' + (cs.method || 'unknown') + ')'));
        var joined = list(cs.causal);
        if (joined.length) {
          li.appendChild(document.createTextNode(': '));
          joined.forEach(function (c, i) {
            if (i) li.appendChild(document.createTextNode(', '));
            li.appendChild(causalCell(c));
          });
        } else {
          li.appendChild(make('span', 'muted', ': no causal prediction for its lines'));
        }
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    var top = list(l.top_members);
    if (top.length) {
      box.appendChild(make('h4', null, 'Most contended objects'));
      var t4 = table('', ['object', 'acquisitions', 'contention', 'waited', 'waiting', 'mean hold', 'threads', 'quadrant'], [1, 2, 3, 4, 5, 6]);
      top.forEach(function (m) {
        var tr = make('tr');
        tr.appendChild(make('td', null, '#' + m.id + (isNum(m.address) ? ' at 0x' + m.address.toString(16) : '')));
        [num0(m.acquisitions), share(m.contention), time(m.wait_ns), share(m.waiting_share), time(m.mean_hold_ns), num0(m.threads)]
          .forEach(function (v) { tr.appendChild(make('td', 'num', v)); });
        tr.appendChild(make('td', null, m.quadrant || ''));
        t4.body.appendChild(tr);
      });
      box.appendChild(t4.wrap);
    }
  }

  function asymmetryText(a) {
    var parts = [];
    if (isNum(a.hot_objects)) parts.push(a.hot_objects + ' hot object' + (a.hot_objects === 1 ? '' : 's') +
      (isNum(a.compared) ? ' of ' + a.compared + ' compared' : ''));
    if (isNum(a.hot_acquisition_share)) parts.push('taking ' + share(a.hot_acquisition_share) + ' of the acquisitions');
    if (isNum(a.hot_contention)) parts.push('contended ' + share(a.hot_contention) + ' against ' + share(a.rest_contention) + ' for the others');
    if (Array.isArray(a.acquisitions_range)) parts.push('acquisitions per object ' + a.acquisitions_range.join(' to '));
    if (a.measure) parts.push('test: ' + a.measure + (isNum(a.ratio) ? ', ratio ' + a.ratio.toFixed(1) : ''));
    return parts.join('; ');
  }

  function para(label, content) {
    var p = make('p', 'detail');
    p.appendChild(make('span', 'label', label + ': '));
    if (typeof content === 'string') p.appendChild(document.createTextNode(content)); else p.appendChild(content);
    return p;
  }

  function imbalance(li) {
    var box = make('section', 'imbalance');
    box.id = 'locks-groups';
    box.appendChild(make('h3', null, 'Thread groups'));
    if (!li || !Array.isArray(li.groups) || !li.groups.length) {
      box.appendChild(make('p', 'muted', 'No thread records: the run says nothing about its thread groups.'));
      return box;
    }
    var sugg = new Map();
    list(li.suggested).forEach(function (s) { sugg.set(s.group, s); });
    var text = li.imbalanced ? 'Load imbalance: the waiting shares of ' + list(li.compared).join(', ') + ' differ by ' + share(li.spread) +
      ' of their lifetime; the slowest group is ' + li.slowest + ' (the others wait for it).' :
      'No load imbalance' + (list(li.compared).length ? ' among the thread groups compared (' + li.compared.join(', ') + ')' : '') + '.';
    box.appendChild(make('p', null, text));
    var t = table('locks-groups-table', ['group', 'threads', 'lifetime', 'computing', 'CPU', 'waiting (share)', 'suggested threads'],
      [1, 2, 3, 4, 5, 6]);
    li.groups.forEach(function (g) {
      var tr = make('tr');
      if (g.group === li.slowest) tr.classList.add('slowest');
      tr.appendChild(make('td', null, g.group + (g.group === li.slowest ? ' (slowest)' : '')));
      var s = sugg.get(g.group);
      [num0(g.threads), time(g.lifetime_ns), time(g.computing_ns), time(g.cpu_ns),
        time(g.sync_wait_ns) + ' (' + share(g.waiting_share) + ')',
        s ? (isNum(s.share) ? s.share.toFixed(2) + ' \u2192 ' : '') + s.suggested : '\u2014'].forEach(function (v) {
        tr.appendChild(make('td', 'num', v));
      });
      t.body.appendChild(tr);
    });
    box.appendChild(t.wrap);
    if (li.hottest_line) {
      var p = para('slowest group\'s hottest line', li.causal ? causalCell(li.causal) : make('code', null, Coz.shortLine(li.hottest_line)));
      if (isNum(li.hottest_line_ns)) p.appendChild(make('span', 'muted', ' (' + time(li.hottest_line_ns) + ' not waiting for other threads)'));
      box.appendChild(p);
    }
    return box;
  }

  Coz.views.locks = {render: render};
})();
