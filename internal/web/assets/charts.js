// herd console: small SVG charts, drawn with DOM calls (attributes and
// text nodes only: no markup is ever parsed, no inline style is set).
"use strict";

var herdCharts = (function () {
  var NS = "http://www.w3.org/2000/svg";
  var W = 320, H = 90, PAD = 4, LEFT = 40, BOTTOM = 14;

  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function frame(title) {
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "class": "chart-svg" });
    svg.appendChild(svgEl("title", {}, title));
    return svg;
  }

  function clock(t) {
    var d = new Date(t);
    return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
  }

  // line draws points [{t, v}] (v null: a gap) as a polyline, the y axis
  // from 0 to the largest value, labelled with fmt.
  function line(title, points, fmt) {
    var svg = frame(title);
    var vals = points.filter(function (p) { return p.v !== null && p.v !== undefined; });
    var top = Math.max.apply(null, [0].concat(vals.map(function (p) { return p.v; })));
    if (top <= 0) top = 1;
    var t0 = points.length ? Date.parse(points[0].t) : 0;
    var t1 = points.length ? Date.parse(points[points.length - 1].t) : 1;
    var span = Math.max(t1 - t0, 1);
    var x = function (t) { return LEFT + (Date.parse(t) - t0) / span * (W - LEFT - PAD); };
    var y = function (v) { return PAD + (1 - v / top) * (H - PAD - BOTTOM); };
    svg.appendChild(svgEl("line", { x1: LEFT, y1: y(0), x2: W - PAD, y2: y(0), "class": "chart-axis" }));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(top) + 8, "text-anchor": "end", "class": "chart-label" }, fmt(top)));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(0), "text-anchor": "end", "class": "chart-label" }, fmt(0)));
    if (points.length) {
      svg.appendChild(svgEl("text", { x: LEFT, y: H - 2, "class": "chart-label" }, clock(points[0].t)));
      svg.appendChild(svgEl("text", { x: W - PAD, y: H - 2, "text-anchor": "end", "class": "chart-label" }, clock(points[points.length - 1].t)));
    }
    // One polyline per run of known values.
    var run = [];
    var flush = function () {
      if (run.length === 1) svg.appendChild(svgEl("circle", { cx: run[0][0], cy: run[0][1], r: 1.5, "class": "chart-dot" }));
      if (run.length > 1) svg.appendChild(svgEl("polyline", { points: run.map(function (p) { return p.join(","); }).join(" "), "class": "chart-line" }));
      run = [];
    };
    points.forEach(function (p) {
      if (p.v === null || p.v === undefined) { flush(); return; }
      run.push([x(p.t).toFixed(1), y(p.v).toFixed(1)]);
    });
    flush();
    if (!vals.length) svg.appendChild(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "class": "chart-label" }, "no samples yet"));
    return svg;
  }

  // bars draws two counts per bucket (crashed over restarted), stacked.
  function bars(title, start, bucketMs, crashed, restarted) {
    var svg = frame(title);
    var n = crashed.length;
    var top = 1;
    for (var i = 0; i < n; i++) top = Math.max(top, crashed[i] + restarted[i]);
    var bw = (W - LEFT - PAD) / n;
    var y = function (v) { return PAD + (1 - v / top) * (H - PAD - BOTTOM); };
    svg.appendChild(svgEl("line", { x1: LEFT, y1: y(0), x2: W - PAD, y2: y(0), "class": "chart-axis" }));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(top) + 8, "text-anchor": "end", "class": "chart-label" }, top));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(0), "text-anchor": "end", "class": "chart-label" }, 0));
    svg.appendChild(svgEl("text", { x: LEFT, y: H - 2, "class": "chart-label" }, clock(start)));
    svg.appendChild(svgEl("text", { x: W - PAD, y: H - 2, "text-anchor": "end", "class": "chart-label" }, "now"));
    for (var j = 0; j < n; j++) {
      var x0 = LEFT + j * bw + 0.5;
      if (crashed[j]) {
        var r = svgEl("rect", { x: x0, y: y(crashed[j]), width: Math.max(bw - 1, 1), height: y(0) - y(crashed[j]), "class": "chart-bar-crashed" });
        r.appendChild(svgEl("title", {}, crashed[j] + " crashed"));
        svg.appendChild(r);
      }
      if (restarted[j]) {
        var r2 = svgEl("rect", { x: x0, y: y(crashed[j] + restarted[j]), width: Math.max(bw - 1, 1), height: y(0) - y(restarted[j]), "class": "chart-bar-restarted" });
        r2.appendChild(svgEl("title", {}, restarted[j] + " restarted"));
        svg.appendChild(r2);
      }
    }
    return svg;
  }

  function mib(b) {
    if (b >= 1 << 30) return (b / (1 << 30)).toFixed(1) + "G";
    return Math.round(b / (1 << 20)) + "M";
  }

  // resources draws a session's CPU and memory charts into box.
  function resources(box, data) {
    var pts = data.points || [];
    var cpu = line("CPU, % of a core", pts.map(function (p) { return { t: p.t, v: p.cpu }; }), function (v) { return Math.round(v) + "%"; });
    var mem = line("memory (resident)", pts.map(function (p) { return { t: p.t, v: p.rss }; }), mib);
    var a = document.createElement("figure");
    a.className = "chart chart-cpu";
    a.appendChild(cpu);
    var ca = document.createElement("figcaption");
    ca.textContent = "CPU, % of a core";
    a.appendChild(ca);
    var b = document.createElement("figure");
    b.className = "chart chart-mem";
    b.appendChild(mem);
    var cb = document.createElement("figcaption");
    cb.textContent = "memory";
    b.appendChild(cb);
    box.replaceChildren(a, b);
  }

  // crashes draws one bar chart per role into box.
  function crashes(box, data) {
    var bucket = 3600 * 1000;
    var m = /^(\d+)h/.exec(data.bucket || "");
    if (m) bucket = Number(m[1]) * 3600 * 1000;
    var figs = (data.roles || []).map(function (r) {
      var f = document.createElement("figure");
      f.className = "chart chart-crashes";
      f.dataset.role = r.role;
      f.appendChild(bars(r.role + ": crashes and restarts", data.start, bucket, r.crashed, r.restarted));
      var c = document.createElement("figcaption");
      var sum = function (a) { return a.reduce(function (x, y) { return x + y; }, 0); };
      c.textContent = r.role + ": " + sum(r.crashed) + " crashed, " + sum(r.restarted) + " restarted";
      f.appendChild(c);
      return f;
    });
    box.replaceChildren.apply(box, figs);
    return figs.length;
  }

  // days are the n UTC dates (YYYY-MM-DD) ending today, oldest first.
  function days(n, now) {
    var out = [];
    for (var i = n - 1; i >= 0; i--) out.push(new Date(now - i * 86400000).toISOString().slice(0, 10));
    return out;
  }

  function usd(v) { return "$" + (v >= 100 ? v.toFixed(0) : v.toFixed(2)); }

  function tokens(u) {
    return u.input_tokens + " in, " + u.output_tokens + " out, " + u.cache_read_tokens + " cache read, " +
      u.cache_write_tokens + " cache write tokens";
  }

  // costBars draws a cost per day, one bar a day; each bar's title tells
  // its day, cost and tokens.
  function costBars(title, dates, byDay) {
    var svg = frame(title);
    var top = 0;
    dates.forEach(function (d) { if (byDay[d]) top = Math.max(top, byDay[d].cost_usd); });
    if (top <= 0) top = 1;
    var bw = (W - LEFT - PAD) / dates.length;
    var y = function (v) { return PAD + (1 - v / top) * (H - PAD - BOTTOM); };
    svg.appendChild(svgEl("line", { x1: LEFT, y1: y(0), x2: W - PAD, y2: y(0), "class": "chart-axis" }));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(top) + 8, "text-anchor": "end", "class": "chart-label" }, usd(top)));
    svg.appendChild(svgEl("text", { x: LEFT - 3, y: y(0), "text-anchor": "end", "class": "chart-label" }, usd(0)));
    svg.appendChild(svgEl("text", { x: LEFT, y: H - 2, "class": "chart-label" }, dates[0].slice(5)));
    svg.appendChild(svgEl("text", { x: W - PAD, y: H - 2, "text-anchor": "end", "class": "chart-label" }, "today"));
    dates.forEach(function (d, j) {
      var u = byDay[d];
      if (!u) return;
      var h = Math.max(y(0) - y(u.cost_usd), 1);
      var r = svgEl("rect", { x: LEFT + j * bw + 0.5, y: y(0) - h, width: Math.max(bw - 1, 1), height: h, "class": "chart-bar-cost", "data-day": d });
      r.appendChild(svgEl("title", {}, d + ": " + usd(u.cost_usd) + ", " + tokens(u)));
      svg.appendChild(r);
    });
    return svg;
  }

  // cost draws one chart of cost per day for each role into box: reports
  // are [{role, report}], each report `herd usage --by day --role ROLE -o
  // json`; n days ending today. It returns the grand total in USD.
  function cost(box, reports, n, now) {
    var dates = days(n, now);
    var grand = 0;
    var figs = reports.map(function (rr) {
      var byDay = {};
      var total = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0 };
      ((rr.report && rr.report.lines) || []).forEach(function (l) {
        if (dates.indexOf(l.key) < 0) return;
        byDay[l.key] = l;
        Object.keys(total).forEach(function (k) { total[k] += l[k] || 0; });
      });
      grand += total.cost_usd;
      var f = document.createElement("figure");
      f.className = "chart chart-cost";
      f.dataset.role = rr.role;
      f.appendChild(costBars(rr.role + ": cost per day", dates, byDay));
      var c = document.createElement("figcaption");
      c.textContent = rr.role + ": " + usd(total.cost_usd) + " in " + n + " days";
      c.title = tokens(total);
      f.appendChild(c);
      return f;
    });
    box.replaceChildren.apply(box, figs);
    return grand;
  }

  return { resources: resources, crashes: crashes, cost: cost, usd: usd, line: line, bars: bars };
})();
