// herd console: a unified diff (git diff) read into rows and drawn as
// tables of lines, a page at a time. Syntax-neutral; every byte of the
// diff goes in as text (textContent), file names too.
"use strict";

var herdDiff = (function () {
  var el = herd.el;

  // unquote reads a path git quoted ("a/t\303\251st"): C escapes, and
  // octal bytes of UTF-8.
  function unquote(s) {
    if (s.charAt(0) !== '"') return s;
    var bytes = [], enc = new TextEncoder();
    var chars = Array.from(s.slice(1));
    var esc = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13 };
    for (var i = 0; i < chars.length; i++) {
      var c = chars[i];
      if (c === '"') break;
      if (c !== "\\") { enc.encode(c).forEach(function (b) { bytes.push(b); }); continue; }
      var d = chars[++i] || "";
      if (/[0-7]/.test(d)) {
        var oct = d;
        while (oct.length < 3 && /[0-7]/.test(chars[i + 1] || "")) oct += chars[++i];
        bytes.push(parseInt(oct, 8) & 255);
      } else if (esc[d] !== undefined) {
        bytes.push(esc[d]);
      } else {
        enc.encode(d).forEach(function (b) { bytes.push(b); });
      }
    }
    return new TextDecoder().decode(new Uint8Array(bytes));
  }

  // side is the path of a ---/+++ line: "" for /dev/null, else without
  // its a/ or b/.
  function side(rest) {
    rest = rest.replace(/\t$/, "");
    if (rest === "/dev/null") return "";
    rest = unquote(rest);
    return rest.replace(/^[ab]\//, "");
  }

  // gitPaths reads the two paths of "diff --git a/X b/Y".
  function gitPaths(rest) {
    if (rest.charAt(0) === '"') {
      var end = 1;
      while (end < rest.length && !(rest.charAt(end) === '"' && rest.charAt(end - 1) !== "\\")) end++;
      return { a: side(rest.slice(0, end + 1)), b: side(rest.slice(end + 2)) };
    }
    // The same path twice (no rename): "a/P b/P".
    var n = (rest.length - 5) / 2;
    if (n > 0 && n === Math.floor(n) && rest.slice(2, 2 + n) === rest.slice(5 + n)) {
      return { a: rest.slice(2, 2 + n), b: rest.slice(5 + n) };
    }
    var i = rest.lastIndexOf(" b/");
    if (i < 0) return { a: side(rest), b: side(rest) };
    return { a: side(rest.slice(0, i)), b: side(rest.slice(i + 1)) };
  }

  // parse reads a unified diff into rows: {t: "file", file} starts a
  // file; then "meta" (its header lines), "hunk" (@@ lines), and the
  // lines "add", "del", "ctx" with their numbers o (old) and n (new),
  // and "note" (\ No newline at end of file). A row's file is {path,
  // oldPath}: path is the new side's ("" when deleted).
  function parse(text) {
    var rows = [], file = null, oldLeft = 0, newLeft = 0, o = 0, n = 0;
    var lines = text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    function startFile(paths, line) {
      file = { path: paths.b, oldPath: paths.a };
      rows.push({ t: "file", file: file, text: line });
    }
    lines.forEach(function (l) {
      if (oldLeft > 0 || newLeft > 0) {
        var c = l.charAt(0);
        if (c === "+") { rows.push({ t: "add", file: file, n: n++, text: l }); newLeft--; return; }
        if (c === "-") { rows.push({ t: "del", file: file, o: o++, text: l }); oldLeft--; return; }
        if (c === " " || l === "") { rows.push({ t: "ctx", file: file, o: o++, n: n++, text: l }); oldLeft--; newLeft--; return; }
        if (c === "\\") { rows.push({ t: "note", file: file, text: l }); return; }
        oldLeft = newLeft = 0; // a short hunk: read the line as a header
      }
      if (l.lastIndexOf("diff --git ", 0) === 0) { startFile(gitPaths(l.slice(11)), l); return; }
      if (!file) startFile({ a: "", b: "" }, "");
      var m = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(l);
      if (m) {
        o = +m[1]; n = +m[3];
        oldLeft = m[2] === undefined ? 1 : +m[2];
        newLeft = m[4] === undefined ? 1 : +m[4];
        rows.push({ t: "hunk", file: file, text: l });
        return;
      }
      if (l.lastIndexOf("\\", 0) === 0) { rows.push({ t: "note", file: file, text: l }); return; }
      if (l.lastIndexOf("--- ", 0) === 0) file.oldPath = side(l.slice(4));
      else if (l.lastIndexOf("+++ ", 0) === 0) file.path = side(l.slice(4));
      else if (l.lastIndexOf("rename to ", 0) === 0) file.path = unquote(l.slice(10));
      else if (l.lastIndexOf("rename from ", 0) === 0) file.oldPath = unquote(l.slice(12));
      rows.push({ t: "meta", file: file, text: l });
    });
    return rows;
  }

  // stats counts a diff's files and added and removed lines.
  function stats(rows) {
    var s = { files: 0, add: 0, del: 0 };
    rows.forEach(function (r) {
      if (r.t === "file") s.files++;
      else if (r.t === "add") s.add++;
      else if (r.t === "del") s.del++;
    });
    return s;
  }

  // name is what a file is called in its header and in comments.
  function name(file) {
    if (file.path && file.oldPath && file.path !== file.oldPath) return file.oldPath + " → " + file.path;
    return file.path || file.oldPath || "(unnamed)";
  }

  // Renderer draws rows into box, a page at a time: render(upTo) draws
  // the rows not drawn yet before upTo. onLine(tr, row) is called when a
  // line row is clicked.
  function Renderer(box, rows, onLine) {
    this.box = box;
    this.rows = rows;
    this.onLine = onLine;
    this.drawn = 0;
    this.body = null;
    this.head = null;
    box.replaceChildren();
  }

  Renderer.prototype.fileSection = function (file) {
    var sec = el("section", "diff-file");
    sec.dataset.path = file.path || file.oldPath;
    var h = el("h3", "diff-file-head", name(file));
    sec.appendChild(h);
    this.head = el("div", "diff-meta");
    sec.appendChild(this.head);
    var table = el("table", "diff-table");
    // The widths of a fixed table come from its columns, not from its
    // first row (a hunk's header, across all three).
    var cols = el("colgroup");
    ["diff-num-col", "diff-num-col", "diff-code-col"].forEach(function (c) { cols.appendChild(el("col", c)); });
    table.appendChild(cols);
    this.body = el("tbody");
    table.appendChild(this.body);
    sec.appendChild(table);
    this.box.appendChild(sec);
  };

  Renderer.prototype.render = function (upTo) {
    var self = this;
    upTo = Math.min(upTo, this.rows.length);
    for (; this.drawn < upTo; this.drawn++) {
      var r = this.rows[this.drawn];
      if (r.t === "file" || !this.body) {
        this.fileSection(r.file);
        if (r.t === "file") continue;
      }
      if (r.t === "meta") { this.head.appendChild(el("div", "", r.text)); continue; }
      var tr = el("tr", "diff-row diff-" + r.t);
      if (r.t === "hunk" || r.t === "note") {
        var td = el("td", "diff-code", r.text);
        td.colSpan = 3;
        tr.appendChild(td);
        this.body.appendChild(tr);
        continue;
      }
      tr.classList.add("diff-line");
      if (r.o !== undefined) tr.dataset.old = String(r.o);
      if (r.n !== undefined) tr.dataset.new = String(r.n);
      tr.appendChild(el("td", "diff-num", r.o === undefined ? "" : r.o));
      tr.appendChild(el("td", "diff-num", r.n === undefined ? "" : r.n));
      tr.appendChild(el("td", "diff-code", r.text));
      tr.addEventListener("click", (function (row, node) {
        return function () { self.onLine(node, row); };
      })(r, tr));
      this.body.appendChild(tr);
    }
    return this.rows.length - this.drawn;
  };

  // where names a line for a comment: "path:N" on the new side, the old
  // one for a removed line.
  function where(r) {
    if (r.t === "del") return (r.file.oldPath || r.file.path) + ":" + r.o + " (removed line)";
    return (r.file.path || r.file.oldPath) + ":" + r.n;
  }

  return { parse: parse, stats: stats, Renderer: Renderer, where: where, unquote: unquote };
})();
