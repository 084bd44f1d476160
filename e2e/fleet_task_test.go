package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestFleetTaskSurvivesHostLoss: a task of a placed role (hosts b then
// a, failover) runs on b's replica; b is lost (its daemon and its tmux
// server killed) while the agent works on it. Its slot moves to a once
// b's lease has ended, and the task goes with it: a relaunches the
// replica in the task's worktree and types the prompt again (the
// conversation was b's), never while b's agent could still work; the
// turn's end publishes the branch to the repository's remote, the check
// passes, and the task lands. a never took the task from b while b held
// it, and b back changes nothing.
func TestFleetTaskSurvivesHostLoss(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	dsn := startPG(t)
	a := newFleetEnv(t, "a", dsn, `lease = "2s"`)
	b := newFleetEnv(t, "b", dsn, `lease = "2s"`)
	// b's agents take the prompt and work on it without end (no --work).
	b.extraEnv = append(b.extraEnv, "HERD_TEST_STALL=1")
	a.start()
	b.start()

	origin := filepath.Join(t.TempDir(), "origin.git")
	src := gitRepo(t)
	git(t, src, "clone", "-q", "--bare", src, origin)
	repo := filepath.Join(t.TempDir(), "app")
	git(t, filepath.Dir(repo), "clone", "-q", origin, repo)
	script := fmt.Sprintf(`if [ -n "$HERD_TEST_STALL" ]; then exec %[1]q sim --interval 300ms --wait-input --hooks SessionStart; fi
exec %[1]q sim --interval 300ms --wait-input --work --hooks SessionStart`, bin)
	a.must("apply", "-f", writeRoles(t, fmt.Sprintf(`
[[role]]
name = "fw"
replicas = 1
command = ["sh", "-c", %q]
workdir = %q
runtime = "tmux"
tasks = true
check = ["sh", "-c", "test -s WORK.md"]
hosts = ["b", "a"]
failover = true
`, script, repo)))
	a.waitFor("fw-0 running on b", 30*time.Second, func() bool { return hostsOf(a, "fw", herd.StateRunning)["fw-0"] == "b" })

	id := strings.TrimSpace(a.must("task", "add", "fw", "--title", "greet", "add a greeting"))
	a.waitFor("the task working on b", 30*time.Second, func() bool {
		tk := a.task(id)
		return tk.State == herd.TaskWorking && tk.Session == "fw-0"
	})
	// Host b lost: its daemon and its agents.
	b.kill(syscall.SIGKILL)
	exec.Command("tmux", "-L", b.tmuxSock, "kill-server").Run()
	lost := time.Now()

	tk := a.waitTask(id, herd.TaskReview, 90*time.Second)
	t.Logf("the task in review %s after b was lost", time.Since(lost).Round(time.Millisecond))
	if v, _ := a.session("fw-0"); v.Host != "a" || tk.Session != "fw-0" || tk.Commits != 1 {
		t.Errorf("expected the task on fw-0, moved to a, with a's commit, got %+v on %s", tk, v.Host)
	}
	var delivered []herd.Event
	for _, ev := range a.events("--kind", herd.EventTaskDelivered) {
		if ev.Data["task"] == id {
			delivered = append(delivered, ev)
		}
	}
	if len(delivered) != 2 || delivered[0].Host != "b" || delivered[1].Host != "a" || delivered[1].Reason != "again" {
		t.Fatalf("expected the prompt delivered on b, then again on a, got %+v", delivered)
	}
	if d := delivered[1].Time.Sub(lost); d < 2*time.Second {
		t.Errorf("expected the second delivery only after b's lease (2s) ended, got %s after the loss", d)
	}
	for _, ev := range a.events() {
		if ev.Data["task"] == id && ev.Kind == herd.EventTaskNeedsYou {
			t.Errorf("expected the task never taken from b while b held it, got %+v", ev)
		}
	}
	// The turn's end published the branch for the fleet.
	if got, want := strings.TrimSpace(git(t, origin, "rev-parse", "refs/heads/herd/"+id)), strings.TrimSpace(git(t, repo, "rev-parse", "herd/"+id)); got != want {
		t.Errorf("[published] expected origin's herd/%s at %s, got %s", id, want, got)
	}

	b.start()
	a.must("task", "approve", id)
	tk = a.waitTask(id, herd.TaskLanded, 60*time.Second)
	if got := strings.TrimSpace(git(t, repo, "rev-parse", "main")); got != tk.Landed {
		t.Errorf("[landed] expected main at %s, got %s", tk.Landed, got)
	}
	n := 0
	for _, ev := range b.events("--kind", herd.EventTaskDelivered) {
		if ev.Data["task"] == id {
			n++
		}
	}
	if n != 2 {
		t.Errorf("expected no delivery after b came back, got %d in all", n)
	}
}
