package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
)

// taskRole is a role of two simulated agents that take tasks: each
// prompt is a turn that commits it (sim --work), with check.
func taskRole(repo, check string) string {
	return fmt.Sprintf(`
[[role]]
name = "worker"
replicas = 2
command = [%q, "sim", "--interval", "300ms", "--wait-input", "--work", "--hooks", "SessionStart"]
workdir = %q
runtime = "tmux"
tasks = true
check = %s
`, bin, repo, check)
}

// task reads one task through the CLI.
func (e *env) task(id string) herd.Task {
	e.t.Helper()
	var ts []herd.Task
	if err := json.Unmarshal([]byte(e.must("get", "tasks", "-o", "json")), &ts); err != nil {
		e.t.Fatalf("get tasks -o json: %v", err)
	}
	for _, t := range ts {
		if t.ID == id {
			return t
		}
	}
	e.t.Fatalf("task %s not listed in %+v", id, ts)
	return herd.Task{}
}

// waitTask waits until task id is in state st.
func (e *env) waitTask(id string, st herd.TaskState, timeout time.Duration) herd.Task {
	e.t.Helper()
	var t herd.Task
	deadline := time.Now().Add(timeout)
	for t = e.task(id); t.State != st; t = e.task(id) {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for task %s %s; it is:\n%s", timeout, id, st, e.try("describe", "task", id))
		}
		time.Sleep(pollEvery)
	}
	return t
}

// taskKinds lists the kinds (and reaction kinds) of a task's events, in
// order.
func taskKinds(evs []herd.Event, id string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Data["task"] != id {
			continue
		}
		k := ev.Kind
		if ev.Kind == herd.EventReaction || ev.Kind == herd.EventTaskChecked {
			k += ":" + ev.Reason
		}
		out = append(out, k)
	}
	return out
}

// TestTaskThroughToLanding: a task put in with the CLI goes to a free
// replica, relaunched in the task's own worktree; the agent commits; the
// check fails and its failure goes back to the same agent, which commits
// again; the check passes; the diff shows the work; approved, it lands
// on main through the user's clean checkout (an untracked file there
// survives), and its worktree and branch are gone. The events tell the
// whole story, each once.
func TestTaskThroughToLanding(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	// Passes once WORK.md has two lines or more: the first turn (one
	// line) fails it.
	e.must("apply", "-f", e.writeRoles("tasks.toml", taskRole(repo, `["sh", "-c", "test $(wc -l < WORK.md) -ge 2"]`)))
	for i := range 2 {
		e.waitState(fmt.Sprintf("worker-%d", i), herd.StateRunning, 20*time.Second)
	}
	id := strings.TrimSpace(e.must("task", "add", "worker", "--title", "greet", "add a greeting"))
	if id != "t-1" {
		t.Fatalf("expected task id t-1, got %q", id)
	}
	task := e.waitTask(id, herd.TaskReview, 60*time.Second)
	if task.Session == "" || task.Branch != "herd/t-1" || task.Base != "main" || task.Commits != 2 || task.Attempts != 1 {
		t.Errorf("[review] expected a session, branch herd/t-1 on main, 2 commits after 1 attempt sent back, got %+v", task)
	}
	wt := filepath.Join(repo, ".herd", "worktrees", "t-1")
	if task.Worktree != wt {
		t.Errorf("[worktree] expected %s, got %q", wt, task.Worktree)
	}
	// The replica was relaunched in the task's worktree.
	relaunched := false
	for _, ev := range e.events("--session", task.Session, "--kind", herd.EventRestarted) {
		relaunched = relaunched || (ev.Reason == "task" && ev.Data["worktree"] == wt && ev.Data["branch"] == "herd/t-1")
	}
	if !relaunched {
		t.Errorf("[replica] expected %s relaunched in %s on herd/t-1, got %+v", task.Session, wt, e.events("--session", task.Session))
	}
	work, err := os.ReadFile(filepath.Join(wt, "WORK.md"))
	if err != nil || !strings.HasPrefix(string(work), "add a greeting\n") || !strings.Contains(string(work), "The check of task t-1") {
		t.Errorf("[work] expected the prompt then the check's failure in WORK.md, got %q (%v)", work, err)
	}
	diff := e.must("task", "diff", id)
	if !strings.Contains(diff, "+add a greeting") || !strings.Contains(diff, "WORK.md") {
		t.Errorf("[diff] expected WORK.md's new lines, got:\n%s", diff)
	}
	if got := git(t, repo, "rev-parse", "main"); strings.TrimSpace(got) == "" {
		t.Fatal("no main")
	}
	before := strings.TrimSpace(git(t, repo, "rev-parse", "main"))

	e.must("task", "approve", id)
	task = e.waitTask(id, herd.TaskLanded, 60*time.Second)
	after := strings.TrimSpace(git(t, repo, "rev-parse", "main"))
	if after == before || task.Landed != after {
		t.Errorf("[landed] expected main moved to the landed commit %s, was %s, is %s", task.Landed, before, after)
	}
	// Merged (the default): main holds both commits, the checkout too.
	if b, err := os.ReadFile(filepath.Join(repo, "WORK.md")); err != nil || string(b) != string(work) {
		t.Errorf("[checkout] expected the user's checkout fast-forwarded to the work, got %q (%v)", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(repo, ".env")); err != nil || string(b) != "TOKEN=x\n" {
		t.Errorf("[untracked] expected .env untouched, got %q (%v)", b, err)
	}
	// Removed once the landing is recorded (the task is landed first).
	e.waitFor("the worktree and the branch removed", 20*time.Second, func() bool {
		_, err := os.Stat(wt)
		return os.IsNotExist(err) && strings.TrimSpace(git(t, repo, "branch", "--list", "herd/t-1")) == ""
	})
	want := []string{
		// The replica's relaunch in the task's worktree names the task.
		herd.EventTaskQueued, herd.EventTaskAssigned, herd.EventStopped, herd.EventRestarted, herd.EventTaskDelivered,
		herd.EventTaskChecked + ":failed", herd.EventReaction + ":" + herd.ReactionCheckFailed,
		herd.EventTaskChecked + ":passed", herd.EventTaskReview,
		herd.EventReaction + ":" + herd.ReactionApproved, herd.EventTaskLanded,
		// Then the replica is relaunched in its role's workdir.
		herd.EventStopped, herd.EventRestarted,
	}
	var kinds []string
	e.waitFor("the task's events", 10*time.Second, func() bool {
		kinds = taskKinds(e.events(), id)
		if !slices.Equal(kinds, want) {
			t.Logf("events so far: %v", kinds)
		}
		return slices.Equal(kinds, want)
	})
	desc := e.must("describe", "task", id)
	for _, s := range []string{"t-1", "landed", "greet", "add a greeting", herd.EventTaskLanded} {
		if !strings.Contains(desc, s) {
			t.Errorf("[describe] expected %q in:\n%s", s, desc)
		}
	}
}

// TestTaskBadInput: a task for a role that does not exist or takes no
// tasks, an empty or oversized prompt, a repository that is not one, a
// base that does not exist, a task id that does not exist: each a clear
// error, nothing queued.
func TestTaskBadInput(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("apply", "-f", e.writeRoles("roles.toml", taskRole(repo, "[]")+fmt.Sprintf(`
[[role]]
name = "plain"
replicas = 0
command = ["sleep", "300"]
workdir = %q
`, repo)))
	notRepo := t.TempDir()
	for _, c := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"no role", []string{"task", "add", "ghost", "x"}, "", `role "ghost" does not exist`},
		{"not a task role", []string{"task", "add", "plain", "x"}, "", "does not take tasks"},
		{"empty prompt", []string{"task", "add", "worker", "  "}, "", "prompt is empty"},
		{"oversized prompt", []string{"task", "add", "worker", "-"}, strings.Repeat("x", herd.MaxTaskPrompt+1), "limit"},
		{"not a repository", []string{"task", "add", "worker", "--repo", notRepo, "x"}, "", "not inside a git repository"},
		{"no such base", []string{"task", "add", "worker", "--base", "nope", "x"}, "", `"nope"`},
		{"no such task", []string{"task", "approve", "t-99"}, "", "task t-99 not found"},
		{"not a task id", []string{"describe", "task", "7"}, "", "not a task id"},
	} {
		_, stderr, code := e.herdIn(c.stdin, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("[%s] expected a failure saying %q, got exit %d: %s", c.name, c.want, code, stderr)
		}
	}
	if out := strings.TrimSpace(e.must("get", "tasks", "-o", "json")); out != "[]" && out != "null" {
		t.Errorf("expected no task queued, got %s", out)
	}
}

