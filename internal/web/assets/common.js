// herd console: helpers shared by the pages. Everything an agent produced
// is put in the page as text (textContent), never as markup.
"use strict";

var herd = (function () {
  var csrf = "";
  var scope = "read";

  // el makes an element with a class and text.
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // api calls the console's API; a POST carries the CSRF token.
  function api(path, opts) {
    opts = opts || {};
    var init = { method: opts.method || "GET", credentials: "same-origin", headers: {} };
    if (opts.body !== undefined) {
      init.body = JSON.stringify(opts.body);
      init.headers["Content-Type"] = "application/json";
    }
    if (init.method !== "GET") init.headers["X-Herd-CSRF"] = csrf;
    return fetch(path, init).then(function (r) {
      return r.text().then(function (t) {
        var v = null;
        try { v = t ? JSON.parse(t) : null; } catch (e) { v = { error: t }; }
        if (!r.ok) {
          var err = new Error((v && v.error) || ("HTTP " + r.status));
          err.status = r.status;
          throw err;
        }
        return v;
      });
    });
  }

  // whoami learns the login's scope and CSRF token.
  function whoami() {
    return api("/api/v1/whoami").then(function (w) {
      csrf = w.csrf || "";
      scope = w.scope;
      var s = document.getElementById("scope");
      if (s) s.textContent = w.scope === "operate" ? "operate" : "read-only";
      var h = document.getElementById("host");
      if (h) h.textContent = w.host;
      document.body.classList.toggle("readonly", w.scope !== "operate");
      return w;
    });
  }

  // live follows the server-sent events: onEvent gets each event of the
  // log, onSessions each change of the fleet.
  function live(onEvent, onSessions) {
    var dot = document.getElementById("live");
    var es = new EventSource("/api/v1/events");
    es.onopen = function () { if (dot) dot.classList.add("on"); };
    es.onerror = function () { if (dot) dot.classList.remove("on"); };
    es.onmessage = function (m) {
      var ev = null;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      onEvent(ev);
    };
    es.addEventListener("sessions", function () { onSessions(); });
    return es;
  }

  // ago says how long ago an RFC 3339 time was.
  function ago(t) {
    if (!t) return "";
    var s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
    if (s < 60) return Math.floor(s) + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h ago";
    return Math.floor(s / 86400) + "d ago";
  }

  // throttle runs fn at most once per ms, trailing.
  function throttle(fn, ms) {
    var timer = null, again = false;
    return function run() {
      if (timer) { again = true; return; }
      fn();
      timer = setTimeout(function () { timer = null; if (again) { again = false; run(); } }, ms);
    };
  }

  // isTaskEvent reports whether an event of the log is a task's
  // transition (task_*, reaction).
  function isTaskEvent(ev) {
    return typeof ev.kind === "string" && (ev.kind.lastIndexOf("task_", 0) === 0 || ev.kind === "reaction");
  }

  return { el: el, api: api, whoami: whoami, live: live, ago: ago, throttle: throttle, isTaskEvent: isTaskEvent,
    canOperate: function () { return scope === "operate"; } };
})();
