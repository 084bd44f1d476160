// herd console, the fleet page: the needs-you inbox and every session.
"use strict";

(function () {
  var el = herd.el;
  var sessions = [];
  var pending = {}; // session -> status line shown on its card
  var wanted = new URLSearchParams(location.search).get("item") || "";

  function card(it) {
    var c = el("article", "item kind-" + it.kind);
    c.dataset.session = it.session;
    var head = el("div", "item-head");
    var a = el("a", "item-session", it.session);
    a.href = "/sessions/" + encodeURIComponent(it.session);
    head.appendChild(a);
    head.appendChild(el("span", "badge kind", it.kind.replace("_", " ")));
    head.appendChild(el("span", "muted", it.host));
    head.appendChild(el("span", "grow"));
    var since = el("time", "muted", herd.ago(it.since));
    since.dateTime = it.since;
    head.appendChild(since);
    c.appendChild(head);
    c.appendChild(el("pre", "item-text", it.text));
    if (it.reset_at) c.appendChild(el("p", "muted", "resets " + new Date(it.reset_at).toLocaleTimeString()));
    var status = el("p", "status", pending[it.session] || "");
    if (herd.canOperate() && it.kind !== "failed" && it.kind !== "stalled") {
      var opts = el("div", "options");
      (it.options || []).forEach(function (o) {
        var b = el("button", "option", o.label);
        b.dataset.key = o.key;
        b.addEventListener("click", function () { answer(it, { option: o.key }, status, c); });
        opts.appendChild(b);
      });
      c.appendChild(opts);
      var f = el("form", "reply");
      var inp = el("input");
      inp.placeholder = "reply in your own words";
      inp.setAttribute("aria-label", "reply to " + it.session);
      f.appendChild(inp);
      f.appendChild(el("button", "", "Send"));
      f.addEventListener("submit", function (e) {
        e.preventDefault();
        if (inp.value) answer(it, { text: inp.value }, status, c);
      });
      c.appendChild(f);
    } else if (herd.canOperate()) {
      var acts = el("div", "options");
      var r = el("button", "option", it.kind === "failed" ? "Reset" : "Restart");
      r.addEventListener("click", function () {
        var verb = it.kind === "failed" ? "reset" : "restart";
        herd.api("/api/v1/sessions/" + encodeURIComponent(it.session) + "/" + verb, { method: "POST", body: {} })
          .then(function (res) { status.textContent = res.message; }, function (e) { status.textContent = e.message; });
      });
      acts.appendChild(r);
      c.appendChild(acts);
    }
    c.appendChild(status);
    return c;
  }

  function answer(it, body, status, c) {
    body.since = it.since;
    c.classList.add("busy");
    herd.api("/api/v1/sessions/" + encodeURIComponent(it.session) + "/answer", { method: "POST", body: body })
      .then(function (res) {
        pending[it.session] = "";
        status.textContent = "answered: " + res.message;
        refreshInbox();
      }, function (e) {
        status.textContent = e.message;
        c.classList.remove("busy");
        if (e.status === 409) { c.classList.add("stale"); }
      });
  }

  var unreadTimer = 0;
  // unreadSince is when the page first saw each unread item (by session
  // and since).
  var unreadSince = {};

  function refreshInbox() {
    herd.api("/api/v1/inbox").then(function (items) {
      var box = document.getElementById("inbox");
      var keep = {};
      // A card with a reply being typed stays as it is.
      var focused = document.activeElement && document.activeElement.closest ? document.activeElement.closest(".item") : null;
      var next = [];
      items.forEach(function (it) {
        keep[it.session] = true;
        if (focused && focused.dataset.session === it.session) { next.push(focused); return; }
        // An item unchanged keeps its card: a tap on a button is never
        // lost to a redraw of the same item.
        var key = JSON.stringify(it);
        var old = box.querySelector('.item[data-session="' + CSS.escape(it.session) + '"]');
        if (old && old.dataset.key === key) { next.push(old); return; }
        var c = card(it);
        c.dataset.key = key;
        next.push(c);
      });
      // Cards in place stay where they are; only the others move.
      next.forEach(function (c, i) {
        if (box.children[i] !== c) box.insertBefore(c, box.children[i] || null);
      });
      while (box.children.length > next.length) box.lastElementChild.remove();
      waiting.sessions = items.length;
      showWaiting();
      // A dialog not read from its screen yet is drawn a moment after its
      // hook fired: ask again in a second while one is shown, for its
      // first half minute (an agent that never draws one costs no more
      // than the periodic refresh after that), and not in a hidden tab.
      clearTimeout(unreadTimer);
      var now = Date.now(), seen = {};
      var fresh = items.some(function (it) {
        if (!it.unread) return false;
        var k = it.session + " " + it.since;
        seen[k] = unreadSince[k] || now;
        return now - seen[k] < 30000;
      });
      unreadSince = seen;
      if (fresh && !document.hidden) unreadTimer = setTimeout(refreshInbox, 1000);
      // A notification's link (/?item=NAME) shows its item once.
      if (wanted) {
        var c = box.querySelector('.item[data-session="' + CSS.escape(wanted) + '"]');
        if (c) { c.classList.add("focus"); c.scrollIntoView({ block: "center" }); wanted = ""; }
      }
    }, function () {});
  }

  // waiting counts what needs a person: sessions, and tasks in needs_you
  // or review.
  var waiting = { sessions: 0, tasks: 0 };

  function showWaiting() {
    var n = waiting.sessions + waiting.tasks;
    document.getElementById("inbox-count").textContent = n;
    document.getElementById("inbox-empty").hidden = n > 0;
    document.title = (n ? "(" + n + ") " : "") + "herd console";
  }

  // taskCard is a task that needs a person: its page is where it is
  // reviewed or answered.
  function taskCard(t) {
    var c = el("article", "item kind-task");
    c.dataset.task = t.id;
    var head = el("div", "item-head");
    var a = el("a", "item-session", t.id);
    a.href = "/tasks/" + encodeURIComponent(t.id);
    head.appendChild(a);
    head.appendChild(el("span", "badge kind", t.state === "review" ? "task review" : "task needs you"));
    head.appendChild(el("span", "muted", t.role + (t.session ? " · " + t.session : "")));
    head.appendChild(el("span", "grow"));
    var since = el("time", "muted", herd.ago(t.updated_at));
    since.dateTime = t.updated_at;
    head.appendChild(since);
    c.appendChild(head);
    c.appendChild(el("pre", "item-text", t.title + (t.reason && t.state === "needs_you" ? "\n" + t.reason : "")));
    var open = el("a", "button", t.state === "review" ? "Review" : "Open");
    open.href = a.href;
    var acts = el("div", "options");
    acts.appendChild(open);
    c.appendChild(acts);
    return c;
  }

  function refreshTasks() {
    herd.api("/api/v1/tasks?state=needs_you,review").then(function (list) {
      list = list || [];
      var box = document.getElementById("inbox-tasks");
      box.replaceChildren.apply(box, list.map(taskCard));
      waiting.tasks = list.length;
      showWaiting();
    }, function () {});
  }

  function fillSelect(id, values) {
    var s = document.getElementById(id);
    var cur = s.value;
    var first = s.options[0];
    var opts = [first];
    values.forEach(function (v) { var o = el("option", "", v); o.value = v; opts.push(o); });
    s.replaceChildren.apply(s, opts);
    s.value = values.indexOf(cur) >= 0 ? cur : "";
  }

  function uniq(key) {
    var m = {};
    sessions.forEach(function (s) { if (s[key]) m[s[key]] = true; });
    return Object.keys(m).sort();
  }

  var stateOrder = { failed: 0, stalled: 1, unknown: 2, backoff: 3, crashed: 4, pending: 5, running: 6, succeeded: 7, stopped: 8 };

  function renderFleet() {
    fillSelect("f-role", uniq("role"));
    fillSelect("f-host", uniq("host"));
    fillSelect("f-state", uniq("state"));
    var q = document.getElementById("filter").value.toLowerCase();
    var role = document.getElementById("f-role").value;
    var host = document.getElementById("f-host").value;
    var state = document.getElementById("f-state").value;
    var by = document.getElementById("sort").value;
    var rows = sessions.filter(function (s) {
      if (role && s.role !== role) return false;
      if (host && s.host !== host) return false;
      if (state && s.state !== state) return false;
      if (!q) return true;
      return [s.name, s.role, s.host, s.state, s.activity].join(" ").toLowerCase().indexOf(q) >= 0;
    });
    rows.sort(function (a, b) {
      if (by === "state") return (stateOrder[a.state] - stateOrder[b.state]) || a.name.localeCompare(b.name);
      if (by === "activity") return String(b.last_activity_at || "").localeCompare(String(a.last_activity_at || ""));
      if (by === "restarts") return (b.restarts - a.restarts) || a.name.localeCompare(b.name);
      return a.name.localeCompare(b.name);
    });
    var body = document.querySelector("#fleet tbody");
    body.replaceChildren.apply(body, rows.map(function (s) {
      var tr = el("tr", "row-" + s.state);
      tr.dataset.session = s.name;
      var td = el("td");
      var a = el("a", "", s.name + (s.escalated || s.notified ? " !" : ""));
      a.href = "/sessions/" + encodeURIComponent(s.name);
      td.appendChild(a);
      tr.appendChild(td);
      tr.appendChild(el("td", "", s.role));
      tr.appendChild(el("td", "", s.host));
      var st = el("td");
      st.appendChild(el("span", "state state-" + s.state, s.state));
      tr.appendChild(st);
      tr.appendChild(el("td", "act-" + s.activity, s.activity));
      tr.appendChild(el("td", "num", s.restarts));
      tr.appendChild(el("td", "muted", herd.ago(s.last_activity_at)));
      return tr;
    }));
    document.getElementById("fleet-count").textContent = sessions.length;
  }

  function refreshFleet() {
    herd.api("/api/v1/sessions").then(function (list) { sessions = list || []; renderFleet(); }, function () {});
  }

  var tasksSoon = herd.throttle(refreshTasks, 1000);
  var refresh = herd.throttle(function () { refreshFleet(); refreshInbox(); tasksSoon(); }, 250);

  function refreshCrashes() {
    herd.api("/api/v1/crashes").then(function (d) {
      var n = herdCharts.crashes(document.getElementById("crashes"), d);
      document.getElementById("crashes-empty").hidden = n > 0;
    }, function () {});
  }
  var crashesSoon = herd.throttle(refreshCrashes, 2000);

  // refreshCost asks each role's cost per day of the last 14 days.
  var costDays = 14;
  function refreshCost() {
    var since = "&since=" + costDays + "d";
    herd.api("/api/v1/usage?by=role" + since).then(function (byRole) {
      var roles = ((byRole && byRole.lines) || []).map(function (l) { return l.key; }).filter(function (r) { return r !== ""; });
      return Promise.all(roles.map(function (role) {
        return herd.api("/api/v1/usage?by=day&role=" + encodeURIComponent(role) + since).then(function (rep) {
          return { role: role, report: rep };
        });
      }));
    }).then(function (reports) {
      var total = herdCharts.cost(document.getElementById("cost"), reports, costDays, Date.now());
      document.getElementById("cost-empty").hidden = reports.length > 0;
      document.getElementById("cost-total").textContent = reports.length ? "total " + herdCharts.usd(total) : "";
    }, function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    ["filter", "f-role", "f-host", "f-state", "sort"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", renderFleet);
    });
    herd.whoami().then(function () {
      refresh();
      refreshCrashes();
      refreshCost();
      herd.live(function (ev) {
        refresh();
        if (ev && (ev.kind === "crashed" || ev.kind === "restarted")) crashesSoon();
      }, refresh);
      setInterval(function () { if (!document.hidden) { refreshCrashes(); refreshCost(); } }, 60000);
      setInterval(refresh, 10000);
    });
  });
})();