// TestTaskQueueScales: a task role with replicas = 1 and max_replicas =
// 3 starts replicas for its queue (three tasks: three replicas, one task
// each); once the tasks have landed, the replicas beyond one are stopped
// after scale_down_after, never one while it holds a task.
func TestTaskQueueScales(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("apply", "-f", e.writeRoles("tasks.toml", fmt.Sprintf(`
[[role]]
name = "worker"
replicas = 1
max_replicas = 3
scale_down_after = "3s"
command = [%q, "sim", "--interval", "300ms", "--wait-input", "--work", "--work-per-branch", "--hooks", "SessionStart"]
workdir = %q
runtime = "tmux"
tasks = true
`, bin, repo)))
	e.waitState("worker-0", herd.StateRunning, 20*time.Second)
	for i := range 3 {
		e.must("task", "add", "worker", fmt.Sprintf("job %d", i))
	}
	sessions := map[string]bool{}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		sessions[e.waitTask(id, herd.TaskReview, 60*time.Second).Session] = true
	}
	if len(sessions) != 3 {
		t.Errorf("expected the three tasks on three replicas, got %v", sessions)
	}
	running := func() int {
		n := 0
		for _, s := range e.sessions() {
			if s.Role == "worker" && s.State.Live() {
				n++
			}
		}
		return n
	}
	// Held in review longer than scale_down_after: nothing stopped.
	e.holds("three replicas while they hold tasks", 4*time.Second, func() bool { return running() == 3 })
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		e.must("task", "approve", id)
		e.waitTask(id, herd.TaskLanded, 60*time.Second)
	}
	e.waitFor("back to one replica", 30*time.Second, func() bool { return running() == 1 })
	scaled := 0
	for _, ev := range e.events("--kind", herd.EventStopped) {
		if ev.Reason == herd.ReasonScaledDown {
			scaled++
		}
	}
	if scaled != 2 {
		t.Errorf("expected two replicas stopped as scaled_down, got %d", scaled)
		for _, ev := range e.events() {
			if ev.Kind == herd.EventStopped || ev.Kind == herd.EventSpawned || ev.Kind == herd.EventRestarted || strings.HasPrefix(ev.Kind, "task_") {
				t.Logf("%s %s %s %s %s", ev.Time.Format("15:04:05.000"), ev.Session, ev.Kind, ev.Reason, ev.Message)
			}
		}
	}
}
