// herd console, the session page: the screen, input and keys, the verbs,
// what describe says and the recent events.
"use strict";

(function () {
  var el = herd.el;
  var name = decodeURIComponent(location.pathname.replace(/^\/sessions\//, ""));
  var base = "/api/v1/sessions/" + encodeURIComponent(name);

  function status(msg) { document.getElementById("status").textContent = msg; }

  // renderScreen puts the screen's segments in as text nodes: the
  // colours are classes, the agent's bytes never markup.
  function renderScreen(scr) {
    var pre = document.getElementById("screen");
    var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    var nodes = (scr.segments || []).map(function (s) {
      if (!s.c) return document.createTextNode(s.t);
      return el("span", s.c, s.t);
    });
    pre.replaceChildren.apply(pre, nodes);
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function refreshScreen() {
    herd.api(base + "/screen").then(renderScreen, function (e) {
      document.getElementById("screen").textContent = "(" + e.message + ")";
    });
  }

  var infoKeys = ["state", "activity", "runtime", "process", "host", "role", "runtime_kind", "incarnation", "pid",
    "restarts", "started_at", "last_activity_at", "backoff_until"];

  function renderInfo(d) {
    document.getElementById("state").textContent = d.state + " · " + d.activity;
    document.getElementById("state").className = "state state-" + d.state;
    var dl = document.getElementById("info");
    var nodes = [];
    infoKeys.forEach(function (k) {
      if (d[k] === undefined || d[k] === null || d[k] === "") return;
      nodes.push(el("dt", "", k.replace(/_/g, " ")));
      nodes.push(el("dd", "", d[k]));
    });
    if (d.exit) {
      nodes.push(el("dt", "", "exit"));
      nodes.push(el("dd", "", JSON.stringify(d.exit)));
    }
    if (d.notification) {
      nodes.push(el("dt", "", "notification"));
      nodes.push(el("dd", "", d.notification.title));
    }
    dl.replaceChildren.apply(dl, nodes);
    var ol = document.getElementById("events");
    var evs = (d.recent_events || []).slice().reverse();
    ol.replaceChildren.apply(ol, evs.map(function (e) {
      var li = el("li", "ev-" + e.kind);
      var t = el("time", "muted", new Date(e.time).toLocaleTimeString());
      t.dateTime = e.time;
      li.appendChild(t);
      li.appendChild(el("span", "badge", e.kind));
      li.appendChild(el("span", "", e.message));
      return li;
    }));
  }

  function refreshResources() {
    herd.api(base + "/resources").then(function (d) {
      herdCharts.resources(document.getElementById("resources"), d);
    }, function () {});
  }

  function refreshInfo() {
    herd.api(base).then(renderInfo, function (e) { status(e.message); });
  }

  function send(body) {
    return herd.api(base + "/input", { method: "POST", body: body }).then(function (res) {
      status(res.message);
      setTimeout(refreshScreen, 150);
    }, function (e) { status(e.message); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("name").textContent = name;
    document.title = name + " · herd";
    document.getElementById("input-form").addEventListener("submit", function (e) {
      e.preventDefault();
      var inp = document.getElementById("input");
      send({ text: inp.value }).then(function () { inp.value = ""; });
    });
    document.querySelectorAll("[data-key]").forEach(function (b) {
      b.addEventListener("click", function () { send({ key: b.dataset.key }); });
    });
    document.querySelectorAll("[data-verb]").forEach(function (b) {
      b.addEventListener("click", function () {
        var verb = b.dataset.verb;
        if (verb !== "resume" && !confirm(verb + " " + name + "?")) return;
        status(verb + "…");
        herd.api(base + "/" + verb, { method: "POST", body: {} }).then(function (res) {
          status(res.message);
          refreshInfo();
        }, function (e) { status(e.message); });
      });
    });
    var refresh = herd.throttle(refreshInfo, 300);
    herd.whoami().then(function () {
      refreshInfo();
      refreshScreen();
      refreshResources();
      setInterval(function () { if (!document.hidden) refreshResources(); }, 60000);
      herd.live(function (ev) { if (ev.session === name) refresh(); }, refresh);
      setInterval(function () { if (!document.hidden) refreshScreen(); }, 1000);
      setInterval(function () { if (!document.hidden) refresh(); }, 5000);
    });
  });
})();
