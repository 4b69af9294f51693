// The page: a run table (one colour per run, the legend of every chart) and one chart per
// signal, each run's records overlaid. The script fetches /api/runs every few seconds and,
// for each run, only the records it has not seen (/api/metrics?since=N). Every chart's canvas
// carries data-points (points plotted) and data-series; #page-errors collects script errors
// and console.error calls, so a headless browser can read the page's state from its DOM.
#include "dashboard/page.h"

namespace zaya::dashboard {

std::string_view page_html() {
  return R"zaya(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>zaya dashboard</title>
<link rel="icon" href="data:,">
<script>
// Installed first, so errors of Chart.js and of the page's own script are caught too.
window.zayaErrors = [];
function zayaShowErrors() {
  const el = document.getElementById('page-errors');
  if (!el) return;
  el.textContent = window.zayaErrors.join('\n');
  el.dataset.count = String(window.zayaErrors.length);
  el.hidden = window.zayaErrors.length === 0;
}
function zayaError(msg) { window.zayaErrors.push(String(msg)); zayaShowErrors(); }
window.addEventListener('error', e => {
  const src = e.target && e.target.src;
  zayaError(e.message ? 'error: ' + e.message : 'cannot load ' + (src || 'a resource'));
}, true);
window.addEventListener('unhandledrejection', e => zayaError('unhandled rejection: ' + ((e.reason && e.reason.stack) || e.reason)));
const zayaConsoleError = console.error.bind(console);
console.error = (...a) => { zayaError(a.map(String).join(' ')); zayaConsoleError(...a); };
document.addEventListener('DOMContentLoaded', zayaShowErrors);
</script>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f4f5f8; color: #1d2330; }
header { display: flex; align-items: baseline; gap: 18px; padding: 10px 18px; background: #1d2330; color: #fff; }
header h1 { font-size: 17px; margin: 0; }
#status { font-size: 12px; color: #c5cbd8; }
#status.down { color: #ffb4a8; }
#page-errors { margin: 10px 18px 0; padding: 8px 10px; background: #fde8e6; border: 1px solid #e0a39b;
  color: #8a1c10; white-space: pre-wrap; font-size: 12px; }
#runs { padding: 10px 18px 0; }
#runs table { border-collapse: collapse; background: #fff; border: 1px solid #dde1e8; font-size: 13px; }
#runs th, #runs td { padding: 4px 10px; text-align: left; border-bottom: 1px solid #eceef2; white-space: nowrap; }
#runs th { font-weight: 600; color: #5a6275; font-size: 12px; }
#runs td.num { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 22px; height: 4px; border-radius: 2px; vertical-align: middle; }
.state-missing { color: #b3261e; font-weight: 600; }
.state-no_log, .state-empty { color: #8a6d00; }
.bad { color: #b3261e; }
#charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; padding: 12px 18px 18px; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 8px 10px 6px; }
.card h2 { font-size: 13px; font-weight: 600; margin: 0 0 2px; }
.card .note { font-size: 11px; color: #6b7385; margin: 0 0 4px; min-height: 14px; }
.chart-box { position: relative; height: 250px; }
</style>
</head>
<body>
<header><h1>zaya dashboard</h1><span id="status">loading&hellip;</span></header>
<pre id="page-errors" data-count="0" hidden></pre>
<section id="runs">
<table>
<thead><tr><th></th><th>run</th><th>state</th><th>records</th><th>step</th><th>loss</th><th>val loss</th>
<th>tokens/s</th><th>malformed lines</th></tr></thead>
<tbody id="run-rows"></tbody>
</table>
</section>
<main id="charts" data-refreshes="0"></main>
<script src="/javascript/chart.js/chart.min.js"></script>
<script src="/dashboard.js"></script>
</body>
</html>
)zaya";
}

std::string_view page_js() {
  return R"zaya('use strict';
(function () {
const PALETTE = ['#1f6fd1', '#d62f2f', '#2a9d3a', '#e07b00', '#8a4fc7', '#0f9ba8', '#c2409a', '#6b6b6b'];
const DASHES = [[], [7, 3], [2, 2], [9, 3, 2, 3], [1, 3], [12, 4]];
// What each chart plots: `from` picks the records, `y` the value; `per` splits a run into
// several lines (per layer, per task), each with its own dash pattern.
const CHARTS = [
  {id: 'loss', title: 'training loss', from: 'step', y: r => r.loss},
  {id: 'val_loss', title: 'validation loss', from: 'eval', y: r => r.val_loss},
  {id: 'lr', title: 'learning rate', from: 'step', y: r => r.lr},
  {id: 'grad_norm', title: 'gradient norm', from: 'step', y: r => r.grad_norm},
  {id: 'tokens_per_s', title: 'throughput (tokens/s)', from: 'step', y: r => r.tokens_per_s},
  {id: 'entropy', title: 'expert load: normalised entropy, per MoE layer', from: 'step', per: 'layer',
   y: l => l.entropy, min: 0, max: 1, note: '1: tokens spread evenly over the experts; 0: all on one'},
  {id: 'skip', title: 'skip share, per MoE layer', from: 'step', per: 'layer', y: l => l.skip, min: 0, max: 1,
   note: 'share of tokens that take the skip class (no expert)'},
  {id: 'tasks', title: 'eval task scores', from: 'eval_tasks', per: 'task', min: 0, max: 1,
   note: 'acc_norm where the task has it, else acc or exact_match'},
];
const runs = [];        // by run id: {id, name, info, gen, next, records}
const charts = {};      // by chart id: {spec, chart, canvas, note}
let refreshMs = 3000;

const num = v => (typeof v === 'number' && isFinite(v) ? v : null);
const fmt = v => (v === null || v === undefined ? '' : Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4));
const colorOf = run => PALETTE[run.id % PALETTE.length];

async function getJson(url) {
  const res = await fetch(url, {cache: 'no-store'});
  if (!res.ok) throw new Error(url + ': HTTP ' + res.status);
  return res.json();
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function taskMetric(t) {
  for (const m of ['acc_norm', 'acc', 'exact_match']) if (num(t[m]) !== null) return m;
  return Object.keys(t).find(k => k !== 'n' && !k.endsWith('_stderr') && num(t[k]) !== null);
}

// The lines one run contributes to one chart.
function seriesOf(spec, run) {
  const recs = run.records.filter(r => r.type === spec.from && num(r.step) !== null);
  if (!spec.per) {
    const pts = [];
    for (const r of recs) { const y = num(spec.y(r)); if (y !== null) pts.push({x: r.step, y}); }
    return pts.length ? [{label: run.name, data: pts, dash: []}] : [];
  }
  const out = [];
  if (spec.per === 'layer') {
    let layers = 0;
    for (const r of recs) if (Array.isArray(r.layers)) layers = Math.max(layers, r.layers.length);
    for (let l = 0; l < layers; ++l) {
      const pts = [];
      for (const r of recs) {
        const y = Array.isArray(r.layers) && r.layers[l] ? num(spec.y(r.layers[l])) : null;
        if (y !== null) pts.push({x: r.step, y});
      }
      if (pts.length) out.push({label: run.name + ' L' + l, data: pts, dash: DASHES[l % DASHES.length]});
    }
  } else {
    const names = [];
    for (const r of recs) for (const k of Object.keys(r.tasks || {})) if (!names.includes(k)) names.push(k);
    names.forEach((task, i) => {
      const pts = [];
      let metric;
      for (const r of recs) {
        const t = r.tasks && r.tasks[task];
        if (!t || typeof t !== 'object') continue;
        const m = taskMetric(t);
        if (m === undefined) continue;
        metric = metric || m;
        pts.push({x: r.step, y: t[m]});
      }
      if (pts.length) out.push({label: run.name + ' ' + task + ' ' + metric, data: pts, dash: DASHES[i % DASHES.length]});
    });
  }
  return out;
}

function makeChart(spec) {
  const card = el('section', {class: 'card', id: 'card-' + spec.id});
  card.appendChild(el('h2', {}, spec.title));
  const note = el('p', {class: 'note'}, spec.note || '');
  card.appendChild(note);
  const box = el('div', {class: 'chart-box'});
  const canvas = el('canvas', {id: 'chart-' + spec.id, 'data-points': '0', 'data-series': '0'});
  box.appendChild(canvas);
  card.appendChild(box);
  document.getElementById('charts').appendChild(card);
  const y = {title: {display: false}};
  if (spec.min !== undefined) y.suggestedMin = spec.min;
  if (spec.max !== undefined) y.suggestedMax = spec.max;
  const chart = new Chart(canvas, {
    type: 'line',
    data: {datasets: []},
    options: {
      animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
      interaction: {mode: 'nearest', intersect: false},
      scales: {x: {type: 'linear', title: {display: true, text: 'step'}}, y},
      plugins: {legend: {display: !!spec.per, position: 'bottom', labels: {boxWidth: 22, boxHeight: 2, font: {size: 11}}}},
      elements: {line: {borderWidth: 1.6, tension: 0}},
    },
  });
  charts[spec.id] = {spec, chart, canvas, note};
}

function drawChart(c) {
  const hidden = {};
  c.chart.data.datasets.forEach((d, i) => { hidden[d.label] = !c.chart.isDatasetVisible(i); });
  const datasets = [];
  for (const run of runs) {
    if (!run) continue;
    for (const s of seriesOf(c.spec, run)) {
      datasets.push({label: s.label, data: s.data, borderColor: colorOf(run), backgroundColor: colorOf(run),
                     borderDash: s.dash, pointRadius: s.data.length <= 30 ? 2.5 : 0, hidden: !!hidden[s.label]});
    }
  }
  c.chart.data.datasets = datasets;
  c.chart.update('none');
  const points = datasets.reduce((n, d) => n + d.data.length, 0);
  c.canvas.dataset.points = String(points);
  c.canvas.dataset.series = String(datasets.length);
  if (!points) c.note.textContent = 'no records of this kind yet';
  else c.note.textContent = c.spec.note || '';
}

function lastOf(run, type, key) {
  for (let i = run.records.length - 1; i >= 0; --i) {
    const r = run.records[i];
    if (r.type === type && num(r[key]) !== null) return r[key];
  }
  return null;
}

function drawRuns() {
  const body = document.getElementById('run-rows');
  body.textContent = '';
  for (const run of runs) {
    if (!run) continue;
    const s = run.info;
    const tr = el('tr', {'data-run': run.name, 'data-state': s.state, 'data-records': String(run.records.length),
                         'data-malformed': String(s.malformed)});
    const sw = el('td');
    const swatch = el('span', {class: 'swatch'});
    swatch.style.background = colorOf(run);
    sw.appendChild(swatch);
    tr.appendChild(sw);
    tr.appendChild(el('td', {title: s.path}, run.name));
    tr.appendChild(el('td', {class: 'state-' + s.state}, s.state === 'missing' ? 'error: ' + s.message : s.message));
    tr.appendChild(el('td', {class: 'num'}, String(run.records.length)));
    tr.appendChild(el('td', {class: 'num'}, s.last_step >= 0 ? String(s.last_step) : ''));
    tr.appendChild(el('td', {class: 'num'}, fmt(lastOf(run, 'step', 'loss'))));
    tr.appendChild(el('td', {class: 'num'}, fmt(lastOf(run, 'eval', 'val_loss'))));
    tr.appendChild(el('td', {class: 'num'}, fmt(lastOf(run, 'step', 'tokens_per_s'))));
    const bad = s.malformed > 0 ? s.malformed + ' skipped (' + s.malformed_last + ')' : '0';
    tr.appendChild(el('td', {class: s.malformed > 0 ? 'bad' : ''}, bad));
    body.appendChild(tr);
  }
}

async function refresh() {
  const list = await getJson('/api/runs');
  refreshMs = list.refresh_ms;
  for (const info of list.runs) {
    const run = runs[info.id] || (runs[info.id] = {id: info.id, gen: 0, next: 0, records: []});
    run.name = info.name;
    run.info = info;
    // Only what is new: records from run.next on, in pages, until the server has no more.
    for (let page = 0; page < 10000 && (info.generation !== run.gen || info.records !== run.next); ++page) {
      const m = await getJson('/api/metrics?run=' + info.id + '&since=' + run.next + '&gen=' + run.gen);
      if (m.reset) run.records = [];
      for (const r of m.records) run.records.push(r);
      run.gen = m.generation;
      run.next = m.next;
      run.info = Object.assign(m.summary, {id: info.id, name: info.name});
      if (m.next >= m.total) break;
    }
  }
  drawRuns();
  for (const c of Object.values(charts)) drawChart(c);
  const main = document.getElementById('charts');
  main.dataset.refreshes = String(Number(main.dataset.refreshes) + 1);
  main.dataset.runs = String(list.runs.length);
}

async function loop() {
  const status = document.getElementById('status');
  try {
    await refresh();
    status.className = '';
    status.textContent = 'updated ' + new Date().toLocaleTimeString() + ', every ' + refreshMs / 1000 + ' s';
  } catch (e) {
    // The server stopped (the run is over) or is restarting: say so, keep trying.
    status.className = 'down';
    status.textContent = 'cannot reach the dashboard server (' + e.message + '); retrying';
  }
  setTimeout(loop, refreshMs);
}

if (typeof Chart === 'undefined') {
  zayaError('Chart.js did not load from /javascript/chart.js/chart.min.js: the charts cannot be drawn');
} else {
  for (const spec of CHARTS) makeChart(spec);
}
loop();
})();
)zaya";
}

}  // namespace zaya::dashboard
