/* A small SVG line chart: several series, labelled axes with "nice" ticks, a legend.
 *
 * Plain SVG so the page needs no charting library and no network. The chart keeps
 * its series and redraws itself when points are added (live training curves); each
 * drawn path carries data-points (its number of points) so tests can read it.
 */
(function () {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0e7490", "#57606a"];

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/* Ticks at 1, 2 or 5 times a power of ten, covering [lo, hi]. */
function niceTicks(lo, hi, count, integer) {
  if (!isFinite(lo) || !isFinite(hi)) return [];
  if (hi === lo) { hi = lo + (Math.abs(lo) || 1) * 0.5; lo = lo - (Math.abs(lo) || 1) * 0.5; }
  const raw = (hi - lo) / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  if (integer) step = Math.max(1, Math.round(step)); // steps are whole numbers: no tick at 1.5
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

function formatTick(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return String(+v.toPrecision(4));
}

class LineChart {
  /* container: an element; options: {xLabel, yLabel, height, title} */
  constructor(container, options) {
    this.container = container;
    this.options = Object.assign({ xLabel: "step", yLabel: "", height: 260, integerX: true }, options || {});
    this.series = new Map(); // name -> {name, color, points: [[x, y]]}
    this.pending = false;
    this.svg = svgEl("svg", { class: "chart", role: "img", "aria-label": this.options.yLabel || "chart" });
    container.appendChild(this.svg);
  }

  setSeries(name, points, color) {
    const existing = this.series.get(name);
    const c = color || (existing && existing.color) || PALETTE[this.series.size % PALETTE.length];
    this.series.set(name, { name, color: c, points: points.slice() });
    this.schedule();
  }

  addPoint(name, x, y) {
    if (!isFinite(x) || !isFinite(y)) return;
    if (!this.series.has(name)) this.setSeries(name, []);
    const s = this.series.get(name);
    const last = s.points[s.points.length - 1];
    if (last && x <= last[0]) {
      // a resumed run repeats steps after its checkpoint: keep the newest value per step
      s.points = s.points.filter((p) => p[0] < x);
    }
    s.points.push([x, y]);
    this.schedule();
  }

  pointCount() {
    let n = 0;
    for (const s of this.series.values()) n += s.points.length;
    return n;
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  draw() {
    const svg = this.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const width = Math.max(320, this.container.clientWidth || 640);
    const height = this.options.height;
    const m = { top: 14, right: 16, bottom: 42, left: 62 };
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    const all = [...this.series.values()];
    const pts = all.flatMap((s) => s.points);
    svg.dataset.points = String(pts.length);
    const plotW = width - m.left - m.right;
    const plotH = height - m.top - m.bottom;
    svg.appendChild(svgEl("rect", { x: m.left, y: m.top, width: plotW, height: plotH, class: "plot-bg" }));

    if (pts.length === 0) {
      svg.appendChild(svgEl("text", { x: m.left + plotW / 2, y: m.top + plotH / 2, class: "empty", "text-anchor": "middle" }, "no data yet"));
      this.drawLabels(svg, width, height, m, plotW, plotH);
      return;
    }
    let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
    let [y0, y1] = [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    const pad = (y1 - y0) * 0.05 || Math.abs(y1) * 0.1 || 1;
    y0 -= pad; y1 += pad;
    if (y0 < 0 && Math.min(...pts.map((p) => p[1])) >= 0) y0 = 0;
    const sx = (x) => m.left + ((x - x0) / (x1 - x0)) * plotW;
    const sy = (y) => m.top + plotH - ((y - y0) / (y1 - y0)) * plotH;

    const grid = svgEl("g", { class: "grid" });
    for (const t of niceTicks(y0, y1, 5)) {
      if (t < y0 || t > y1) continue;
      grid.appendChild(svgEl("line", { x1: m.left, x2: m.left + plotW, y1: sy(t), y2: sy(t) }));
      grid.appendChild(svgEl("text", { x: m.left - 6, y: sy(t) + 4, "text-anchor": "end", class: "tick" }, formatTick(t)));
    }
    for (const t of niceTicks(x0, x1, Math.max(2, Math.floor(plotW / 90)), this.options.integerX)) {
      if (t < x0 || t > x1) continue;
      grid.appendChild(svgEl("line", { x1: sx(t), x2: sx(t), y1: m.top + plotH, y2: m.top + plotH + 4, class: "tickmark" }));
      grid.appendChild(svgEl("text", { x: sx(t), y: m.top + plotH + 17, "text-anchor": "middle", class: "tick" }, formatTick(t)));
    }
    svg.appendChild(grid);
    svg.appendChild(svgEl("line", { x1: m.left, x2: m.left + plotW, y1: m.top + plotH, y2: m.top + plotH, class: "axis" }));
    svg.appendChild(svgEl("line", { x1: m.left, x2: m.left, y1: m.top, y2: m.top + plotH, class: "axis" }));

    for (const s of all) {
      if (s.points.length === 0) continue;
      const d = s.points.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
      const path = svgEl("path", { d, fill: "none", stroke: s.color, "stroke-width": 2, "stroke-linejoin": "round", class: "series" });
      path.dataset.series = s.name;
      path.dataset.points = String(s.points.length);
      const title = svgEl("title", {}, s.name);
      path.appendChild(title);
      svg.appendChild(path);
      if (s.points.length === 1) {
        svg.appendChild(svgEl("circle", { cx: sx(s.points[0][0]), cy: sy(s.points[0][1]), r: 3, fill: s.color }));
      }
    }
    this.drawLabels(svg, width, height, m, plotW, plotH);
    if (all.length > 1) this.drawLegend(svg, all, m, plotW);
  }

  drawLabels(svg, width, height, m, plotW, plotH) {
    svg.appendChild(svgEl("text", { x: m.left + plotW / 2, y: height - 6, "text-anchor": "middle", class: "axis-label" }, this.options.xLabel));
    const ylab = svgEl("text", { x: 0, y: 0, "text-anchor": "middle", class: "axis-label", transform: `translate(14 ${m.top + plotH / 2}) rotate(-90)` }, this.options.yLabel);
    svg.appendChild(ylab);
  }

  drawLegend(svg, all, m, plotW) {
    const g = svgEl("g", { class: "legend" });
    g.appendChild(svgEl("rect", { x: m.left + plotW - 198, y: m.top + 1, width: 196, height: all.length * 16 + 8, class: "legend-bg" }));
    let y = m.top + 9;
    for (const s of all) {
      const label = s.name.length > 34 ? s.name.slice(0, 33) + "…" : s.name;
      g.appendChild(svgEl("line", { x1: m.left + plotW - 190, x2: m.left + plotW - 174, y1: y, y2: y, stroke: s.color, "stroke-width": 3 }));
      g.appendChild(svgEl("text", { x: m.left + plotW - 168, y: y + 4, class: "legend-text" }, label));
      y += 16;
    }
    svg.appendChild(g);
  }
}

window.TrainkitChart = { LineChart, PALETTE, niceTicks };
})();
