package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd"
)

// TestConsoleTaskToLanding puts a task through the console in a real
// headless chromium against a real daemon: the task on the board in
// review, its diff on its page, a comment on one of its lines sent with
// "Request changes" reaching the agent (which commits again), the task
// back in review, and Approve landing it on main.
func TestConsoleTaskToLanding(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	browser := newConsoleBrowser(t)
	repo := gitRepo(t)
	e := newEnv(t, fastRestart+"[web]\nlisten = \"127.0.0.1:0\"\n")
	e.start()
	e.must("apply", "-f", e.writeRoles("tasks.toml", taskRole(repo, `["test", "-s", "WORK.md"]`)))
	e.waitState("worker-0", herd.StateRunning, 20*time.Second)
	id := strings.TrimSpace(e.must("task", "add", "worker", "--title", "greet", "add a greeting"))
	e.waitTask(id, herd.TaskReview, 60*time.Second)

	link := strings.TrimSpace(e.must("web", "url"))
	base, _, ok := strings.Cut(link, "/login")
	if !ok {
		t.Fatalf("[web url] expected a login link, got %q", link)
	}
	until := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))
	}
	browse(t, browser, "login", 15*time.Second, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#login")), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#fleet")))
	browse(t, browser, "the board", 15*time.Second, chromedp.Navigate(base+"/tasks"),
		chromedp.WaitVisible(chromedp.CSS(`#col-review .task-card[data-task="t-1"]`)))
	browse(t, browser, "the task's diff", 15*time.Second, chromedp.Navigate(base+"/tasks/t-1"),
		chromedp.WaitVisible(chromedp.CSS(`#diff section.diff-file tr.diff-hunk`)))
	if line := browserText(t, browser, `#diff tr.diff-add[data-new="1"] .diff-code`); line != "+add a greeting" {
		t.Errorf("[diff] expected the agent's line, got %q", line)
	}
	const comment = "say hello in French too"
	browse(t, browser, "a line comment", 15*time.Second,
		chromedp.Click(chromedp.CSS(`#diff tr.diff-add[data-new="1"]`)), chromedp.WaitVisible(chromedp.CSS("tr.diff-comment-form textarea")),
		chromedp.SendKeys(chromedp.CSS("tr.diff-comment-form textarea"), comment),
		chromedp.Click(chromedp.CSS("tr.diff-comment-form .add-comment")), chromedp.WaitNotPresent(chromedp.CSS("tr.diff-comment-form")),
		chromedp.Click(chromedp.CSS("#request-changes")), until(`document.querySelectorAll("#comments li").length === 0`))

	// The comment reached the agent: its next turn commits it.
	wt := filepath.Join(repo, ".herd", "worktrees", "t-1")
	e.waitFor("the comment in the agent's work", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(wt, "WORK.md"))
		return strings.Contains(string(b), "WORK.md:1: "+comment)
	})
	task := e.waitTask(id, herd.TaskReview, 60*time.Second)
	if task.Commits != 2 {
		t.Errorf("[changes] expected a second commit, got %+v", task)
	}
	browse(t, browser, "approve", 30*time.Second, chromedp.Navigate(base+"/tasks/t-1"),
		until(`!document.getElementById("approve").disabled`), chromedp.Click(chromedp.CSS("#approve")))
	task = e.waitTask(id, herd.TaskLanded, 60*time.Second)
	if b, err := os.ReadFile(filepath.Join(repo, "WORK.md")); err != nil || !strings.Contains(string(b), comment) {
		t.Errorf("[landed] expected the work and the comment's answer on main, got %q (%v)", b, err)
	}
	var by []string
	for _, ev := range e.events() {
		if ev.Data["task"] != id {
			continue
		}
		switch {
		case ev.Kind == herd.EventTaskFeedback, ev.Kind == herd.EventReaction && ev.Reason == herd.ReactionApproved:
			who, _ := ev.Data["by"].(string)
			by = append(by, ev.Kind+" by "+who)
		}
	}
	if len(by) != 2 || !strings.HasPrefix(by[0], herd.EventTaskFeedback+" by browser:") || !strings.HasPrefix(by[1], herd.EventReaction+" by browser:") {
		t.Errorf("expected the feedback and the approval by the browser's login, got %q", by)
	}
}
