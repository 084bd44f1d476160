package e2e

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestFleetTaskCampaign puts tasks through a placed task role on two
// hosts of one PostgreSQL (spread, failover) while one host after the
// other is lost — its daemon SIGKILLed and its tmux server killed — and
// brought back once its slots have moved: every task lands, once; no
// task is held by two replicas, nor a replica by two tasks, at once; a
// task's prompt is never typed on a host while another host's agent
// could still be on it; nothing lands without a passing check; every
// task's work is on main. HERD_CAMPAIGN=full runs 40 tasks through 6
// host losses.
func TestFleetTaskCampaign(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	tasks, losses := campaign(6, 40), campaign(2, 6)
	dsn := startPG(t)
	hosts := map[string]*env{}
	for _, h := range []string{"a", "b"} {
		hosts[h] = newFleetEnv(t, h, dsn, `lease = "2s"`)
		hosts[h].start()
	}
	a := hosts["a"]
	repo := gitRepo(t)
	a.must("apply", "-f", writeRoles(t, fmt.Sprintf(`
[[role]]
name = "fw"
replicas = 2
command = [%q, "sim", "--interval", "300ms", "--wait-input", "--work", "--work-per-branch", "--hooks", "SessionStart"]
workdir = %q
runtime = "tmux"
tasks = true
check = ["sh", "-c", "ls work/*.md"]
spread = true
failover = true
`, bin, repo)))
	a.waitFor("fw spread over a and b", 30*time.Second, func() bool {
		on := hostsOf(a, "fw", herd.StateRunning)
		return on["fw-0"] != "" && on["fw-1"] != "" && on["fw-0"] != on["fw-1"]
	})
	for i := range tasks {
		a.must("task", "add", "fw", fmt.Sprintf("job-%d do the work", i))
	}
	// An observer on whichever host is up.
	up := func() *env {
		for _, h := range []string{"a", "b"} {
			if hosts[h].daemon != nil {
				return hosts[h]
			}
		}
		t.Fatal("no host up")
		return nil
	}
	type loss struct {
		host string
		at   time.Time
	}
	var lost []loss
	next, victim := time.Now().Add(5*time.Second), "b"
	deadline := time.Now().Add(time.Duration(campaign(240, 1200)) * time.Second)
	for {
		e := up()
		ts := e.allTasks()
		landed := 0
		for _, task := range ts {
			switch task.State {
			case herd.TaskLanded:
				landed++
			case herd.TaskReview:
				if task.ApprovedBy == "" {
					e.herd("task", "approve", task.ID)
				}
			case herd.TaskNeedsYou, herd.TaskFailed:
				t.Logf("%s %s (%s): retried; %s", task.ID, task.State, task.Reason, lastTaskEvent(e, task.ID))
				e.herd("task", "retry", task.ID)
			}
		}
		if landed == tasks && len(ts) == tasks {
			break
		}
		if time.Now().After(deadline) {
			for _, task := range ts {
				if task.State != herd.TaskLanded {
					t.Logf("not landed: %s %s (%s) on %s", task.ID, task.State, task.Reason, task.Session)
				}
			}
			t.Fatalf("%d of %d tasks landed before the deadline", landed, tasks)
		}
		if len(lost) < losses && time.Now().After(next) {
			h := hosts[victim]
			h.kill(syscall.SIGKILL)
			exec.Command("tmux", "-L", h.tmuxSock, "kill-server").Run()
			lost = append(lost, loss{victim, time.Now()})
			other := map[string]string{"a": "b", "b": "a"}[victim]
			// Back once its slots have moved to the other host.
			hosts[other].waitFor(victim+"'s slots moved", 60*time.Second, func() bool {
				on := hostsOf(hosts[other], "fw", herd.StateRunning)
				return on["fw-0"] == other && on["fw-1"] == other
			})
			h.start()
			next, victim = time.Now().Add(8*time.Second), other
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("%d tasks through a fleet of two: %d hosts lost", tasks, len(lost))
	if len(lost) == 0 {
		t.Errorf("expected a host lost at least once")
	}

	deliveredOn := map[string]string{} // task -> the host it was last typed on
	checkTaskStories(t, up().events("--limit", "0"), tasks, repo, func(id string, ev herd.Event) {
		if ev.Kind != herd.EventTaskDelivered {
			return
		}
		// Typed on another host than before: only after that host was
		// lost and its lease (2s) ended.
		if prev := deliveredOn[id]; prev != "" && prev != ev.Host {
			ok := false
			for _, l := range lost {
				ok = ok || (l.host == prev && ev.Time.Sub(l.at) >= 2*time.Second)
			}
			if !ok {
				t.Errorf("%s typed on %s at %s after %s, which was not lost long enough before", id, ev.Host, ev.Time.Format(time.TimeOnly), prev)
			}
		}
		deliveredOn[id] = ev.Host
	})
}
