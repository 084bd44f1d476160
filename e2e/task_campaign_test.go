package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestTaskCampaign puts tasks through simulated agents while agents are
// SIGKILLed, their tmux server is killed (every agent at once) and the
// daemon is SIGKILLed and started again, approving each
// task that reaches review: every task lands, once; no task is held by
// two replicas, nor a replica by two tasks, at once; nothing lands
// without a passing check; every task's work is on main (no commit
// dropped). HERD_CAMPAIGN=full runs 200 tasks through 10 agents.
func TestTaskCampaign(t *testing.T) {
	hasTmux(t)
	tasks, replicas, daemonKills, tmuxKills := campaign(12, 200), campaign(4, 10), campaign(2, 8), campaign(1, 4)
	repo := gitRepo(t)
	e := newEnv(t, "[restart]\ninitial_backoff = \"100ms\"\nmax_backoff = \"1s\"\nmax_restarts = 0\n")
	e.start()
	e.must("apply", "-f", e.writeRoles("tasks.toml", fmt.Sprintf(`
[[role]]
name = "worker"
replicas = %d
command = [%q, "sim", "--interval", "300ms", "--wait-input", "--work", "--work-per-branch", "--hooks", "SessionStart"]
workdir = %q
runtime = "tmux"
tasks = true
check = ["sh", "-c", "ls work/*.md"]
`, replicas, bin, repo)))
	for i := range tasks {
		e.must("task", "add", "worker", fmt.Sprintf("job-%d do the work", i))
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	deadline := time.Now().Add(time.Duration(campaign(150, 1500)) * time.Second)
	nextAgentKill := time.Now().Add(2 * time.Second)
	nextDaemonKill := time.Now().Add(6 * time.Second)
	nextTmuxKill := time.Now().Add(4 * time.Second)
	agentKills, killedDaemon, killedTmux, retried := 0, 0, 0, 0
	for {
		ts := e.allTasks()
		landed := 0
		for _, task := range ts {
			switch task.State {
			case herd.TaskLanded:
				landed++
			case herd.TaskReview:
				if task.ApprovedBy == "" {
					e.herd("task", "approve", task.ID) // a race with the daemon's kill is retried next turn
				}
			case herd.TaskNeedsYou, herd.TaskFailed:
				// A person looks and sends it again (a kill at the
				// wrong moment: counted, never lost).
				t.Logf("%s %s (%s): retried; %s", task.ID, task.State, task.Reason, lastTaskEvent(e, task.ID))
				e.herd("task", "retry", task.ID)
				retried++
			}
		}
		if landed == tasks {
			break
		}
		if time.Now().After(deadline) {
			for _, task := range ts {
				if task.State != herd.TaskLanded {
					t.Logf("not landed: %s %s %s (%s) on %s", task.ID, task.State, task.Title, task.Reason, task.Session)
				}
			}
			t.Fatalf("%d of %d tasks landed before the deadline", landed, tasks)
		}
		now := time.Now()
		if now.After(nextAgentKill) {
			var live []int
			for _, s := range e.sessions() {
				if s.State == herd.StateRunning && s.PID > 0 {
					live = append(live, s.PID)
				}
			}
			if len(live) > 0 {
				if syscall.Kill(live[rng.IntN(len(live))], syscall.SIGKILL) == nil {
					agentKills++
				}
			}
			nextAgentKill = now.Add(time.Duration(1500+rng.IntN(2000)) * time.Millisecond)
		}
		if killedDaemon < daemonKills && now.After(nextDaemonKill) {
			e.kill(syscall.SIGKILL)
			e.start()
			killedDaemon++
			nextDaemonKill = now.Add(time.Duration(8+rng.IntN(8)) * time.Second)
		}
		if killedTmux < tmuxKills && now.After(nextTmuxKill) {
			// Every agent at once, mid-turn or not.
			if exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run() == nil {
				killedTmux++
			}
			nextTmuxKill = now.Add(time.Duration(15+rng.IntN(15)) * time.Second)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("%d tasks through %d agents: %d agent SIGKILLs, %d tmux server kills, %d daemon SIGKILLs, %d retried",
		tasks, replicas, agentKills, killedTmux, killedDaemon, retried)
	if killedTmux == 0 {
		t.Errorf("expected the tmux server killed at least once")
	}

	checkTaskStories(t, e.events("--limit", "0"), tasks, repo, nil) // every event: a full campaign writes many more than the default 1000
}

// checkTaskStories checks a task campaign's event log: no task assigned
// while held, nor to a replica holding another; each of the tasks landed
// once, after a passing check; each one's work on main (the file of its
// branch, with its prompt). Each event of a task is also handed to also
// (nil: none).
func checkTaskStories(t *testing.T, evs []herd.Event, tasks int, repo string, also func(id string, ev herd.Event)) {
	t.Helper()
	landedOnce := map[string]int{}
	passed := map[string]bool{}
	holder := map[string]string{}  // task -> session holding it
	holding := map[string]string{} // session -> task it holds
	for _, ev := range evs {
		id, _ := ev.Data["task"].(string)
		if id == "" {
			continue
		}
		if also != nil {
			also(id, ev)
		}
		switch ev.Kind {
		case herd.EventTaskAssigned:
			if s := holder[id]; s != "" {
				t.Errorf("%s assigned to %s while %s holds it", id, ev.Session, s)
			}
			if other := holding[ev.Session]; other != "" {
				t.Errorf("%s assigned to %s, which holds %s", id, ev.Session, other)
			}
			holder[id], holding[ev.Session] = ev.Session, id
		case herd.EventTaskLanded, herd.EventTaskCancelled, herd.EventTaskFailed, herd.EventTaskQueued:
			if s := holder[id]; s != "" && holding[s] == id {
				delete(holding, s)
			}
			delete(holder, id)
			if ev.Kind == herd.EventTaskLanded {
				landedOnce[id]++
				if !passed[id] {
					t.Errorf("%s landed without a passing check before it", id)
				}
			}
		case herd.EventTaskChecked:
			passed[id] = ev.Reason == "passed"
		}
	}
	for i := range tasks {
		id := herd.TaskID(int64(i + 1))
		if landedOnce[id] != 1 {
			t.Errorf("%s landed %d times", id, landedOnce[id])
		}
		// Its work is on main: the file of its branch, with its prompt.
		b, err := os.ReadFile(filepath.Join(repo, "work", "herd-"+id+".md"))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("job-%d do the work", i)) {
			t.Errorf("%s: expected its work on main, got %q (%v)", id, b, err)
		}
	}
}

// allTasks lists every task through the CLI (a daemon starting: none).
func (e *env) allTasks() []herd.Task {
	e.t.Helper()
	var ts []herd.Task
	out, _, code := e.herd("get", "tasks", "-o", "json")
	if code != 0 {
		return nil
	}
	if err := json.Unmarshal([]byte(out), &ts); err != nil {
		e.t.Fatalf("get tasks -o json: %v", err)
	}
	return ts
}

// lastTaskEvent is the message of the newest event of task id.
func lastTaskEvent(e *env, id string) string {
	evs := e.events("--task", id, "--limit", "1")
	if len(evs) == 0 {
		return ""
	}
	return evs[0].Kind + ": " + evs[0].Message + fmt.Sprint(evs[0].Data)
}
