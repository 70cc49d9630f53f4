/* vmtax serve: the history's ratio drawn again with uPlot (vendored beside
   this file), for zoom (drag across it; double-click to reset) and a legend
   that names the run under the cursor.  The SVG above it is the page's
   chart: without JavaScript, or if this fails, nothing else is missing. */
document.addEventListener('DOMContentLoaded', function () {
  var box = document.getElementById('zoom');
  if (!box || typeof uPlot === 'undefined') return;
  fetch(box.dataset.json, {credentials: 'same-origin'}).then(function (r) { return r.json(); }).then(function (m) {
    var s = m.series, pts = s.points, runs = pts.map(function (p) { return p.run; });
    var xs = pts.map(function (_, i) { return i; });
    var col = function (k) { return pts.map(function (p) { return p[k]; }); };
    var opts = {
      title: s.benchmark + ': ' + s.candidate + ' / ' + s.baseline + ' (drag to zoom)',
      width: Math.min(880, box.parentNode.clientWidth || 880), height: 240,
      scales: {x: {time: false}},
      series: [
        {label: 'run', value: function (u, i) { return i == null ? '' : runs[Math.round(i)] || ''; }},
        {label: 'ratio', stroke: '#1f77b4', width: 1.5},
        {label: 'CI low', stroke: '#9ecae1'},
        {label: 'CI high', stroke: '#9ecae1'}
      ],
      bands: [{series: [3, 2], fill: 'rgba(31,119,180,0.15)'}],
      axes: [{values: function (u, ticks) { return ticks.map(function (t) { return runs[t] ? String(t) : ''; }); }}, {}]
    };
    box.hidden = false;
    box.dataset.ready = '1';
    new uPlot(opts, [xs, col('ratio'), col('ci_low'), col('ci_high')], box);
  }).catch(function () { box.hidden = true; });
});
