/* The units view: every unit of the progress point in one ranked table, its
 * kind beside its name (line, function, call site), with its figures and the
 * share of its samples on and off the CPU. A function's row opens to the
 * lines in it and to its callers' call sites (the analysis's `contains` and
 * `called_from`); a row's name shows its causal plot in the panel beside the
 * table. Filters and order are the sidebar's.
 */
(function () {
  'use strict';

  var Coz = window.Coz;
  var make = Coz.make, pct = Coz.pct, num = Coz.num, isNum = Coz.isNum;

  var view = {
    expanded: new Set(),   // unit keys of the function rows left open
    selected: null,        // the curve shown in the panel
    nest: true
  };

  function keyOf(l) { return l.progress_point + '\u0000' + Coz.unitKey(l); }

  /* The lines and call sites a function's row opens to, as curves (or the
   * bare names the analysis lists, when a curve is missing). */
  function childrenOf(l) {
    var app = Coz.app, out = [];
    l.contains.forEach(function (spec) {
      out.push({rel: 'in', spec: spec, unit: 'line', curve: app.findCurve(spec, l.progress_point, ['line'])});
    });
    l.called_from.forEach(function (spec) {
      out.push({rel: 'caller', spec: spec, unit: 'callsite', curve: app.findCurve(spec, l.progress_point, ['callsite'])});
    });
    return out;
  }

  function render(panel) {
    var app = Coz.app, a = app.analysis();
    releasePanel(panel);
    panel.textContent = '';
    if (!a) {
      panel.appendChild(Coz.note('No analysis loaded.\nOpen an analysis (coz report profile.coz --json analysis.json) to see its units.'));
      return;
    }
    var v = app.visibleLines();
    var hasFunctions = a._unitKinds.indexOf('function') >= 0;
    var unitFilter = document.getElementById('unit-filter').value;
    var nesting = view.nest && hasFunctions && unitFilter === 'all';

    var bar = make('div', 'view-toolbar');
    if (hasFunctions) {
      var lab = make('label', 'check');
      var box = make('input');
      box.type = 'checkbox';
      box.id = 'units-nest';
      box.checked = view.nest;
      box.disabled = unitFilter !== 'all';
      box.addEventListener('change', function () { view.nest = box.checked; render(panel); });
      lab.appendChild(box);
      lab.appendChild(document.createTextNode(' nest lines and call sites under their function'));
      bar.appendChild(lab);
    }
    bar.appendChild(make('span', 'muted', v.list.length + ' of ' + v.total + ' units of progress point ' + app.point() +
      ', sorted as the sidebar says; a name shows its plot'));
    panel.appendChild(bar);

    if (!v.list.length) {
      panel.appendChild(Coz.note(v.total ? 'No unit matches the filters.\nChange the filters in the sidebar.' :
        'No unit has results for this progress point.'));
      return;
    }

    var layout = make('div', 'split units-split');
    var wrap = make('div', 'table-wrap');
    var table = make('table', 'units-table data-table');
    table.id = 'units-table';
    var thead = make('thead');
    var hr = make('tr');
    [['unit', 'the unit of virtual speedup; a function opens to its lines and its callers\' call sites'],
      ['kind', 'line, function or call site'], ['impact', 'mean predicted program speedup over unit speedups 0-100%'],
      ['slope [95%]', 'program speedup per unit of speedup, with its 95% interval'],
      ['@50%', 'predicted program speedup at 50% unit speedup'], ['max', 'highest measured program speedup'],
      ['exps', 'experiments'], ['time on / off the CPU', 'share of the unit\'s samples on the CPU and in each wait category']
    ].forEach(function (h, i) {
      var th = make('th', i >= 2 && i <= 6 ? 'num' : null, h[0]);
      th.title = h[1];
      th.scope = 'col';
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    table.appendChild(thead);
    var body = make('tbody');

    var nested = new Set();
    if (nesting) {
      var shown = new Set(v.list.map(keyOf));
      v.list.forEach(function (l) {
        if (l.unit !== 'function') return;
        childrenOf(l).forEach(function (ch) { if (ch.curve && shown.has(keyOf(ch.curve))) nested.add(keyOf(ch.curve)); });
      });
    }
    var frag = document.createDocumentFragment();
    v.list.forEach(function (l) {
      if (nested.has(keyOf(l))) return;
      frag.appendChild(row(l, 0, nesting, null));
      if (nesting && l.unit === 'function' && view.expanded.has(keyOf(l))) {
        childRows(l).forEach(function (r) { frag.appendChild(r); });
      }
    });
    body.appendChild(frag);
    table.appendChild(body);
    wrap.appendChild(table);
    layout.appendChild(wrap);

    var side = make('aside', 'side-panel');
    side.id = 'units-panel';
    side.setAttribute('aria-live', 'polite');
    layout.appendChild(side);
    panel.appendChild(layout);
    var still = view.selected && v.list.indexOf(view.selected) >= 0 ? view.selected : null;
    showInPanel(side, still);
  }

  function childRows(l) {
    return childrenOf(l).map(function (ch) { return row(ch.curve, 1, false, ch); });
  }

  /* One table row; `child` is {rel, spec, unit, curve} for a nested row. */
  function row(l, depth, nesting, child) {
    var tr = make('tr', depth ? 'child-row' : null);
    var unit = l ? l.unit : child.unit;
    tr.dataset.unit = unit;
    tr.dataset.line = l ? l.line : child.spec;
    if (l && l.category) tr.dataset.category = l.category;
    if (l && l.contention) tr.classList.add('contention');
    if (l && l === view.selected) tr.classList.add('selected');
    var off = l && Coz.offCpuCategory(l);
    if (off) tr.classList.add('offcpu');

    var name = make('td', 'unit-cell');
    name.style.paddingLeft = (6 + depth * 22) + 'px';
    var kids = nesting && l && l.unit === 'function' ? l.contains.length + l.called_from.length : 0;
    if (kids) {
      var open = view.expanded.has(keyOf(l));
      var t = Coz.button('toggle', open ? '\u25be' : '\u25b8');
      t.setAttribute('aria-expanded', open ? 'true' : 'false');
      t.setAttribute('aria-label', (open ? 'close ' : 'open ') + l.line + ': ' + kids + ' lines and call sites');
      t.addEventListener('click', function () {
        var k = keyOf(l);
        if (view.expanded.has(k)) view.expanded.delete(k); else view.expanded.add(k);
        var expanded = view.expanded.has(k);
        t.textContent = expanded ? '\u25be' : '\u25b8';
        t.setAttribute('aria-expanded', expanded ? 'true' : 'false');
        t.setAttribute('aria-label', (expanded ? 'close ' : 'open ') + l.line + ': ' + kids + ' lines and call sites');
        // Add or drop the child rows in place: the rest of the table stays as it is.
        var next = tr.nextSibling;
        while (next && next.classList.contains('child-row')) { var n = next.nextSibling; next.remove(); next = n; }
        if (expanded) {
          var frag = document.createDocumentFragment();
          childRows(l).forEach(function (r) { frag.appendChild(r); });
          tr.parentNode.insertBefore(frag, tr.nextSibling);
        }
      });
      name.appendChild(t);
    } else if (nesting) {
      name.appendChild(make('span', 'toggle-space'));
    }
    if (child) name.appendChild(make('span', 'rel-label', child.rel === 'in' ? 'line in it' : 'calls it from'));
    if (l) {
      var b = Coz.button('link unit-open', l.unit === 'function' ? Coz.functionName(l.line).name : Coz.shortLine(l.line),
        'show the plot of ' + l.line);
      b.addEventListener('click', function () { select(l, tr); });
      name.appendChild(b);
      if (l.unit === 'function' && Coz.fileOf(l)) name.appendChild(make('span', 'muted small', ' ' + Coz.basename(Coz.fileOf(l))));
      if (off) name.appendChild(Coz.categoryBadge(off));
      if (l.contention) name.appendChild(make('span', 'badge badge-contention', 'contention'));
    } else {
      var missing = make('span', 'muted', Coz.shortLine(child.spec));
      missing.title = child.spec + ': no curve for this progress point';
      name.appendChild(missing);
    }
    tr.appendChild(name);
    tr.appendChild(cell(null, Coz.app.unitChip(l || {unit: unit})));
    if (!l) {
      var rest = make('td', 'muted', 'no curve for this progress point');
      rest.colSpan = 6;
      tr.appendChild(rest);
      return tr;
    }
    tr.appendChild(cell('num', pct(l.impact)));
    var ci = Array.isArray(l.slope_ci) && isNum(l.slope_ci[0]) ? ' [' + num(l.slope_ci[0]) + ', ' + num(l.slope_ci[1]) + ']' : '';
    tr.appendChild(cell('num', num(l.slope) + ci));
    tr.appendChild(cell('num', pct(l.predicted && l.predicted['0.5'])));
    tr.appendChild(cell('num', pct(l.max_speedup)));
    tr.appendChild(cell('num', isNum(l.experiments) ? String(l.experiments) : 'n/a'));
    var shares = Coz.unitShares(l);
    var td = make('td', 'time-cell');
    if (shares) {
      td.appendChild(Coz.shareBar(shares, {label: 'time of its samples'}));
      td.appendChild(make('span', 'time-text', Coz.sharesText(shares)));
    } else {
      td.appendChild(make('span', 'muted', 'n/a'));
      td.title = 'the analysis has no on/off-CPU shares for this unit (older profile, or no samples)';
    }
    tr.appendChild(td);
    return tr;
  }

  function cell(cls, content) {
    var td = make('td', cls);
    if (typeof content === 'string') td.textContent = content; else if (content) td.appendChild(content);
    return td;
  }

  function select(l, tr) {
    view.selected = l;
    var table = document.getElementById('units-table');
    if (table) Array.prototype.forEach.call(table.querySelectorAll('tr.selected'), function (r) { r.classList.remove('selected'); });
    if (tr) tr.classList.add('selected');
    var side = document.getElementById('units-panel');
    if (side) {
      showInPanel(side, l);
      // Under the table (narrow page): bring the plot into view.
      if (tr && side.getBoundingClientRect().top > tr.getBoundingClientRect().bottom) side.scrollIntoView({block: 'nearest'});
    }
  }

  function showInPanel(side, l) {
    Coz.app.releaseCards(side);
    side.textContent = '';
    if (!l) {
      side.appendChild(Coz.note('Choose a unit\nIts causal plot, figures and source show here. ' +
        '"Open in causal plots" then shows it among the others.'));
      return;
    }
    side.appendChild(Coz.app.drawnCard(l));
    var go = Coz.button('secondary', 'Open in causal plots');
    go.addEventListener('click', function () { Coz.app.openUnit(l); });
    side.appendChild(go);
  }

  function releasePanel(panel) { Coz.app.releaseCards(panel); }

  Coz.views.units = {render: render};
})();
