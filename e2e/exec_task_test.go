package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
)

// execAgent is a headless agent run per turn (as `claude -p PROMPT` or
// `codex exec PROMPT` are): its turn's text is its last argument; it
// writes the text's last line to WORK.md and commits it. Its first run
// of all crashes (exit 3) before doing anything, once.
const execAgent = `
set -e
if [ ! -e "$CRASHED" ]; then : > "$CRASHED"; exit 3; fi
printf '%s\n' "$1" | grep -v '^$' | tail -n 1 >> WORK.md
git add WORK.md
git -c user.name=agent -c user.email=agent@example.com commit -q -m "turn"
`

// TestExecTaskThroughToLanding: a task for an exec role, whose agent
// runs one turn a launch. With no task its replica runs nothing (parked:
// succeeded, no_task); the task launches it in the task's worktree with
// the prompt as its last argument; a crash relaunches it with the prompt
// again (not a second delivery); its exit 0 ends the turn; the failed
// check's output is its next launch's argument; the check passes, the
// task is approved and lands, and the replica is parked again.
func TestExecTaskThroughToLanding(t *testing.T) {
	t.Parallel()
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	crashed := filepath.Join(t.TempDir(), "crashed")
	e.extraEnv = append(e.extraEnv, "CRASHED="+crashed)
	e.start()
	e.must("apply", "-f", e.writeRoles("exec-tasks.toml", fmt.Sprintf(`
[[role]]
name = "headless"
replicas = 1
command = ["sh", "-c", %q, "agent"]
workdir = %q
runtime = "exec"
tasks = true
check = ["sh", "-c", "test $(wc -l < WORK.md) -ge 2"]
restart = { policy = "on-failure" }
`, execAgent, repo)))
	parked := func() bool {
		v, ok := e.session("headless-0")
		return ok && v.State == herd.StateSucceeded && v.Exit != nil && v.Exit.Reason == herd.ReasonNoTask
	}
	e.waitFor("headless-0 parked (no task)", 20*time.Second, parked)
	if _, err := os.Stat(crashed); err == nil {
		t.Fatal("expected nothing run by a replica with no task")
	}

	// A prompt the agent would read as an option is refused.
	if _, stderr, code := e.herd("task", "add", "headless", "--", "- fix X"); code == 0 || !strings.Contains(stderr, "read it as an option") {
		t.Errorf("[option] expected a prompt starting with - refused, got exit %d: %s", code, stderr)
	}
	// A prompt over the kernel's limit of one argument is refused.
	if _, stderr, code := e.herdIn(strings.Repeat("x", herd.MaxExecTurn+1), "task", "add", "headless", "-"); code == 0 || !strings.Contains(stderr, "as an argument") {
		t.Errorf("[oversized] expected a prompt over %d bytes refused for an exec role, got exit %d: %s", herd.MaxExecTurn, code, stderr)
	}
	id := strings.TrimSpace(e.must("task", "add", "headless", "--title", "greet", "add a greeting"))
	task := e.waitTask(id, herd.TaskReview, 60*time.Second)
	if task.Commits != 2 || task.Attempts != 1 || task.Session != "headless-0" {
		t.Errorf("[review] expected 2 commits on headless-0 after 1 check failure sent, got %+v", task)
	}
	wt := filepath.Join(repo, ".herd", "worktrees", id)
	work, err := os.ReadFile(filepath.Join(wt, "WORK.md"))
	if err != nil || string(work) != "add a greeting\nFix the cause and commit the fix on this branch.\n" {
		t.Errorf("[work] expected the prompt, then the check's failure, each a launch's argument, got %q (%v)", work, err)
	}
	// Each launch ran in the task's worktree, the last argument its turn:
	// the prompt, the prompt again (the crash relaunch by the restart
	// policy), then the check's failure after the prompt (this agent's
	// conversation is not continued: it is told the task again).
	var turns []string
	for _, ev := range e.events("--session", "headless-0", "--kind", herd.EventRestarted) {
		argv, _ := ev.Data["argv"].([]any)
		if ev.Data["worktree"] != wt || len(argv) != 5 {
			t.Errorf("[launch] expected a launch in %s with the turn as its last argument, got %+v", wt, ev.Data)
			continue
		}
		turns = append(turns, fmt.Sprintf("%v: %s", ev.Data["restarts"], strings.ReplaceAll(fmt.Sprint(argv[4]), "\n", "|")))
	}
	if want := []string{"0: add a greeting", "1: add a greeting", "0: add a greeting||The check of task " + id}; len(turns) != 3 || turns[0] != want[0] || turns[1] != want[1] || !strings.HasPrefix(turns[2], want[2]) {
		t.Errorf("[turns] expected (restarts: turn) %q, got %q", want, turns)
	}
	if crashes := e.events("--session", "headless-0", "--kind", herd.EventCrashed); len(crashes) != 1 {
		t.Errorf("[crash] expected the first run's one crash, got %d", len(crashes))
	}

	e.must("task", "approve", id)
	task = e.waitTask(id, herd.TaskLanded, 60*time.Second)
	if b, err := os.ReadFile(filepath.Join(repo, "WORK.md")); err != nil || string(b) != string(work) {
		t.Errorf("[landed] expected the work on main's checkout, got %q (%v)", b, err)
	}
	e.waitFor("headless-0 parked again after the landing", 20*time.Second, parked)
	var kinds []string
	e.waitFor("the task's events", 10*time.Second, func() bool {
		kinds = taskKinds(e.events(), id)
		return slices.Contains(kinds, herd.EventTaskLanded)
	})
	// Its whole story, its replica's launches too, through the task index.
	story := e.must("events", "--task", id, "--limit", "0")
	for _, want := range []string{herd.EventTaskQueued, herd.EventRestarted, herd.EventTaskChecked, herd.EventTaskLanded} {
		if !strings.Contains(story, want) {
			t.Errorf("[events --task] expected %s in the task's story, got:\n%s", want, story)
		}
	}
	if strings.Contains(story, herd.ReasonNoTask) {
		t.Errorf("[events --task] expected only the task's events, got the replica's parking:\n%s", story)
	}
	if _, stderr, code := e.herd("events", "--task", "7"); code == 0 || !strings.Contains(stderr, "not a task id") {
		t.Errorf("[events --task 7] expected a refusal, got %d %q", code, stderr)
	}
	if n := strings.Count(strings.Join(kinds, " "), herd.EventTaskDelivered); n != 1 {
		t.Errorf("[delivered] expected the prompt delivered once (a crash relaunch carries it, it is not sent again), got %d in %v", n, kinds)
	}
}
