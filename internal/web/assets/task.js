// herd console, the task page: the task, its prompt, its check's output,
// its events, and its diff, on whose lines a reviewer leaves comments that
// go to the agent as one "Request changes".
"use strict";

(function () {
  var el = herd.el;
  var id = decodeURIComponent(location.pathname.replace(/^\/tasks\//, ""));
  var base = "/api/v1/tasks/" + encodeURIComponent(id);
  // page is how many rows of a diff are drawn at a time.
  var page = 2000;

  var task = null;
  var diffKey = null; // what the diff drawn was read for: state and commits
  var renderer = null;
  var comments = []; // {where, text}
  var busy = false;

  // allowed says in which states each verb can be asked (the task
  // component decides; the buttons only follow it).
  var allowed = {
    approve: function (s) { return s === "review"; },
    comment: function (s) { return s === "review" || s === "needs_you" || s === "working" || s === "changes"; },
    retry: function (s) { return s === "failed" || s === "cancelled" || s === "needs_you"; },
    cancel: function (s) { return s !== "landed" && s !== "failed" && s !== "cancelled"; }
  };

  function status(msg) { document.getElementById("status").textContent = msg; }

  // plain drops a terminal's escape sequences from a check's output.
  function plain(s) {
    return String(s || "").replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "").replace(/\x1b[\]P^_][^\x07\x1b]*(\x07|\x1b\\)?/g, "");
  }

  var infoKeys = ["state", "reason", "role", "session", "branch", "base", "repo", "commits", "check", "pr", "approved_by",
    "landed", "worktree", "attempts", "created_at", "updated_at"];

  function renderInfo(t) {
    document.getElementById("title").textContent = t.title;
    var st = document.getElementById("state");
    st.textContent = t.state.replace("_", " ");
    st.className = "state task-state-" + t.state;
    var dl = document.getElementById("info");
    var nodes = [];
    infoKeys.forEach(function (k) {
      var v = t[k];
      if (v === undefined || v === null || v === "" || (Array.isArray(v) && !v.length)) return;
      if (Array.isArray(v)) v = v.join(" ");
      nodes.push(el("dt", "", k.replace(/_/g, " ")));
      var dd = el("dd");
      if (k === "session") {
        var a = el("a", "", v);
        a.href = "/sessions/" + encodeURIComponent(v);
        dd.appendChild(a);
      } else if (k === "created_at" || k === "updated_at") {
        dd.textContent = new Date(v).toLocaleString() + " (" + herd.ago(v) + ")";
      } else {
        dd.textContent = String(v);
      }
      nodes.push(dd);
    });
    dl.replaceChildren.apply(dl, nodes);
    document.getElementById("prompt").textContent = t.prompt;
    var tail = plain(t.check_tail);
    document.getElementById("check-section").hidden = !tail;
    document.getElementById("check-tail").textContent = tail;
    document.getElementById("check-exit").textContent = tail ? "exit " + (t.check_exit || 0) : "";
    var ol = document.getElementById("events");
    var evs = (t.events || []).slice().reverse();
    ol.replaceChildren.apply(ol, evs.map(function (e) {
      var li = el("li", "ev-" + e.kind);
      var tm = el("time", "muted", new Date(e.time).toLocaleString());
      tm.dateTime = e.time;
      li.appendChild(tm);
      li.appendChild(el("span", "badge", e.reason ? e.kind + " " + e.reason : e.kind));
      li.appendChild(el("span", "", e.message));
      return li;
    }));
    buttons();
  }

  // buttons enables each verb as the task's state allows it.
  function buttons() {
    var s = task ? task.state : "";
    ["approve", "retry", "cancel"].forEach(function (v) {
      document.getElementById(v).disabled = busy || !task || !allowed[v](s);
    });
    var general = document.getElementById("general-comment").value.trim();
    document.getElementById("request-changes").disabled = busy || !task || !allowed.comment(s) || (!comments.length && !general);
  }

  function refreshTask() {
    return herd.api(base).then(function (t) {
      task = t;
      document.title = t.id + " · " + t.title + " · herd";
      renderInfo(t);
      var key = t.state + " " + t.commits;
      if (key !== diffKey) refreshDiff(key);
    }, function (e) { status(e.message); });
  }

  function refreshDiff(key) {
    diffKey = key;
    var box = document.getElementById("diff");
    var more = document.getElementById("diff-more");
    var note = document.getElementById("diff-status");
    herd.api(base + "/diff").then(function (d) {
      var rows = herdDiff.parse(d.diff || "");
      var s = herdDiff.stats(rows);
      document.getElementById("diff-summary").textContent = d.base + "..." + d.branch + " · " + s.files +
        (s.files === 1 ? " file" : " files") + ", +" + s.add + " −" + s.del;
      var tr = document.getElementById("diff-truncated");
      tr.hidden = !d.truncated;
      tr.textContent = d.truncated ? "The diff is longer than the console is given: this is its beginning. `herd task diff " + d.task + "` shows it whole." : "";
      note.hidden = rows.length > 0;
      note.textContent = rows.length ? "" : "No change against " + d.base + " yet.";
      var shown = renderer ? Math.max(page, renderer.drawn) : page;
      renderer = new herdDiff.Renderer(box, rows, lineClicked);
      showMore(renderer.render(shown));
    }, function (e) {
      renderer = null;
      box.replaceChildren();
      more.hidden = true;
      note.hidden = false;
      note.textContent = e.message;
    });
  }

  function showMore(left) {
    var more = document.getElementById("diff-more");
    more.hidden = left <= 0;
    more.textContent = "Show more (" + left + " more lines)";
  }

  // lineClicked opens a comment form under a line of the diff.
  function lineClicked(tr, row) {
    if (!herd.canOperate()) return;
    var next = tr.nextElementSibling;
    if (next && next.classList.contains("diff-comment-form")) {
      next.querySelector("textarea").focus();
      return;
    }
    var form = el("tr", "diff-comment-form");
    var td = el("td");
    td.colSpan = 3;
    var where = herdDiff.where(row);
    td.appendChild(el("div", "muted", where));
    var ta = el("textarea");
    ta.rows = 3;
    ta.setAttribute("aria-label", "comment on " + where);
    td.appendChild(ta);
    var add = el("button", "add-comment", "Add comment");
    var cancel = el("button", "cancel-comment", "Cancel");
    add.addEventListener("click", function () {
      var text = ta.value.trim();
      if (!text) return;
      comments.push({ where: where, text: text });
      tr.classList.add("has-comment");
      form.remove();
      renderComments();
    });
    cancel.addEventListener("click", function () { form.remove(); });
    var acts = el("div", "options");
    acts.appendChild(add);
    acts.appendChild(cancel);
    td.appendChild(acts);
    form.appendChild(td);
    tr.after(form);
    ta.focus();
  }

  function renderComments() {
    var ol = document.getElementById("comments");
    ol.replaceChildren.apply(ol, comments.map(function (c, i) {
      var li = el("li");
      li.appendChild(el("span", "comment-where", c.where));
      li.appendChild(el("span", "comment-text", c.text));
      var rm = el("button", "remove-comment", "remove");
      rm.addEventListener("click", function () { comments.splice(i, 1); renderComments(); });
      li.appendChild(rm);
      return li;
    }));
    document.getElementById("comments-count").textContent = comments.length;
    buttons();
  }

  // review is the one comment "Request changes" sends: a line per
  // comment, "path:line: text", then the comment on the whole change.
  function review() {
    var lines = comments.map(function (c) { return c.where + ": " + c.text.replace(/\n/g, "\n  "); });
    var general = document.getElementById("general-comment").value.trim();
    if (general) {
      if (lines.length) lines.push("");
      lines.push(general);
    }
    return lines.join("\n");
  }

  function act(verb, body, done) {
    busy = true;
    buttons();
    status(verb + "…");
    herd.api(base + "/" + verb, { method: "POST", body: body }).then(function (t) {
      busy = false;
      if (done) done();
      status(verb + ": the task is " + t.state.replace("_", " "));
      diffKey = null; // read the diff again too
      refreshTask();
    }, function (e) {
      busy = false;
      status(e.message);
      buttons();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("task-id").textContent = id;
    document.title = id + " · herd";
    ["approve", "retry", "cancel"].forEach(function (v) {
      document.getElementById(v).addEventListener("click", function () { act(v, {}); });
    });
    document.getElementById("request-changes").addEventListener("click", function () {
      var text = review();
      if (!text) return;
      act("comment", { text: text }, function () {
        comments = [];
        document.getElementById("general-comment").value = "";
        document.querySelectorAll("#diff .has-comment").forEach(function (tr) { tr.classList.remove("has-comment"); });
        renderComments();
      });
    });
    document.getElementById("general-comment").addEventListener("input", buttons);
    document.getElementById("diff-more").addEventListener("click", function () {
      if (renderer) showMore(renderer.render(renderer.drawn + page));
    });
    buttons();
    var soon = herd.throttle(refreshTask, 500);
    herd.whoami().then(function () {
      refreshTask();
      herd.live(function (ev) { if (ev && ev.data && ev.data.task === id) soon(); }, soon);
      setInterval(function () { if (!document.hidden) soon(); }, 5000);
    });
  });
})();
