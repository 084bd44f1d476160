package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
	"herd/internal/browsertest"
	"herd/internal/tasks"
	"herd/internal/web/auth"
)

// jsValue evaluates expr in the page within 10 s.
func jsValue[T any](t *testing.T, ctx context.Context, what, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("[%s] %v", what, err)
	}
	return v
}

// docsShot writes a PNG of the page to docs/ when HERD_SCREENSHOTS is
// set, as the other browser tests do.
func docsShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("HERD_SCREENSHOTS") == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("[screenshot %s] %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// awaitVerbs waits until n verbs reached the task component.
func awaitVerbs(t *testing.T, f *fakeTasks, n int) []verbCall {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		calls := f.calls()
		if len(calls) >= n {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("[verbs] expected %d verbs … got %+v", n, calls)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBrowserTasks drives the task pages in a real chromium over the
// daemon's task API: the board puts each task in its state's column, the
// inbox lists those that need a person, the task page draws the diff's
// files and hunks with hostile names and lines as text (nothing runs),
// pages a long diff, and its review sends the line comments as one
// comment and an approval as approve.
func TestBrowserTasks(t *testing.T) {
	ctx := browsertest.Start(t, "the task pages' test drives a real headless browser")
	c := newTestConsole(t)

	hostile := `<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script>`
	evilPath := `<img src=x onerror=window.pwned=3>.go`
	now := time.Now().UTC()
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	rev := reviewTask()
	rev.Title, rev.Prompt, rev.CheckTail = hostile, "Greet the user.\n"+hostile, "\x1b[32mok\x1b[0m  herd 0.2s\n"+hostile
	c.tasks.set(rev,
		herd.Task{ID: "t-2", Title: "queued one", Role: "w", State: herd.TaskQueued, CreatedAt: at(5 * time.Minute), UpdatedAt: at(5 * time.Minute)},
		herd.Task{ID: "t-3", Title: "checking one", Role: "w", State: herd.TaskChecking, Session: "w-1", Commits: 1, CreatedAt: at(time.Hour), UpdatedAt: at(time.Minute)},
		herd.Task{ID: "t-4", Title: "failed one", Role: "w", State: herd.TaskFailed, Reason: "the check failed 3 times", CreatedAt: at(2 * time.Hour), UpdatedAt: at(time.Hour)},
		herd.Task{ID: "t-5", Title: "stuck one", Role: "w", State: herd.TaskNeedsYou, Session: "w-2", Reason: "stopped without a commit", CreatedAt: at(time.Hour), UpdatedAt: at(time.Minute)},
		herd.Task{ID: "t-6", Title: "a big change", Role: "w", State: herd.TaskWorking, Session: "w-3", Commits: 4, Base: "main", Branch: "herd/t-6", CreatedAt: at(time.Hour), UpdatedAt: at(time.Minute)},
	)
	diff := "diff --git a/" + evilPath + " b/" + evilPath + "\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/" + evilPath + "\n" +
		"@@ -0,0 +1,2 @@\n+package main\n+// </script><img src=x onerror=\"window.pwned=4\">\n" +
		"diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n--- a/README.md\n+++ b/README.md\n" +
		"@@ -1,3 +1,4 @@ herd\n # herd\n-Old line\n+Hello\n+Bonjour\n end\n"
	var big strings.Builder
	big.WriteString("diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -0,0 +1,2500 @@\n")
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&big, "+line %d\n", i)
	}
	c.tasks.mu.Lock()
	c.tasks.diffs["t-1"] = tasks.Diff{Task: "t-1", Base: "main", Branch: "herd/t-1", Diff: diff}
	c.tasks.diffs["t-6"] = tasks.Diff{Task: "t-6", Base: "main", Branch: "herd/t-6", Diff: big.String(), Truncated: true}
	c.tasks.events["t-1"] = []herd.Event{{ID: 3, Time: at(time.Minute), Kind: herd.EventTaskReview, Message: hostile, Data: map[string]any{"task": "t-1"}}}
	c.tasks.mu.Unlock()
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browsertest.Do(t, ctx, what, 15*time.Second, steps...)
	}
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	nothingRan := func(what string) {
		t.Helper()
		if n := jsValue[int](t, ctx, what+" elements", `document.querySelectorAll("main img, main script").length`); n != 0 {
			t.Errorf("[%s] expected no element made of a task's text … got %d", what, n)
		}
		if jsValue[bool](t, ctx, what+" pwned", `window.pwned !== undefined`) {
			t.Errorf("[%s] a task's text ran as script", what)
		}
	}

	// The board: each task in its state's column, live.
	do("board", chromedp.Navigate(c.srv.LoginURL(auth.ScopeOperate, "/tasks")), visible("#login"), chromedp.Click(chromedp.CSS("#login")),
		visible(`#col-review .task-card[data-task="t-1"]`), visible("#live.on"))
	for col, ids := range map[string][]string{"queued": {"t-2"}, "working": {"t-3", "t-6"}, "needs_you": {"t-5"}, "review": {"t-1"}, "landed": nil, "ended": {"t-4"}} {
		got := jsValue[[]string](t, ctx, "column "+col, `Array.from(document.querySelectorAll("#col-`+col+` .task-card")).map(c => c.dataset.task)`)
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Errorf("[column %s] expected %v … got %v", col, ids, got)
		}
	}
	if title := jsValue[string](t, ctx, "card title", `document.querySelector('.task-card[data-task="t-1"] .task-card-title').textContent`); title != hostile {
		t.Errorf("[card] expected the title as text … got %q", title)
	}
	nothingRan("board")
	docsShot(t, ctx, "console-tasks.png")
	// A task that changes state moves when its event comes.
	c.tasks.mu.Lock()
	c.tasks.tasks[1].State = herd.TaskAssigned
	c.tasks.mu.Unlock()
	c.back.mu.Lock()
	c.back.events = append(c.back.events, herd.Event{ID: 10, Kind: herd.EventTaskAssigned, Data: map[string]any{"task": "t-2"}})
	c.back.mu.Unlock()
	do("live move", visible(`#col-working .task-card[data-task="t-2"]`))

	// The fleet page's inbox lists the tasks that need a person.
	do("inbox", chromedp.Navigate(strings.TrimSuffix(c.url, "/")+"/"), visible(`#inbox-tasks .item[data-task="t-1"]`),
		visible(`#inbox-tasks .item[data-task="t-5"]`), visible(`header a[href="/tasks"]`))
	if n := jsValue[int](t, ctx, "inbox tasks", `document.querySelectorAll("#inbox-tasks .item").length`); n != 2 {
		t.Errorf("[inbox] expected the tasks in review and needs_you … got %d", n)
	}
	nothingRan("inbox")

	// The task page: its fields, prompt and check as text, the diff's
	// files and hunks, a hostile file name and line as text.
	do("task page", chromedp.Navigate(c.url+"/tasks/t-1"), visible(`#diff section.diff-file tr.diff-hunk`),
		until(`document.getElementById("prompt").textContent.includes("Greet")`))
	heads := jsValue[[]string](t, ctx, "file heads", `Array.from(document.querySelectorAll("#diff .diff-file-head")).map(h => h.textContent)`)
	if strings.Join(heads, "|") != evilPath+"|README.md" {
		t.Errorf("[files] expected the two files, the hostile name as text … got %q", heads)
	}
	if n := jsValue[int](t, ctx, "hunks", `document.querySelectorAll("#diff tr.diff-hunk").length`); n != 2 {
		t.Errorf("[hunks] expected 2 … got %d", n)
	}
	if got := jsValue[string](t, ctx, "hostile line", `document.querySelector('#diff tr.diff-add[data-new="2"] .diff-code').textContent`); got != `+// </script><img src=x onerror="window.pwned=4">` {
		t.Errorf("[line] expected the hostile line as text … got %q", got)
	}
	kinds := jsValue[[]string](t, ctx, "line kinds", `Array.from(document.querySelectorAll('#diff section[data-path="README.md"] tr')).map(r => r.className)`)
	if strings.Join(kinds, ",") != "diff-row diff-hunk,diff-row diff-ctx diff-line,diff-row diff-del diff-line,diff-row diff-add diff-line,diff-row diff-add diff-line,diff-row diff-ctx diff-line" {
		t.Errorf("[classes] expected the hunk's lines by kind … got %v", kinds)
	}
	if got := jsValue[string](t, ctx, "title", `document.getElementById("title").textContent`); got != hostile {
		t.Errorf("[title] expected the title as text … got %q", got)
	}
	if got := jsValue[string](t, ctx, "check", `document.getElementById("check-tail").textContent`); got != "ok  herd 0.2s\n"+hostile {
		t.Errorf("[check] expected its output as text, without its colours' escapes … got %q", got)
	}
	if got := jsValue[string](t, ctx, "event", `document.querySelector("#events li span:last-child").textContent`); got != hostile {
		t.Errorf("[event] expected its message as text … got %q", got)
	}
	nothingRan("task page")
	state := func() []bool {
		return jsValue[[]bool](t, ctx, "buttons", `["approve", "retry", "cancel", "request-changes"].map(id => !document.getElementById(id).disabled)`)
	}
	if got := fmt.Sprint(state()); got != "[true false true false]" {
		t.Errorf("[review buttons] expected approve and cancel; request changes once commented … got %s", got)
	}

	// Comments on two lines, sent as one.
	comment := func(row, text string) {
		t.Helper()
		do("comment "+row, chromedp.Click(chromedp.CSS(row)), visible("tr.diff-comment-form textarea"),
			chromedp.SendKeys(chromedp.CSS("tr.diff-comment-form textarea"), text),
			chromedp.Click(chromedp.CSS("tr.diff-comment-form .add-comment")), chromedp.WaitNotPresent(chromedp.CSS("tr.diff-comment-form")))
	}
	comment(`#diff section[data-path="README.md"] tr.diff-add[data-new="3"]`, "say it in French")
	comment(`#diff tr.diff-add[data-new="1"]`, "no <b>markup</b> here")
	do("open form", chromedp.Click(chromedp.CSS(`#diff section[data-path="README.md"] tr.diff-del`)), visible("tr.diff-comment-form textarea"))
	docsShot(t, ctx, "console-task.png")
	do("close form", chromedp.Click(chromedp.CSS("tr.diff-comment-form .cancel-comment")))
	if n := jsValue[int](t, ctx, "comments", `document.querySelectorAll("#comments li").length`); n != 2 {
		t.Fatalf("[comments] expected 2 listed … got %d", n)
	}
	do("request changes", chromedp.Click(chromedp.CSS("#request-changes")), until(`document.querySelectorAll("#comments li").length === 0`))
	calls := awaitVerbs(t, c.tasks, 1)
	want := "README.md:3: say it in French\n" + evilPath + ":1: no <b>markup</b> here"
	if calls[0].verb != "comment" || calls[0].req.Text != want || !strings.HasPrefix(calls[0].req.By, "browser:") {
		t.Errorf("[request changes] expected one comment of the line comments, by the browser … got %+v", calls[0])
	}

	// Approve.
	do("approve", until(`!document.getElementById("approve").disabled`), chromedp.Click(chromedp.CSS("#approve")))
	calls = awaitVerbs(t, c.tasks, 2)
	if len(calls) != 2 || calls[1].verb != "approve" || calls[1].req.ID != "t-1" {
		t.Errorf("[approve] expected approve to follow the one comment … got %+v", calls)
	}

	// A long diff is drawn a page at a time; a truncated one says so.
	do("long diff", chromedp.Navigate(c.url+"/tasks/t-6"), visible("#diff-more"), visible("#diff-truncated"))
	if n := jsValue[int](t, ctx, "first page", `document.querySelectorAll("#diff tr.diff-line").length`); n >= 2000 || n < 1990 {
		t.Errorf("[first page] expected about 2000 rows … got %d lines", n)
	}
	if got := fmt.Sprint(state()); got != "[false false true false]" {
		t.Errorf("[working buttons] expected cancel alone … got %s", got)
	}
	do("show more", chromedp.Click(chromedp.CSS("#diff-more")), until(`document.querySelectorAll("#diff tr.diff-line").length === 2500`),
		chromedp.WaitNotVisible(chromedp.CSS("#diff-more")))

	// On a phone, the board and a task with its diff fit the screen.
	do("phone", chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, page := range []string{"/tasks", "/tasks/t-1"} {
		do("phone "+page, chromedp.Navigate(c.url+page), visible(`.task-card, #diff tr.diff-hunk`))
		if w := jsValue[int](t, ctx, "phone width", `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("[phone %s] expected the page to fit 375 px … it is %d wide", page, w)
		}
	}
}
