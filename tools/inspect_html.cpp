#include "tools/inspect_html.h"

#include <nlohmann/json.hpp>

namespace gradc::tools {

namespace {

// The plan as compact JSON for the page's script. '<', '>' and '&' only occur inside JSON
// strings, where \u escapes mean the same, so nothing in a name can end the <script> element.
std::string embeddedPlan(const passes::MemoryPlan& plan) {
  using Json = nlohmann::json;
  Json j;
  j["model"] = plan.model;
  j["strategy"] = plan.strategy;
  j["lossChunks"] = plan.lossChunks;
  j["budget"] = plan.budgetBytes ? Json(*plan.budgetBytes) : Json(nullptr);
  j["peak"] = plan.peakBytes;
  j["peakStep"] = plan.peakStep;
  j["arena"] = plan.arenaBytes;
  j["persistent"] = plan.persistentBytes;
  j["fragmentation"] = plan.fragmentation();
  j["timeline"] = plan.timeline;
  Json steps = Json::array();
  for (const passes::PlannedStep& s : plan.steps) steps.push_back({s.op, s.phase, s.specName});
  j["steps"] = std::move(steps);
  Json buffers = Json::array();
  for (const passes::PlannedBuffer& b : plan.buffers)
    buffers.push_back({b.name, b.specName, ir::bufferKindName(b.kind), b.type, b.size, b.offset, b.firstStep, b.lastStep, b.producer});
  j["buffers"] = std::move(buffers);
  std::string text = j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

constexpr const char* kPageStart = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gradc memory plan</title>
<style>
  body { font: 13px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 20px 28px; color: #1d232a; }
  h1 { font-size: 18px; margin: 0 0 4px; }
  .facts { color: #4a5561; margin-bottom: 12px; }
  .facts b { color: #1d232a; }
  #plot { position: relative; width: 1120px; height: 470px; border: 1px solid #d5dbe1; background: #fff; }
  #plot canvas, #plot svg { position: absolute; left: 0; top: 0; width: 1120px; height: 470px; }
  #chart .buf:hover, #chart .buf.sel { stroke: #000; stroke-width: 1; }
  .layout { margin: 6px 0; color: #4a5561; }
  #tip { position: fixed; pointer-events: none; background: rgba(255,255,255,0.97); border: 1px solid #8a96a3;
         border-radius: 4px; padding: 6px 8px; font: 12px/1.4 ui-monospace, monospace; display: none;
         box-shadow: 0 2px 6px rgba(0,0,0,0.15); max-width: 520px; white-space: pre; }
  .legend span { display: inline-block; margin-right: 14px; }
  .legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
  table { border-collapse: collapse; margin-top: 10px; font: 12px ui-monospace, monospace; }
  th, td { padding: 2px 10px 2px 0; text-align: left; }
  td.num, th.num { text-align: right; }
  th { border-bottom: 1px solid #c5ccd3; }
  .axis { font: 11px system-ui, sans-serif; fill: #4a5561; }
</style>
</head>
<body>
<h1 id="title">memory plan</h1>
<div class="facts" id="facts"></div>
<div class="legend" id="legend"></div>
<div class="layout">bands:
  <label><input type="radio" name="layout" value="stacked" checked> stacked: the buffers alive at each step, in
    allocation order</label>
  <label><input type="radio" name="layout" value="arena"> at their arena offsets (the plan's placement)</label>
</div>
<div id="plot">
  <canvas id="stack" width="1120" height="470"></canvas>
  <svg id="chart" width="1120" height="470" role="img" aria-label="memory timeline"></svg>
</div>
<div id="tip"></div>
<h2 style="font-size:15px;margin:16px 0 0">Buffers alive at the peak, largest first</h2>
<table id="top"></table>
<script>
const plan = )HTML";

constexpr const char* kPageEnd = R"HTML(;
(function () {
  const KINDS = {param: '#4c72b0', opt_state: '#8172b3', input: '#937860', activation: '#55a868', grad: '#dd8452',
                 optimizer: '#64b5cd', recompute: '#c44e52', workspace: '#da8bc3', comm: '#8c8c8c'};
  const color = k => KINDS[k] || '#999999';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  function fmt(b) {
    let u = 0, v = b;
    while (u + 1 < units.length && v >= 1000) { v /= 1000; ++u; }
    return u === 0 ? v + ' B' : v.toFixed(2) + ' ' + units[u];
  }
  const $ = id => document.getElementById(id);
  const B = plan.buffers.map(b => ({name: b[0], spec: b[1], kind: b[2], type: b[3], size: b[4], offset: b[5],
                                    first: b[6], last: b[7], producer: b[8]}));
  const steps = plan.timeline.length;
  $('title').textContent = 'memory plan of ' + plan.model;
  const peakStep = plan.steps[plan.peakStep];
  $('facts').innerHTML = '';
  const facts = [
    ['peak', fmt(plan.peak) + (peakStep ? ' at step ' + plan.peakStep + ' (' + peakStep[0] + ', ' + peakStep[1] +
      (peakStep[2] ? ', ' + peakStep[2] : '') + ')' : '')],
    ['arena', fmt(plan.arena) + ' (fragmentation ' + plan.fragmentation.toFixed(3) + ')'],
    ['persistent', fmt(plan.persistent)],
    ['budget', plan.budget === null ? 'none' : fmt(plan.budget)],
    ['strategy', plan.strategy],
    ['loss', plan.lossChunks > 0 ? 'fused LM head + cross_entropy, ' + plan.lossChunks + ' chunk' +
      (plan.lossChunks === 1 ? '' : 's') : 'not fused'],
    ['steps', String(steps)], ['buffers', String(B.length)]];
  facts.forEach(([k, v], i) => {
    const b = document.createElement('b');
    b.textContent = k + ' ';
    $('facts').appendChild(b);
    $('facts').appendChild(document.createTextNode(v + (i + 1 < facts.length ? ' \u00b7 ' : '')));
  });

  // Bytes by kind alive at the peak, for the legend.
  const live = B.map((b, i) => i).filter(i => B[i].first <= plan.peakStep && plan.peakStep <= B[i].last && B[i].size > 0)
                .sort((a, b) => B[b].size - B[a].size || a - b);
  const byKind = {};
  live.forEach(i => { byKind[B[i].kind] = (byKind[B[i].kind] || 0) + B[i].size; });
  Object.keys(byKind).sort((a, b) => byKind[b] - byKind[a]).forEach(k => {
    const s = document.createElement('span');
    const sw = document.createElement('i');
    sw.style.background = color(k);
    s.appendChild(sw);
    s.appendChild(document.createTextNode(k + ' ' + fmt(byKind[k]) + ' at the peak'));
    $('legend').appendChild(s);
  });

  // Geometry: x = steps, y = bytes (0 at the bottom).
  const svg = $('chart');
  const W = +svg.getAttribute('width'), H = +svg.getAttribute('height');
  const L = 78, R = 16, T = 14, Bm = 58;
  const top = Math.max(plan.arena, plan.peak, plan.budget || 0, 1) * 1.04;
  const xs = s => L + (W - L - R) * (steps ? s / steps : 0);
  const ys = v => H - Bm - (H - T - Bm) * v / top;
  const f2 = v => v.toFixed(2);

  // Stacked layout, drawn on a canvas under the SVG: one column per pixel (or per step when
  // there are fewer steps than pixels); a column shows the step of its range with the most live
  // bytes, its live buffers stacked in allocation order (persistent ones first), so the top edge
  // follows the live-bytes line. Cost: columns x buffers, whatever the plan's shape.
  const order = B.map((b, i) => i).filter(i => B[i].size > 0).sort((a, b) => B[a].first - B[b].first || a - b);
  function liveAt(s) {
    const out = [];
    for (const i of order) {
      if (B[i].first > s) break;
      if (B[i].last >= s) out.push(i);
    }
    return out;
  }
  const cols = Math.max(1, Math.min(Math.floor(W - L - R), steps));
  const colStart = c => Math.floor(steps * c / cols);
  const rep = [];
  for (let c = 0; c < cols; ++c) {
    let best = colStart(c);
    for (let s = colStart(c); s < colStart(c + 1); ++s) if (plan.timeline[s] > plan.timeline[best]) best = s;
    rep.push(best);
  }
  const canvas = $('stack');
  function drawStacked() {
    const dpr = window.devicePixelRatio || 1;
    canvas.width = W * dpr;
    canvas.height = H * dpr;
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.clearRect(0, 0, W, H);
    for (let c = 0; c < cols && steps > 0; ++c) {
      const x0 = xs(colStart(c)), x1 = xs(colStart(c + 1));
      let bottom = 0;
      liveAt(rep[c]).forEach((i, k) => {
        const b = B[i];
        ctx.globalAlpha = k % 2 ? 0.7 : 0.85;  // neighbours of one kind stay distinguishable
        ctx.fillStyle = color(b.kind);
        const y0 = ys(bottom + b.size), y1 = ys(bottom);
        ctx.fillRect(x0, y0, Math.max(x1 - x0, 0.5) + 0.3, Math.max(y1 - y0, 0.3));
        bottom += b.size;
      });
    }
  }
  // The buffer under a point of the stacked layout, or null.
  function stackedHit(px, py) {
    const c = Math.floor((px - L) / (W - L - R) * cols);
    if (c < 0 || c >= cols) return null;
    const v = (H - Bm - py) / (H - T - Bm) * top;
    let bottom = 0;
    for (const i of liveAt(rep[c])) {
      if (v >= bottom && v < bottom + B[i].size) return {i: i, step: rep[c]};
      bottom += B[i].size;
    }
    return null;
  }

  function bands(layout) {
    if (layout !== 'arena') return [];
    const parts = [];
    B.forEach((b, i) => {
      if (b.size <= 0) return;
      const x = xs(b.first), w = Math.max(xs(b.last + 1) - x, 0.6);
      const y = ys(b.offset + b.size), h = Math.max(ys(b.offset) - y, 0.4);
      parts.push('<rect class="buf" data-i="' + i + '" x="' + f2(x) + '" y="' + f2(y) + '" width="' + f2(w) +
                 '" height="' + f2(h) + '" fill="' + color(b.kind) + '" fill-opacity="0.78"/>');
    });
    return parts;
  }

  function draw(layout) {
    const parts = bands(layout);
    // Live bytes (the plan's timeline) as a step line over the bands: per column, the most live
    // bytes among its steps (every step when there are fewer steps than pixels).
    let line = '';
    for (let c = 0; c < cols && steps > 0; ++c) {
      const y = f2(ys(plan.timeline[rep[c]]));
      line += f2(xs(colStart(c))) + ',' + y + ' ' + f2(xs(colStart(c + 1))) + ',' + y + ' ';
    }
    parts.push('<polyline points="' + line + '" fill="none" stroke="#1d232a" stroke-width="1.2"/>');
    // Axes, ticks, peak and budget.
    parts.push('<line x1="' + L + '" y1="' + ys(0) + '" x2="' + (W - R) + '" y2="' + ys(0) + '" stroke="#1d232a"/>');
    parts.push('<line x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + ys(0) + '" stroke="#1d232a"/>');
    for (let k = 0; k <= 5; ++k) {
      const v = top / 1.04 * k / 5;
      parts.push('<line x1="' + (L - 4) + '" y1="' + ys(v) + '" x2="' + L + '" y2="' + ys(v) + '" stroke="#1d232a"/>');
      parts.push('<text class="axis" x="' + (L - 7) + '" y="' + (ys(v) + 4) + '" text-anchor="end">' +
                 fmt(Math.round(v)) + '</text>');
    }
    const px = xs(plan.peakStep + 0.5);
    parts.push('<line x1="' + px + '" y1="' + T + '" x2="' + px + '" y2="' + ys(0) +
               '" stroke="#c44e52" stroke-dasharray="4 3"/>');
    parts.push('<text class="axis" x="' + (px + 4) + '" y="' + (T + 10) + '" fill="#c44e52">peak ' + fmt(plan.peak) +
               '</text>');
    if (plan.budget !== null)
      parts.push('<line x1="' + L + '" y1="' + ys(plan.budget) + '" x2="' + (W - R) + '" y2="' + ys(plan.budget) +
                 '" stroke="#c44e52" stroke-width="1.5"/><text class="axis" x="' + (W - R - 4) + '" y="' +
                 (ys(plan.budget) - 4) + '" text-anchor="end" fill="#c44e52">budget ' + fmt(plan.budget) + '</text>');
    // Phase strip under the axis: runs of forward, backward, optimizer, recompute steps.
    const PH = {fwd: '#55a868', bwd: '#dd8452', opt: '#64b5cd', recompute: '#c44e52', comm: '#8c8c8c'};
    let runStart = 0;
    for (let s = 1; s <= steps; ++s) {
      if (s < steps && plan.steps[s][1] === plan.steps[runStart][1]) continue;
      const ph = plan.steps[runStart][1];
      parts.push('<rect class="phase" data-phase="' + ph + '" x="' + xs(runStart) + '" y="' + (ys(0) + 6) +
                 '" width="' + Math.max(xs(s) - xs(runStart), 0.6) + '" height="8" fill="' + (PH[ph] || '#999') + '"/>');
      runStart = s;
    }
    parts.push('<text class="axis" x="' + L + '" y="' + (ys(0) + 28) + '">step 0</text>');
    parts.push('<text class="axis" x="' + (W - R) + '" y="' + (ys(0) + 28) + '" text-anchor="end">step ' +
               Math.max(steps - 1, 0) + '</text>');
    parts.push('<text class="axis" x="' + ((L + W - R) / 2) + '" y="' + (ys(0) + 44) + '" text-anchor="middle">' +
               'schedule steps (strip: green forward, orange backward, blue optimizer, red recompute); bands: ' +
               (layout === 'arena' ? 'buffers at their arena offsets' : 'live buffers stacked in allocation order') +
               '; line: live bytes</text>');
    svg.innerHTML = parts.join('');
    svg.setAttribute('data-layout', layout);
    if (layout === 'arena') {
      canvas.style.display = 'none';
    } else {
      canvas.style.display = 'block';
      drawStacked();
      svg.setAttribute('data-columns', String(steps ? cols : 0));
    }
    current = layout;
  }
  let current = 'stacked';
  const layouts = document.getElementsByName('layout');
  layouts.forEach(r => r.addEventListener('change', () => draw(r.value)));
  // The page opens in the layout its URL names (#arena), else stacked.
  const initial = location.hash === '#arena' ? 'arena' : 'stacked';
  layouts.forEach(r => { r.checked = r.value === initial; });
  draw(initial);

  // Hover: name the buffer under the pointer, or the step under it.
  const tip = $('tip');
  let selected = null;
  svg.addEventListener('mousemove', e => {
    const t = e.target;
    if (selected && selected !== t) { selected.classList.remove('sel'); selected = null; }
    const r = svg.getBoundingClientRect();
    const hit = current === 'stacked' ? stackedHit(e.clientX - r.left, e.clientY - r.top) : null;
    if (hit || (t.classList && t.classList.contains('buf'))) {
      const b = B[hit ? hit.i : +t.getAttribute('data-i')];
      if (!hit) {
        selected = t;
        t.classList.add('sel');
      }
      tip.textContent = (hit ? 'at step ' + hit.step + ':\n' : '') + b.name + '  (' + b.kind + ')' +
        '\nspec name  ' + (b.spec || '-') + '\ntype       ' + (b.type || '-') +
        '\nsize       ' + fmt(b.size) + ' (' + b.size.toLocaleString('en-US') + ' bytes)' +
        '\nsteps      ' + b.first + '..' + b.last + '\nproducer   ' + (b.producer || '-') +
        '\noffset     ' + b.offset.toLocaleString('en-US');
    } else {
      const s = Math.floor((e.clientX - r.left - L) / (W - L - R) * steps);
      if (s < 0 || s >= steps) { tip.style.display = 'none'; return; }
      const st = plan.steps[s];
      tip.textContent = 'step ' + s + ': ' + st[0] + ' (' + st[1] + (st[2] ? ', ' + st[2] : '') + ')\nlive ' +
        fmt(plan.timeline[s]);
    }
    tip.style.display = 'block';
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + 'px';
    tip.style.top = (e.clientY + 14) + 'px';
  });
  svg.addEventListener('mouseleave', () => { tip.style.display = 'none'; });

  // Table of the buffers alive at the peak.
  const table = $('top');
  const head = table.insertRow();
  ['size', 'kind', 'name', 'spec name', 'type', 'steps', 'producer'].forEach((h, k) => {
    const th = document.createElement('th');
    th.textContent = h;
    if (k === 0) th.className = 'num';
    head.appendChild(th);
  });
  live.slice(0, 40).forEach(i => {
    const b = B[i], row = table.insertRow();
    [fmt(b.size), b.kind, b.name, b.spec || '-', b.type || '-', b.first + '..' + b.last, b.producer || '-'].forEach((v, k) => {
      const td = row.insertCell();
      td.textContent = v;
      if (k === 0) td.className = 'num';
    });
  });
})();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string planToHtml(const passes::MemoryPlan& plan) { return kPageStart + embeddedPlan(plan) + kPageEnd; }

}  // namespace gradc::tools
