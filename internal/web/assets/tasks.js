// herd console, the task board: every task in the column of its state.
"use strict";

(function () {
  var el = herd.el;
  var tasks = [];

  // columns are the board's, by the states each holds; the ended ones
  // (failed, cancelled) are the collapsed list under it.
  var columns = {
    queued: "queued", assigned: "working", working: "working", checking: "working", changes: "working",
    needs_you: "needs_you", review: "review", landed: "landed", failed: "ended", cancelled: "ended"
  };
  // newestFirst are the columns that grow without end: the newest on top,
  // at most shownMax of them.
  var newestFirst = { landed: true, ended: true };
  var shownMax = 50;

  function card(t) {
    var c = el("article", "task-card state-" + t.state);
    c.dataset.task = t.id;
    var head = el("div", "item-head");
    var a = el("a", "task-id", t.id);
    a.href = "/tasks/" + encodeURIComponent(t.id);
    head.appendChild(a);
    head.appendChild(el("span", "badge", t.state.replace("_", " ")));
    head.appendChild(el("span", "grow"));
    var age = el("time", "muted", herd.ago(t.created_at));
    age.dateTime = t.created_at;
    age.title = "created " + new Date(t.created_at).toLocaleString();
    head.appendChild(age);
    c.appendChild(head);
    var title = el("a", "task-card-title", t.title || "(no title)");
    title.href = a.href;
    c.appendChild(title);
    var meta = el("div", "task-meta muted");
    meta.appendChild(el("span", "", t.role));
    if (t.session) {
      var s = el("a", "", t.session);
      s.href = "/sessions/" + encodeURIComponent(t.session);
      meta.appendChild(s);
    }
    meta.appendChild(el("span", "", t.commits + (t.commits === 1 ? " commit" : " commits")));
    c.appendChild(meta);
    if (t.reason && (t.state === "needs_you" || t.state === "failed")) c.appendChild(el("p", "task-reason", t.reason));
    return c;
  }

  function fillRoles() {
    var s = document.getElementById("f-role");
    var cur = s.value, roles = {};
    tasks.forEach(function (t) { roles[t.role] = true; });
    var names = Object.keys(roles).sort();
    var opts = [s.options[0]];
    names.forEach(function (r) { var o = el("option", "", r); o.value = r; opts.push(o); });
    s.replaceChildren.apply(s, opts);
    s.value = names.indexOf(cur) >= 0 ? cur : "";
  }

  function render() {
    fillRoles();
    var role = document.getElementById("f-role").value;
    var by = { queued: [], working: [], needs_you: [], review: [], landed: [], ended: [] };
    tasks.forEach(function (t) {
      if (role && t.role !== role) return;
      var col = columns[t.state];
      if (col) by[col].push(t);
    });
    Object.keys(by).forEach(function (col) {
      var list = by[col];
      if (newestFirst[col]) list = list.slice().sort(function (a, b) { return String(b.updated_at).localeCompare(String(a.updated_at)); });
      var box = document.getElementById("col-" + col);
      var cards = col === "ended" ? box : box.querySelector(".cards");
      var nodes = list.slice(0, shownMax).map(card);
      if (list.length > shownMax) nodes.push(el("p", "muted", "and " + (list.length - shownMax) + " more (herd get tasks)"));
      cards.replaceChildren.apply(cards, nodes);
      var count = col === "ended" ? document.querySelector("#ended .count") : box.querySelector(".count");
      count.textContent = list.length;
    });
    document.getElementById("tasks-count").textContent = tasks.length + (tasks.length === 1 ? " task" : " tasks");
  }

  function refresh() {
    herd.api("/api/v1/tasks").then(function (list) {
      tasks = list || [];
      document.getElementById("board-status").textContent = "";
      render();
    }, function (e) { document.getElementById("board-status").textContent = e.message; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("f-role").addEventListener("input", render);
    var soon = herd.throttle(refresh, 1000);
    herd.whoami().then(function () {
      refresh();
      // Every transition of a task is an event of the log.
      herd.live(function (ev) { if (ev && herd.isTaskEvent(ev)) soon(); }, soon);
      setInterval(function () { if (!document.hidden) { refresh(); } }, 10000);
    });
  });
})();
