// lines.js: the dashboard's chart drawing, SVG line charts over a sliding
// time window. Written for Shoal's dashboard; no dependencies.
//
//   Lines.draw(element, {
//     series: [{name: "writes", points: [[unixMillis, value], ...]}, ...],
//     windowMs: 300000,          // the x axis: the last windowMs before `now`
//     now: Date.now(),
//     format: v => v.toFixed(0), // y tick labels
//     binary: false,             // true: y steps of 1-2-5 times a power of 1024 (bytes)
//   });
//
// A series whose points are all null (or none at all) is not drawn; when no
// series has a point, the chart says "no data". The y axis starts at 0 and
// ends at a round number above the largest value in the window.
"use strict";
(function (global) {
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The smallest 1-2-5 step giving at most `ticks` intervals up to max.
  function niceStep(max, ticks) {
    const raw = max / ticks;
    const decade = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * decade >= raw) return m * decade;
    return 10 * decade;
  }

  function draw(container, opts) {
    const width = Math.max(container.clientWidth || 420, 200);
    const height = Math.max(container.clientHeight || 190, 100);
    const left = 60, right = 8, top = 18, bottom = 20;
    const plotW = width - left - right, plotH = height - top - bottom;
    const now = opts.now || Date.now();
    const windowMs = opts.windowMs || 300000;
    const format = opts.format || (v => String(v));
    const x0 = now - windowMs;
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });

    const series = (opts.series || []).map((s, i) => ({
      name: s.name,
      color: s.color || COLORS[i % COLORS.length],
      points: (s.points || []).filter(p => p[0] >= x0 && p[1] !== null && p[1] !== undefined && isFinite(p[1])),
    })).filter(s => s.points.length > 0);

    let max = 0;
    for (const s of series) for (const p of s.points) max = Math.max(max, p[1]);
    let step = 1;
    if (max > 0 && opts.binary) {
      const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(max) / Math.log(1024))));
      step = niceStep(max / unit, 4) * unit;
    } else if (max > 0) {
      step = niceStep(max, 4);
    }
    const yMax = max > 0 ? Math.ceil(max / step) * step : 1;
    const X = t => left + ((t - x0) / windowMs) * plotW;
    const Y = v => top + plotH - (v / yMax) * plotH;

    for (let v = 0; v <= yMax + step / 2; v += step) {
      svg.appendChild(el("line", { class: "grid", x1: left, x2: left + plotW, y1: Y(v), y2: Y(v) }));
      svg.appendChild(el("text", { x: left - 4, y: Y(v) + 3, "text-anchor": "end" }, format(v)));
    }
    svg.appendChild(el("line", { class: "axis", x1: left, x2: left, y1: top, y2: top + plotH }));
    svg.appendChild(el("line", { class: "axis", x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH }));
    // Time ticks: the first step giving at most 6 intervals.
    const tickS = [10, 15, 30, 60, 120, 300, 600].find(s => windowMs / (s * 1000) <= 6) || 600;
    for (let s = 0; s * 1000 <= windowMs; s += tickS) {
      const t = now - s * 1000;
      const label = s === 0 ? "now" : (s % 60 === 0 ? `-${s / 60}m` : `-${s}s`);
      svg.appendChild(el("text", { x: X(t), y: height - 5, "text-anchor": s === 0 ? "end" : "middle" }, label));
    }

    if (series.length === 0) {
      svg.appendChild(el("text", { class: "nodata", x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle" }, "no data"));
      container.dataset.points = "0";
    } else {
      let lx = left;
      for (const s of series) {
        const pts = s.points.map(p => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(" ");
        svg.appendChild(el("polyline", { points: pts, stroke: s.color }));
        if (s.points.length === 1) {
          const p = s.points[0];
          svg.appendChild(el("circle", { cx: X(p[0]), cy: Y(p[1]), r: 2, fill: s.color }));
        }
        svg.appendChild(el("rect", { x: lx, y: 4, width: 10, height: 3, fill: s.color }));
        const label = el("text", { x: lx + 13, y: 10 }, s.name);
        svg.appendChild(label);
        lx += 20 + 6.5 * s.name.length;
      }
      container.dataset.points = String(series.reduce((n, s) => n + s.points.length, 0));
    }
    container.replaceChildren(svg);
  }

  global.Lines = { draw, niceStep, COLORS };
})(window);
