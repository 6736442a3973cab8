/* dlperf report: draws the charts and tables of the results embedded in #dlp-data (report/report.c writes the
   page). Every chart has a title, axes in units and the table of its numbers under it; a missing piece is a stated
   gap, never an empty chart. Table cells that show a saved figure carry data-k="run|file|path|scale" so a test can
   compare what is shown with the run directory's JSON. After drawing, the page checks itself (errors caught,
   every canvas drawn) into #selfcheck. */
(function () {
  'use strict';
  var errors = [];
  window.addEventListener('error', function (e) { errors.push(String(e.message || e)); });
  var D = JSON.parse(document.getElementById('dlp-data').textContent);
  var runs = D.runs, multi = runs.length > 1;
  var haveCharts = D.charts && typeof Chart !== 'undefined';
  var root = document.getElementById('report');
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f',
    '#bcbd22'];
  var nCharts = 0, nGaps = 0;

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    (kids || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    });
    return e;
  }
  function get(o, path) {
    var p = path.split('.');
    for (var i = 0; i < p.length && o !== null && o !== undefined; i++) o = o[p[i]];
    return o === undefined ? null : o;
  }
  function isNum(v) { return typeof v === 'number' && isFinite(v); }
  function fmt(v) {
    if (!isNum(v)) return '–';
    var a = Math.abs(v);
    if (Number.isInteger(v) || a >= 1000) return v.toFixed(0);
    if (a >= 100) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    if (a === 0) return '0';
    return v.toPrecision(3);
  }
  function col(i) { return COLORS[i % COLORS.length]; }
  function runName(i) { return runs[i].name; }
  // a table cell with a saved figure: value = file's path * scale
  function cell(ri, file, path, scale) {
    var v = get(runs[ri][file], path);
    scale = scale || 1;
    if (!isNum(v)) return el('td', {}, ['–']);
    return el('td', { 'data-k': ri + '|' + file + '|' + path + '|' + scale }, [fmt(v * scale)]);
  }
  function numCell(v) { return el('td', {}, [fmt(v)]); }
  function table(head, rows) {
    return el('table', {}, [el('thead', {}, [el('tr', {}, head.map(function (h) { return el('th', {}, [h]); }))]),
      el('tbody', {}, rows.map(function (r) {
        return el('tr', {}, r.map(function (c) { return c instanceof Node ? c : el('td', {}, [c === null ? '–' : String(c)]); }));
      }))]);
  }
  function gapP(text) { nGaps++; return el('p', { 'class': 'gap' }, [text]); }
  function section(title, intro) {
    var s = el('section', {}, [el('h2', {}, [title])]);
    if (intro) s.appendChild(el('p', { 'class': 'intro' }, [intro]));
    root.appendChild(s);
    return s;
  }

  // vertical lines at stage/phase boundaries: options.plugins.boundaries = [{x, label}]
  var boundaryPlugin = {
    id: 'boundaries',
    afterDatasetsDraw: function (chart, args, opts) {
      var list = (opts && opts.lines) || [], x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      if (!x || !list.length) return;
      ctx.save();
      ctx.font = '11px sans-serif';
      ctx.fillStyle = '#444';
      list.forEach(function (b, i) {
        var px = x.getPixelForValue(b.x);
        if (!(px >= area.left && px <= area.right)) return;
        ctx.strokeStyle = b.major ? '#000' : '#888';
        ctx.setLineDash(b.major ? [] : [4, 3]);
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
        ctx.fillText(b.label, px + 3, area.top + 11 + (i % 3) * 12);
      });
      ctx.restore();
    }
  };

  // A chart with its title and the table under it. spec: {type, labels, datasets, x: title, y: title, y2, xType,
  // stacked, logY, lines, horizontal}. gap: text when there is nothing to draw.
  function figure(parent, title, spec, tbl, gap) {
    var f = el('figure', {}, [el('h3', {}, [title])]);
    parent.appendChild(f);
    if (gap) { f.appendChild(gapP(title + ': ' + gap)); return f; }
    if (!haveCharts) {
      f.appendChild(gapP('charts unavailable: install libjs-chart.js (' + (D.charts_why || 'Chart.js not loaded') +
        '); the numbers are in the table below'));
    } else {
      var box = el('div', { 'class': 'chartbox' }), cv = el('canvas', { 'data-title': title });
      box.appendChild(cv); f.appendChild(box);
      nCharts++;
      var scales = {}, idx = spec.horizontal ? 'y' : 'x', val = spec.horizontal ? 'x' : 'y';
      scales[idx] = { type: spec.xType || 'category', title: { display: true, text: spec.x }, stacked: !!spec.stacked };
      scales[val] = { type: spec.logY ? 'logarithmic' : 'linear', title: { display: true, text: spec.y },
        stacked: !!spec.stacked, beginAtZero: !spec.logY };
      if (spec.yMax !== undefined) scales[val].max = spec.yMax;
      if (spec.y2) scales.y2 = { type: 'linear', position: 'right', min: 0, max: 100, title: { display: true, text: spec.y2 },
        grid: { drawOnChartArea: false } };
      try {
        new Chart(cv.getContext('2d'), {
          type: spec.type,
          data: { labels: spec.labels, datasets: spec.datasets },
          options: {
            animation: false, responsive: true, maintainAspectRatio: false, indexAxis: spec.horizontal ? 'y' : 'x',
            parsing: spec.xType === 'linear' ? false : undefined, normalized: true,
            elements: { point: { radius: spec.points ? 3 : 0 }, line: { borderWidth: 1.5 } },
            plugins: { legend: { display: spec.datasets.length > 1 || !!spec.legend, position: 'bottom' },
              boundaries: { lines: spec.lines || [] } },
            scales: scales
          },
          plugins: [boundaryPlugin]
        });
      } catch (e) { errors.push(title + ': ' + e + (e && e.stack ? ' ' + String(e.stack).split('\n').slice(0, 3).join(' | ') : '')); }
    }
    if (tbl) f.appendChild(tbl);
    return f;
  }
  function ds(label, data, i, extra) {
    var d = { label: label, data: data, borderColor: col(i), backgroundColor: col(i) + (extra && extra.fill ? '55' : 'cc') };
    for (var k in extra || {}) d[k] = extra[k];
    return d;
  }

  function draw() {
  // ---- header, verdict, gaps ----
  root.appendChild(el('h1', {}, ['dlperf report: ' + runs.map(function (r) { return r.name; }).join(' vs ')]));
  root.appendChild(el('p', { 'class': 'meta' }, ['Written ' + D.created + ' by dlperf ' + D.dlperf_version +
    ' from the saved results of ' + runs.map(function (r) { return r.dir; }).join(', ') +
    (D.charts ? '' : '. Charts unavailable: install libjs-chart.js (' + D.charts_why + ')') + '.']));
  var sv = section('Verdict');
  runs.forEach(function (r, i) {
    sv.appendChild(el('p', { 'class': 'verdict' }, [multi ? el('b', {}, [r.name + ': ']) : null, r.verdict || 'No verdict.']));
  });
  runs.forEach(function (r) {
    if (!r.gaps.length) return;
    sv.appendChild(el('p', {}, [(multi ? r.name + ': w' : 'W') + 'hat this run lacks (shown as gaps below):']));
    sv.appendChild(el('ul', { 'class': 'gaps' }, r.gaps.map(function (g) { nGaps++; return el('li', {}, [g.what + ': ' + g.why]); })));
  });

  // ---- summary (and ratios) ----
  var SUM = [
    ['data preparation, img/s', 'summary.prep_img_per_s', 1],
    ['training, img/s', 'summary.train_img_per_s', 1],
    ['data wait, % of the step', 'summary.train_data_wait_frac', 100],
    ['training GFLOP/s', 'summary.train_gflop_per_s', 1],
    ['fraction of the measured peak, %', 'summary.train_fraction_of_peak', 100],
    ['inference, img/s (best batch)', 'summary.infer_img_per_s', 1],
    ['latency p50, ms', 'summary.latency_p50_ms', 1],
    ['latency p99, ms', 'summary.latency_p99_ms', 1],
    ['$ per hour', 'summary.usd_per_hour', 1],
    ['$ per million training images', 'summary.usd_per_million_train_images', 1],
    ['$ per million inferences', 'summary.usd_per_million_inferences', 1],
    ['run wall time, s', 'summary.wall_s', 1]
  ];
  var ss = section('Summary', multi ? 'One column per run; the ratio columns divide each run by the first (' + runName(0) + ').' : null);
  var head = ['figure'].concat(runs.map(function (r) { return r.name; }));
  if (multi) for (var i = 1; i < runs.length; i++) head.push(runName(i) + ' / ' + runName(0));
  ss.appendChild(table(head, SUM.map(function (s) {
    var row = [s[0]].concat(runs.map(function (r, ri) { return cell(ri, 'run', s[1], s[2]); }));
    if (multi) for (var j = 1; j < runs.length; j++) {
      var a = get(runs[j].run, s[1]), b = get(runs[0].run, s[1]);
      row.push(isNum(a) && isNum(b) && b !== 0 ? el('td', { 'class': 'ratio' }, [(a / b).toFixed(2) + 'x']) : '–');
    }
    return row;
  })));

  // ---- the machine ----
  var sm = section('The machine');
  var MROWS = [
    ['CPU', function (r) { return get(r.run, 'host.cpu_model'); }],
    ['CPUs online / allowed', function (r) { return get(r.run, 'host.cpus_online') + ' / ' + get(r.run, 'host.cpus_allowed'); }],
    ['clock, MHz', function (r) { return get(r.run, 'host.mhz'); }],
    ['memory, GiB', function (r) { var m = get(r.run, 'host.mem_total_bytes'); return isNum(m) ? (m / 1073741824).toFixed(1) : null; }],
    ['instruction sets', function (r) { return (get(r.run, 'host.isa') || []).join(' '); }],
    ['GPUs', function (r) {
      var g = get(r.train, 'monitor.sources.gpu') || get(r.infer, 'monitor.sources.gpu');
      return g ? (g.available ? g.note : 'none monitored: ' + g.note) : 'not known (no monitor result)';
    }],
    ['kernel, host', function (r) { return get(r.run, 'host.kernel') + ', ' + get(r.run, 'host.hostname'); }],
    ['device, precision, model', function (r) { return get(r.run, 'options.device') + ', ' + get(r.run, 'precision') + ', ' +
      get(r.run, 'options.model') + ' at ' + get(r.run, 'options.size') + ' px, batch ' + get(r.run, 'options.batch'); }],
    ['command', function (r) { return (get(r.run, 'argv') || []).join(' '); }],
    ['run created', function (r) { return get(r.run, 'created'); }]
  ];
  var vkeys = [];
  runs.forEach(function (r) { Object.keys(get(r.run, 'versions') || {}).forEach(function (k) { if (vkeys.indexOf(k) < 0) vkeys.push(k); }); });
  vkeys.forEach(function (k) { MROWS.push([k, function (r) { var v = (get(r.run, 'versions') || {})[k]; return v === undefined ? null : v; }]); });
  if (vkeys.indexOf('dlperf commit') < 0) MROWS.push(['dlperf commit', function () { return 'not recorded by this build'; }]);
  var mt = table([''].concat(runs.map(function (r) { return r.name; })), MROWS.map(function (m) {
    return [m[0]].concat(runs.map(function (r) { var v = m[1](r); return v === null || v === undefined ? '–' : String(v); }));
  }));
  mt.setAttribute('class', 'text');
  sm.appendChild(mt);

  // ---- the input pipeline ----
  var sp = section('The input pipeline', 'Read, JPEG decode, random-resized crop, flip and normalize, alone (no model to feed), over loader threads.');
  var withData = runs.map(function (r, i) { return i; }).filter(function (i) { return runs[i].data && (runs[i].data.runs || []).length; });
  if (!withData.length) {
    figure(sp, 'Input pipeline scaling over loader threads', null, null, 'not measured (' + gapWhy('input pipeline') + ')');
  } else {
    var wl = [];
    withData.forEach(function (i) { runs[i].data.runs.forEach(function (x) { if (wl.indexOf(x.workers) < 0) wl.push(x.workers); }); });
    wl.sort(function (a, b) { return a - b; });
    var rowsP = [];
    withData.forEach(function (i) {
      runs[i].data.runs.forEach(function (x, k) {
        rowsP.push([multi ? runName(i) : null, String(x.workers), cell(i, 'data', 'runs.' + k + '.img_per_s'),
          cell(i, 'data', 'runs.' + k + '.mb_per_s'), cell(i, 'data', 'runs.' + k + '.loader.worker_ms_per_image.read'),
          cell(i, 'data', 'runs.' + k + '.loader.worker_ms_per_image.decode'),
          cell(i, 'data', 'runs.' + k + '.loader.worker_ms_per_image.augment'),
          cell(i, 'data', 'runs.' + k + '.loader.decoded_pixel_fraction', 100)].filter(function (c) { return c !== null; }));
      });
    });
    var hp = ['loader threads', 'img/s', 'MB/s', 'read ms/img', 'decode ms/img', 'augment ms/img', 'pixels decoded, %'];
    if (multi) hp.unshift('run');
    figure(sp, 'Images per second over loader threads', {
      type: 'line', labels: wl.map(String), x: 'loader threads', y: 'images per second', points: true,
      datasets: withData.map(function (i) {
        return ds(runName(i), wl.map(function (w) { var x = runs[i].data.runs.filter(function (q) { return q.workers === w; })[0]; return x ? x.img_per_s : null; }), i);
      })
    }, table(hp, rowsP));
    var labs = [], rd = [], dc = [], au = [];
    withData.forEach(function (i) {
      runs[i].data.runs.forEach(function (x) {
        labs.push((multi ? runName(i) + ' · ' : '') + x.workers + ' thr');
        var w = get(x, 'loader.worker_ms_per_image') || {};
        rd.push(w.read); dc.push(w.decode); au.push(w.augment);
      });
    });
    figure(sp, 'Worker time per image by stage', {
      type: 'bar', labels: labs, x: 'configuration', y: 'ms of worker time per image', stacked: true,
      datasets: [ds('read', rd, 0), ds('decode', dc, 1), ds('augment', au, 2)]
    }, null);
  }
  function gapWhy(what) {
    var w = [];
    runs.forEach(function (r) { r.gaps.forEach(function (g) { if (g.what === what) w.push((multi ? r.name + ': ' : '') + g.why); }); });
    return w.join('; ') || 'no result';
  }

  // ---- monitor helpers ----
  // the run's monitor series on one time axis: training then inference, t in s since the first sample
  function series(r) {
    var parts = [], t0 = null;
    ['training', 'inference'].forEach(function (st) {
      var m = r.monitor[st];
      if (!m) return;
      var u = m.cols.unix_s || m.cols.t_s;
      if (!u) return;
      if (t0 === null) t0 = u[0];
      parts.push({ stage: st, m: m, t: u.map(function (x) { return x - t0; }) });
    });
    return parts;
  }
  function boundaries(parts) {
    var lines = [];
    parts.forEach(function (p, pi) {
      lines.push({ x: p.t[0], label: p.stage, major: true });
      for (var k = 1; k < p.m.phase.length; k++)
        if (p.m.phase[k] !== p.m.phase[k - 1] && p.m.phase[k] !== 'end') lines.push({ x: p.t[k], label: p.m.phase[k] });
    });
    return lines;
  }
  function pts(parts, name, scale) {
    var out = [], any = false;
    parts.forEach(function (p, pi) {
      var c = p.m.cols[name];
      if (pi && out.length) out.push({ x: p.t[0], y: null });  // a gap between the stages
      for (var k = 0; k < p.t.length; k++) {
        var v = c ? c[k] : null;
        if (isNum(v)) any = true;
        out.push({ x: p.t[k], y: isNum(v) ? v * (scale || 1) : null });
      }
    });
    return any ? out : null;
  }
  function fieldsLike(parts, re) {
    var f = [];
    parts.forEach(function (p) { p.m.fields.forEach(function (n) { if (re.test(n) && f.indexOf(n) < 0) f.push(n); }); });
    return f;
  }
  // summary table of a few series: mean and max per series
  function statTable(rows, unit) {
    return table(['series', 'mean, ' + unit, 'max, ' + unit, 'samples'], rows.map(function (r) {
      var ys = r.data.map(function (p) { return p.y; }).filter(isNum);
      var mean = ys.reduce(function (a, b) { return a + b; }, 0) / (ys.length || 1);
      return [r.label, numCell(ys.length ? mean : null), numCell(ys.length ? Math.max.apply(null, ys) : null), String(ys.length)];
    }));
  }
  function tsFigure(parent, title, parts, list, y, extra) {
    list = list.filter(function (s) { return s.data; });
    if (!list.length) return figure(parent, title, null, null, (extra && extra.gap) || 'not measured in this run');
    var spec = { type: 'line', xType: 'linear', x: 'time since the first sample, s', y: y, lines: boundaries(parts),
      datasets: list.map(function (s, i) { return ds(s.label, s.data, i, s.fill ? { fill: s.fill, stack: 'a' } : { spanGaps: false }); }) };
    for (var k in extra || {}) spec[k] = extra[k];
    if (list.some(function (s) { return s.fill; })) spec.stacked = true;
    return figure(parent, title, spec, statTable(list, y.replace(/.*, /, '')));
  }

  // ---- training ----
  var stn = section('Training', 'The real loader feeding the backend, every phase timed, the hardware monitored.');
  var withTrain = runs.map(function (r, i) { return i; }).filter(function (i) { return runs[i].train; });
  if (!withTrain.length) {
    figure(stn, 'Training', null, null, 'not measured (' + gapWhy('training') + ')');
  } else {
    // throughput over time from the monitor's per-interval counts, over a trailing window of a few steps (a step
    // longer than the sampling interval would otherwise show as spikes)
    var tl = [], wins = [];
    withTrain.forEach(function (i) {
      var p = series(runs[i]).filter(function (q) { return q.stage === 'training'; });
      if (!p.length) return;
      var c = p[0].m.cols, t = p[0].t, img = c['run.images_per_s'], wt = c['run.data_wait_pct'], dt = c.dt_s;
      if (!img || !dt) return;
      var W = Math.max(2.5, 3 * (get(runs[i].train, 'throughput.ms_per_step') || 0) / 1000), rate = [], wait = [];
      wins.push((multi ? runName(i) + ': ' : '') + W.toFixed(1) + ' s');
      for (var k = 0; k < t.length; k++) {
        var n = 0, w = 0, span = 0;
        for (var j = k; j >= 0 && t[j] > t[k] - W; j--) {
          var d = isNum(dt[j]) ? dt[j] : 0;
          span += d;
          if (isNum(img[j])) n += img[j] * d;
          if (wt && isNum(wt[j])) w += Math.min(100, wt[j]) * d;
        }
        rate.push({ x: t[k], y: span > 0 ? n / span : null });
        wait.push({ x: t[k], y: span > 0 && wt ? w / span : null });
      }
      tl.push({ label: (multi ? runName(i) + ' ' : '') + 'img/s', data: rate });
      if (wt) tl.push({ label: (multi ? runName(i) + ' ' : '') + 'data wait %', data: wait, y2: true });
    });
    var tlf = tl.filter(function (s) { return s.data; });
    if (!tlf.length) figure(stn, 'Training throughput and data wait over time', null, null, 'no monitor series of the training stage (' + gapWhy('monitor: training') + ')');
    else {
      var p0 = series(runs[withTrain[0]]).filter(function (q) { return q.stage === 'training'; });
      figure(stn, 'Training throughput and data-wait share over time (trailing window of ' + wins.join(', ') + ')', {
        type: 'line', xType: 'linear', x: 'time since the training stage started, s', y: 'images per second', y2: 'data wait, % of the interval',
        lines: multi ? [] : boundaries(p0),
        datasets: tlf.map(function (s, i) { return ds(s.label, s.data, i, s.y2 ? { yAxisID: 'y2', borderDash: [5, 3] } : {}); })
      }, statTable(tlf, 'img/s or %'));
    }
    // phases
    var PH = ['data_wait', 'input', 'forward', 'loss', 'backward', 'allreduce', 'update', 'other'];
    var phk = function (i) { return runs[i].train.steady_state && runs[i].train.steady_state.phases ? 'steady_state.phases' : 'phases'; };
    figure(stn, 'Phase breakdown of a training step', {
      type: 'bar', horizontal: true, stacked: true, labels: withTrain.map(runName), x: 'run', y: 'ms per step',
      legend: true,
      datasets: PH.map(function (p, k) { return ds(p, withTrain.map(function (i) { return get(runs[i].train, phk(i) + '.' + p + '.ms_per_step'); }), k); })
    }, table(['phase'].concat(withTrain.map(function (i) { return runName(i) + ' ms/step'; }), withTrain.map(function (i) { return runName(i) + ' %'; })),
      PH.map(function (p) {
        return [p].concat(withTrain.map(function (i) { return cell(i, 'train', phk(i) + '.' + p + '.ms_per_step'); }),
          withTrain.map(function (i) { return cell(i, 'train', phk(i) + '.' + p + '.pct'); }));
      })));
    // GFLOP/s vs peak
    var GF = [['achieved (whole step)', 'gflop.achieved_per_s'], ['while computing', 'gflop.compute_per_s'], ['measured peak', 'gflop.peak_per_s']];
    figure(stn, 'GFLOP/s achieved vs the measured peak', {
      type: 'bar', labels: GF.map(function (g) { return g[0]; }), x: 'figure', y: 'GFLOP/s',
      datasets: withTrain.map(function (i) { return ds(runName(i), GF.map(function (g) { return get(runs[i].train, g[1]); }), i); })
    }, table(['figure'].concat(withTrain.map(runName)), GF.map(function (g) {
      return [g[0] + ', GFLOP/s'].concat(withTrain.map(function (i) { return cell(i, 'train', g[1]); }));
    }).concat([['fraction of peak, %'].concat(withTrain.map(function (i) { return cell(i, 'train', 'gflop.fraction_of_peak', 100); })),
      ['GFLOP per image'].concat(withTrain.map(function (i) { return cell(i, 'train', 'gflop.per_image'); }))])));
    // loss: the first step, each epoch's mean, the last step
    var lossSets = withTrain.map(function (i) {
      var t = runs[i].train, d = [], steps = get(t, 'run.last_step'), spe = get(t, 'config.resolved.steps_per_epoch');
      if (isNum(get(t, 'loss.first'))) d.push({ x: get(t, 'run.first_step') || 0, y: t.loss.first });
      (t.epochs || []).forEach(function (e) {
        if (isNum(e.loss_mean) && isNum(spe)) d.push({ x: Math.min((e.epoch - 0.5) * spe, steps || 0), y: e.loss_mean });
      });
      if (isNum(get(t, 'loss.last'))) d.push({ x: isNum(steps) ? steps : d.length, y: t.loss.last });
      d.sort(function (a, b) { return a.x - b.x; });
      return ds(runName(i), d, i, { showLine: true });
    });
    figure(stn, 'Training loss (the first step, each epoch\'s mean, the last step; per-step loss is not saved)', {
      type: 'scatter', xType: 'linear', x: 'step', y: 'cross-entropy loss', points: true, datasets: lossSets
    }, table(['figure'].concat(withTrain.map(runName)), [
      ['loss at the first step'].concat(withTrain.map(function (i) { return cell(i, 'train', 'loss.first'); })),
      ['loss at the last step'].concat(withTrain.map(function (i) { return cell(i, 'train', 'loss.last'); })),
      ['steps'].concat(withTrain.map(function (i) { return cell(i, 'train', 'run.steps'); })),
      ['steady img/s'].concat(withTrain.map(function (i) { return cell(i, 'train', 'throughput.steady_img_per_s'); })),
      ['loader capacity, img/s'].concat(withTrain.map(function (i) { return cell(i, 'train', 'throughput.loader_img_per_s'); })),
      ['data wait, % of the step'].concat(withTrain.map(function (i) { return cell(i, 'train', 'stall.data_wait_frac', 100); })),
      ['stall verdict'].concat(withTrain.map(function (i) { return get(runs[i].train, 'stall.text') || '–'; }))
    ]));
  }

  // ---- the monitor ----
  var grouped = [];
  runs.forEach(function (r) { ['training', 'inference'].forEach(function (st) {
    var m = r.monitor[st];
    if (m && m.group > 1) grouped.push((multi ? r.name + ' ' : '') + st + ': ' + m.rows + ' samples averaged in groups of ' + m.group);
  }); });
  var smo = section('The hardware over time', 'The monitor\'s samples (every 500 ms by default) through the training and the inference stage; ' +
    'solid lines mark the stages, dashed lines their phases.' + (multi ? ' One block per run.' : '') +
    (grouped.length ? ' Long series are averaged to fit the page (' + grouped.join('; ') + ').' : ''));
  if (multi) {  // the runs overlaid, one series per run, then each run's own block
    var ov = el('div', { 'class': 'runblock' }, [el('h3', {}, ['All runs, one series each (time since each run\'s first sample)'])]);
    smo.appendChild(ov);
    [['CPU busy, all CPUs', 'cpu.all.util_pct', 1, 'CPU busy, %'], ['This stage\'s processes: CPU', 'proc.cpu_pct', 1, 'CPU, % of one core'],
      ['Memory used', 'mem.used_bytes', 1 / 1073741824, 'memory, GiB']].forEach(function (m) {
      var list = runs.map(function (r) { return { label: r.name, data: pts(series(r), m[1], m[2]) }; }).filter(function (x) { return x.data; });
      if (!list.length) { figure(ov, m[0], null, null, 'no monitor series in these runs'); return; }
      figure(ov, m[0] + ' (runs overlaid)', { type: 'line', xType: 'linear', x: 'time since the run\'s first sample, s', y: m[3],
        datasets: list.map(function (x, i) { return ds(x.label, x.data, i, { spanGaps: false }); }) }, statTable(list, m[3].replace(/.*, /, '')));
    });
  }
  runs.forEach(function (r, ri) {
    var parts = series(r), blk = smo;
    if (multi) { blk = el('div', { 'class': 'runblock' }, [el('h3', {}, [r.name])]); smo.appendChild(blk); }
    if (!parts.length) { figure(blk, 'Monitor time series', null, null, 'no monitor series (' + r.gaps.filter(function (g) { return /^monitor/.test(g.what); }).map(function (g) { return g.why; }).join('; ') + ')'); return; }
    var modes = ['user', 'nice', 'system', 'iowait', 'irq', 'softirq', 'steal'];
    tsFigure(blk, 'CPU busy by mode (all CPUs)', parts, modes.map(function (m) { return { label: m, data: pts(parts, 'cpu.all.' + m + '_pct'), fill: true }; }),
      'CPU time, %', { yMax: 100 });
    tsFigure(blk, 'This stage\'s processes: CPU', parts, [{ label: 'process tree, % of one core', data: pts(parts, 'proc.cpu_pct') }], 'CPU, % of one core');
    tsFigure(blk, 'Memory', parts, [['used', 'mem.used_bytes'], ['cached', 'mem.cached_bytes'], ['available', 'mem.available_bytes'], ['process RSS', 'proc.rss_bytes']]
      .map(function (m) { return { label: m[0], data: pts(parts, m[1], 1 / 1073741824) }; }), 'memory, GiB');
    tsFigure(blk, 'Disk', parts, fieldsLike(parts, /^disk\..*_bytes_per_s$/).map(function (n) { return { label: n.replace(/^disk\./, '').replace('_bytes_per_s', ''), data: pts(parts, n, 1e-6) }; }),
      'MB/s', { gap: 'no disk series' });
    tsFigure(blk, 'Network', parts, fieldsLike(parts, /^net\..*_bytes_per_s$/).map(function (n) { return { label: n.replace(/^net\./, '').replace('_bytes_per_s', ''), data: pts(parts, n, 1e-6) }; }),
      'MB/s', { gap: 'no network series' });
    var srcs = get(r.train, 'monitor.sources') || get(r.infer, 'monitor.sources') || {};
    tsFigure(blk, 'Power (RAPL)', parts, fieldsLike(parts, /^rapl\..*power_w$/).map(function (n) { return { label: n.replace(/^rapl\./, '').replace('.power_w', ''), data: pts(parts, n) }; }),
      'power, W', { gap: 'not measurable here: ' + (get(srcs, 'rapl.note') || 'no RAPL series') });
    var gpus = fieldsLike(parts, /^gpu\.\d+\.util_pct$/).map(function (n) { return n.split('.')[1]; });
    if (!gpus.length) figure(blk, 'GPUs', null, null, 'no GPU monitored: ' + (get(srcs, 'gpu.note') || 'no GPU series'));
    gpus.forEach(function (g) {
      var pre = 'gpu.' + g + '.';
      tsFigure(blk, 'GPU ' + g + ': utilisation', parts, [['SM busy', 'util_pct'], ['memory busy', 'mem_util_pct']].map(function (m) { return { label: m[0], data: pts(parts, pre + m[1]) }; }), 'utilisation, %', { yMax: 100 });
      tsFigure(blk, 'GPU ' + g + ': memory used', parts, [{ label: 'used', data: pts(parts, pre + 'mem_used_bytes', 1 / 1073741824) }], 'memory, GiB');
      tsFigure(blk, 'GPU ' + g + ': power', parts, [{ label: 'board power', data: pts(parts, pre + 'power_w') }], 'power, W');
      tsFigure(blk, 'GPU ' + g + ': clocks', parts, [['SM', 'sm_clock_mhz'], ['memory', 'mem_clock_mhz']].map(function (m) { return { label: m[0], data: pts(parts, pre + m[1]) }; }), 'clock, MHz');
    });
  });

  // ---- the online phase ----
  var son = section('The online phase', 'Offline throughput over batch size and per-call latency of the inference plan (BN folded, fusions).');
  var withInf = runs.map(function (r, i) { return i; }).filter(function (i) { return runs[i].infer && (runs[i].infer.results || []).length; });
  if (!withInf.length) {
    figure(son, 'Inference', null, null, 'not measured (' + gapWhy('online phase') + ')');
  } else {
    var bl = [];
    withInf.forEach(function (i) { runs[i].infer.results.forEach(function (x) { if (bl.indexOf(x.batch) < 0) bl.push(x.batch); }); });
    bl.sort(function (a, b) { return a - b; });
    var at = function (i, b) { return runs[i].infer.results.filter(function (x) { return x.batch === b; })[0]; };
    var irows = [];
    withInf.forEach(function (i) {
      runs[i].infer.results.forEach(function (x, k) {
        var p = 'results.' + k + '.';
        irows.push([multi ? runName(i) : null, String(x.batch), cell(i, 'infer', p + 'images_per_s'), cell(i, 'infer', p + 'gflops_per_s'),
          cell(i, 'infer', p + 'latency_ms.p50'), cell(i, 'infer', p + 'latency_ms.p90'), cell(i, 'infer', p + 'latency_ms.p99'),
          cell(i, 'infer', p + 'latency_ms.mean'), cell(i, 'infer', p + 'latency_ms.count')].filter(function (c) { return c !== null; }));
      });
    });
    var hi = ['batch', 'img/s', 'GFLOP/s', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'calls'];
    if (multi) hi.unshift('run');
    figure(son, 'Inference throughput over batch size', {
      type: 'line', labels: bl.map(String), x: 'batch size', y: 'images per second', points: true,
      datasets: withInf.map(function (i) { return ds(runName(i), bl.map(function (b) { var x = at(i, b); return x ? x.images_per_s : null; }), i); })
    }, table(hi, irows));
    var PC = ['p50', 'p90', 'p95', 'p99'], llab = [], lsets = PC.map(function () { return []; });
    withInf.forEach(function (i) {
      runs[i].infer.results.forEach(function (x) {
        llab.push((multi ? runName(i) + ' · ' : '') + 'batch ' + x.batch);
        PC.forEach(function (p, k) { lsets[k].push(get(x, 'latency_ms.' + p)); });
      });
    });
    figure(son, 'Latency percentiles per call', {
      type: 'bar', labels: llab, x: 'configuration', y: 'latency per call, ms', datasets: PC.map(function (p, k) { return ds(p, lsets[k], k); })
    }, null);
    var QS = [['min', 0], ['p50', 50], ['p90', 90], ['p95', 95], ['p99', 99], ['max', 100]], dsets = [];
    withInf.forEach(function (i) {
      runs[i].infer.results.forEach(function (x) {
        dsets.push(ds((multi ? runName(i) + ' · ' : '') + 'batch ' + x.batch,
          QS.map(function (q) { return { x: q[1], y: get(x, 'latency_ms.' + q[0]) }; }).filter(function (p) { return isNum(p.y); }), dsets.length, { showLine: true }));
      });
    });
    figure(son, 'Latency distribution (the recorded quantiles: min, p50, p90, p95, p99, max)', {
      type: 'scatter', xType: 'linear', x: 'percentile of calls, %', y: 'latency per call, ms', points: true, datasets: dsets
    }, null);
  }
  // the online phase per precision (dlperf run --online-precisions): throughput and $ per million images, per run
  var withOc = runs.map(function (r, i) { return i; }).filter(function (i) { return (get(runs[i].run, 'summary.online_cost.precisions') || []).length; });
  if (!withOc.length) {
    figure(son, 'Cost per million images by precision', null, null, 'not measured (the run director' + (multi ? 'ies have' : 'y has') +
      ' no summary.online_cost: dlperf run measures it with --online-precisions)');
  } else {
    var PO = ['fp32', 'bf16', 'fp16', 'int8'], pl = PO.filter(function (p) {
      return withOc.some(function (i) { return get(runs[i].run, 'summary.online_cost.precisions').some(function (e) { return e.precision === p; }); });
    });
    var ocAt = function (i, p) {
      var a = get(runs[i].run, 'summary.online_cost.precisions');
      for (var k = 0; k < a.length; k++) if (a[k].precision === p) return k;
      return -1;
    };
    var priced = withOc.some(function (i) { return isNum(get(runs[i].run, 'summary.online_cost.usd_per_hour')); });
    var key = priced ? 'usd_per_million_images' : 'img_per_s';
    var orows = [];
    withOc.forEach(function (i) {
      pl.forEach(function (p) {
        var k = ocAt(i, p);
        if (k < 0) return;
        var e = get(runs[i].run, 'summary.online_cost.precisions')[k], q = 'summary.online_cost.precisions.' + k + '.';
        orows.push([multi ? runName(i) : null, p + (e.served ? ' (served)' : ''), e.not_measured || 'measured',
          cell(i, 'run', q + 'batch'), cell(i, 'run', q + 'img_per_s'), cell(i, 'run', q + 'x_served'),
          cell(i, 'run', q + 'usd_per_million_images')].filter(function (c) { return c !== null; }));
      });
    });
    var ho = ['precision', 'figure', 'batch', 'img/s', 'x served', '$ / 1M images'];
    if (multi) ho.unshift('run');
    figure(son, priced ? 'Cost per million images by precision (the online phase)' : 'Online throughput by precision (no price: give dlperf run --usd-per-hour)', {
      type: 'bar', labels: pl, x: 'precision', y: priced ? '$ per million images' : 'images per second',
      datasets: withOc.map(function (i) {
        return ds(runName(i), pl.map(function (p) { var k = ocAt(i, p); return k < 0 ? null : get(runs[i].run, 'summary.online_cost.precisions.' + k + '.' + key); }), i);
      })
    }, table(ho, orows));
  }
  var withLg = runs.map(function (r, i) { return i; }).filter(function (i) { return runs[i].loadgen; });
  if (!withLg.length) figure(son, 'LoadGen scenarios', null, null, 'no LoadGen result in the run director' + (multi ? 'ies' : 'y') +
    ' (dlperf run does not run LoadGen; `dlperf loadgen --json RUN_DIR/loadgen.json` adds one)');
  else withLg.forEach(function (i) {
    var lg = runs[i].loadgen, r = lg.result || {}, L = 'result.';
    if (!lg.result) { figure(son, 'LoadGen scenario', null, null, 'loadgen.json has no result'); return; }
    var lat = get(r, 'latency_ms') || {};
    var PCT = ['p50', 'p90', 'p95', 'p99', 'p99.9', 'max'].filter(function (p) { return isNum(lat[p]); });
    var rows = [['scenario, mode', (r.scenario || '?') + ', ' + (r.mode || '?') + ' (SUT ' + (r.sut || '?') + ')'],
      ['result', r.valid ? 'VALID' : 'INVALID' + (r.reasons && r.reasons.length ? ': ' + r.reasons.join('; ') : '')],
      [get(r, 'metric.name') || 'metric', cell(i, 'loadgen', L + 'metric.value')],
      ['completed samples/s', cell(i, 'loadgen', L + 'completed_samples_per_s')],
      ['QPS without LoadGen overhead', cell(i, 'loadgen', L + 'qps_without_loadgen_overhead')],
      ['queries issued', cell(i, 'loadgen', L + 'queries_issued')],
      ['samples ok / over the latency bound', (get(r, 'samples.ok') === null ? '–' : get(r, 'samples.ok')) + ' / ' +
        (get(r, 'samples.over_latency_bound') === null ? '–' : get(r, 'samples.over_latency_bound'))],
      ['duration, s', cell(i, 'loadgen', L + 'duration_s')]];
    PCT.forEach(function (p) { rows.push(['latency ' + p + ', ms', cell(i, 'loadgen', L + 'latency_ms.' + p)]); });
    figure(son, 'LoadGen ' + (r.scenario || '') + ' latency' + (multi ? ': ' + runName(i) : ''), {
      type: 'bar', labels: PCT, x: 'percentile of queries', y: 'latency per query, ms',
      datasets: [ds(r.scenario || 'latency', PCT.map(function (p) { return lat[p]; }), i)]
    }, table(['LoadGen', 'value'], rows));
  });

  // ---- predicted vs measured, the catalog side by side ----
  var sc = section('This machine beside the catalog\'s systems', 'The catalog\'s systems predicted by the performance model for the same training workload; ' +
    'this machine measured. Epochs are ImageNet-1k epochs (1,281,167 images).');
  var withVal = runs.map(function (r, i) { return i; }).filter(function (i) { return runs[i].validate && (runs[i].validate.rows || []).length; });
  if (!withVal.length) figure(sc, 'Predicted vs measured on this machine', null, null, 'these runs hold no prediction of the measured machine itself ' +
    '(`dlperf validate --json RUN_DIR/validate.json` runs training configurations and predicts each from the machine\'s profile)');
  withVal.forEach(function (i) {
    var rows = runs[i].validate.rows, labs = rows.map(function (r) { return r.config; });
    figure(sc, 'Predicted vs measured on this machine' + (multi ? ': ' + runName(i) : '') + ' (dlperf validate; MAPE ' +
      fmt(100 * (runs[i].validate.mape || NaN)) + '%)', {
      type: 'bar', labels: labs, x: 'training configuration', y: 'images per second', legend: true,
      datasets: [ds('predicted', rows.map(function (r) { return r.predicted_img_per_s; }), 0),
        ds('measured', rows.map(function (r) { return r.measured_img_per_s; }), 1)]
    }, table(['configuration', 'predicted img/s', 'measured img/s', 'error, %', 'predicted bottleneck', 'observed regime'], rows.map(function (r, k) {
      var p = 'rows.' + k + '.';
      return [r.config, cell(i, 'validate', p + 'predicted_img_per_s'), cell(i, 'validate', p + 'measured_img_per_s'),
        cell(i, 'validate', p + 'ape', 100), r.predicted_bottleneck || '–', r.observed_regime || (r.ok ? '–' : 'failed: ' + (r.error || '?'))];
    })));
  });
  var bars = [];
  runs.forEach(function (r, i) {
    var s = get(r.run, 'summary') || {};
    if (isNum(s.train_img_per_s)) bars.push({ name: r.name + ' (measured)', ri: i, file: 'run', rate: 'summary.train_img_per_s',
      usd: 'summary.usd_per_million_train_images', usdi: 'summary.usd_per_million_inferences', bn: s.bottleneck, measured: true });
  });
  var seen = {};
  runs.forEach(function (r, i) {
    ((r.predict && r.predict.predictions) || []).forEach(function (p, k) {
      var id = get(p, 'machine.id') || '?';
      if (seen[id]) return;
      seen[id] = 1;
      bars.push({ name: id + ' (predicted)', ri: i, file: 'predict', rate: 'predictions.' + k + '.prediction.img_per_s',
        usd: 'predictions.' + k + '.cost.usd_per_million_images', usdi: null, bn: get(p, 'prediction.bottleneck') });
    });
  });
  if (bars.length < 2 && !runs.some(function (r) { return r.predict; })) {
    figure(sc, 'Training throughput: this machine and the catalog', null, null, 'no catalog prediction (' + gapWhy('catalog systems') + ')');
  }
  if (bars.length) {
    var rate = function (b) { return get(runs[b.ri][b.file], b.rate); };
    var E = 1281167;
    figure(sc, 'Training throughput', {
      type: 'bar', labels: bars.map(function (b) { return b.name; }), x: 'system', y: 'images per second (log scale)', logY: true,
      datasets: [ds('img/s', bars.map(rate), 0, { backgroundColor: bars.map(function (b) { return b.measured ? '#d62728cc' : '#1f77b4cc'; }) })]
    }, null);
    figure(sc, 'Time to train', {
      type: 'bar', labels: bars.map(function (b) { return b.name; }), x: 'system', y: 'hours (log scale)', logY: true, legend: true,
      datasets: [ds('one epoch', bars.map(function (b) { var v = rate(b); return isNum(v) && v > 0 ? E / v / 3600 : null; }), 0),
        ds('90 epochs', bars.map(function (b) { var v = rate(b); return isNum(v) && v > 0 ? 90 * E / v / 3600 : null; }), 1)]
    }, null);
    var usdOf = function (b) { return b.usd ? get(runs[b.ri][b.file], b.usd) : null; };
    var costBars = bars.filter(function (b) { return isNum(usdOf(b)); });
    if (costBars.length) figure(sc, 'Cost per million training images', {
      type: 'bar', labels: costBars.map(function (b) { return b.name; }), x: 'system', y: '$ per million images (log scale)', logY: true,
      datasets: [ds('$/1M training images', costBars.map(usdOf), 2, { backgroundColor: costBars.map(function (b) { return b.measured ? '#d62728cc' : '#2ca02ccc'; }) })]
    }, null);
    else figure(sc, 'Cost per million training images', null, null, 'no prices (give dlperf run --usd-per-hour; the catalog predictions carry their own)');
    sc.appendChild(table(['system', 'img/s', 'epoch, h', '90 epochs, h', '$ / 1M training images', '$ / 1M inferences', 'bottleneck'], bars.map(function (b) {
      var v = rate(b);
      return [b.name, cell(b.ri, b.file, b.rate), numCell(isNum(v) && v > 0 ? E / v / 3600 : null), numCell(isNum(v) && v > 0 ? 90 * E / v / 3600 : null),
        b.usd ? cell(b.ri, b.file, b.usd) : '–', b.usdi ? cell(b.ri, b.file, b.usdi) : 'not predicted (training only)', b.bn || '–'];
    })));
  }

  }

  // ---- self-check: errors, every canvas drawn ----
  function selfcheck() {
    var empty = [], canvases = document.querySelectorAll('canvas');
    Array.prototype.forEach.call(canvases, function (cv) {
      var ok = false;
      try {
        var w = cv.width, h = cv.height, px = cv.getContext('2d').getImageData(0, 0, w, h).data;
        for (var k = 3; k < px.length; k += 4 * 7) if (px[k] !== 0) { ok = true; break; }
      } catch (e) { errors.push('selfcheck: ' + e); }
      if (!ok || cv.width === 0) empty.push(cv.getAttribute('data-title'));
    });
    var out = { errors: errors, charts: canvases.length, charts_expected: nCharts, empty: empty, gaps: nGaps,
      cells: document.querySelectorAll('td[data-k]').length, chartjs: haveCharts };
    var pre = document.getElementById('selfcheck');
    pre.textContent = JSON.stringify(out);
  }

  try { draw(); } catch (e) { errors.push('report: ' + e); }
  try { selfcheck(); } catch (e) { document.getElementById('selfcheck').textContent = JSON.stringify({ errors: errors.concat(['selfcheck: ' + e]) }); }
})();
