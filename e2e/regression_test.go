package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// TestAgentDiesUnderWrapper: the launch shape that hid deaths in the
// field — a shell that runs the agent, then lives on. In both runtimes the
// agent's death is recorded while the shell lives (with the agent's own
// signal where the kernel reports it), and the leftover (the shell, the
// pane) is taken down; the shell becoming a process of the agent's name
// is no relaunch. Regression (exec): an agent found
// under a wrapper got no watcher of its own, so its death went unnoticed.
func TestAgentDiesUnderWrapper(t *testing.T) {
	t.Parallel()
	for _, rt := range []string{herd.RuntimeExec, herd.RuntimeTmux} {
		t.Run(rt, func(t *testing.T) {
			if rt == herd.RuntimeTmux {
				hasTmux(t)
			}
			e := newEnv(t, fastRestart)
			e.start()
			// The agent is the `sleep 999`; afterwards the shell becomes a
			// `sleep 888` with the same pid.
			e.must("run", "w", "--runtime", rt, "--agent-process", "sleep", "--", "sh", "-c", "sleep 999; exec sleep 888")
			var v api.SessionView
			e.waitFor("the agent (not the wrapper) identified", 10*time.Second, func() bool {
				v, _ = e.session("w-0")
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(v.PID) + "/cmdline")
				return v.State == herd.StateRunning && strings.HasPrefix(string(b), "sleep\x00999")
			})
			syscall.Kill(v.PID, syscall.SIGKILL)
			e.waitFor("the agent's death", 5*time.Second, func() bool {
				ev := e.events("--session", "w-0", "--kind", herd.EventCrashed)
				return len(ev) == 1 && e.agentKilled(ev[0], syscall.SIGKILL)
			})
			e.waitFor("the leftover wrapper gone", 10*time.Second, func() bool {
				out, _ := exec.Command("pgrep", "-f", "^sleep 888").Output()
				return len(strings.TrimSpace(string(out))) == 0
			})
		})
	}
}

// TestLeftoverKillSparesReplacement: regression — killing what was left of
// a dead agent (a wrapper ignoring SIGTERM, up to the grace period) killed
// the replacement's tmux session of the same name.
func TestLeftoverKillSparesReplacement(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "w", "--agent-process", "sleep", "--", "sh", "-c", "trap '' TERM; sleep 999; exec sleep 888")
	v := e.waitState("w-0", herd.StateRunning, 10*time.Second)
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("a replacement", 5*time.Second, func() bool {
		n, ok := e.session("w-0")
		return ok && n.State == herd.StateRunning && n.Incarnation != v.Incarnation
	})
	// Past the daemon's stop grace (5s) and the leftover's SIGKILL.
	time.Sleep(6 * time.Second)
	if n := count(e.events("--session", "w-0", "--kind", herd.EventCrashed), herd.EventCrashed); n != 1 {
		t.Errorf("expected only the first crash, got %d (the replacement was killed)", n)
	}
}

// TestDeleteRoleLeavesNothingRunning: regression — deleting a role let the
// reconciler relaunch stopped slots, then forgot the running agents.
func TestDeleteRoleLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "d", "--runtime", "exec", "--replicas", "2", "--", "sleep", "300")
	e.waitState("d-0", herd.StateRunning, 10*time.Second)
	e.waitState("d-1", herd.StateRunning, 10*time.Second)
	out := e.must("delete", "role", "d")
	if !strings.Contains(out, "deleted (2 session(s) stopped)") {
		t.Errorf("unexpected output %q", out)
	}
	time.Sleep(1500 * time.Millisecond)
	if pids := e.agentPIDs(); len(pids) != 0 {
		t.Errorf("expected no agent left running, got pids %v", pids)
	}
	if n := len(e.sessions()); n != 0 {
		t.Errorf("expected no sessions left, got %d", n)
	}
	if roles := e.must("get", "roles"); strings.Contains(roles, "\nd ") {
		t.Errorf("expected the role gone, got:\n%s", roles)
	}
}

// TestStopSurvivesClientCancel: regression — Ctrl-C on `herd stop` cut the
// grace period short, turning the stop into a SIGKILL, a crash and a restart.
func TestStopSurvivesClientCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	// Dies 1s after SIGTERM: the stop spans the client's lifetime.
	e.must("run", "slow", "--runtime", "exec", "--", "sh", "-c", "trap 'sleep 1; exit 0' TERM; while :; do sleep 0.1; done")
	v := e.waitState("slow-0", herd.StateRunning, 10*time.Second)
	cmd := exec.Command(bin, "stop", "slow-0")
	cmd.Env = e.environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt the client only once the stop is under way: the agent's
	// TERM trap runs its `sleep 1`.
	e.waitFor("the agent to get SIGTERM", 10*time.Second, func() bool {
		out, _ := exec.Command("pgrep", "-P", strconv.Itoa(v.PID), "-fx", "sleep 1").Output()
		return len(strings.TrimSpace(string(out))) > 0
	})
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	e.waitState("slow-0", herd.StateStopped, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	events := e.events("--session", "slow-0")
	if n := count(events, herd.EventCrashed) + count(events, herd.EventRestarted); n != 0 {
		t.Errorf("expected a clean stop, got %d crash/restart events", n)
	}
	if n := count(events, herd.EventStopped); n != 1 {
		t.Errorf("expected one stopped event, got %d", n)
	}
}

// TestUnfinishedSweepIsRedone: regression — a daemon that died after
// claiming the boot's sweep row but before finishing left old incarnations
// unswept for good.
func TestUnfinishedSweepIsRedone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "a", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("a-0", herd.StateRunning, 10*time.Second)
	e.kill(syscall.SIGTERM)
	for _, pid := range e.agentPIDs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	newBoot := "00000000-0000-4000-8000-000000000003"
	e.setBootID(newBoot)
	// The row a sweep that died midway leaves behind.
	st, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	host := hostname(t)
	err = st.Update(context.Background(), func(tx store.Tx) error { return tx.PutKV("boot/"+host+"/"+newBoot, "started") })
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitState("a-0", herd.StateRunning, 10*time.Second)
	events := e.events("--session", "a-0")
	if count(events, herd.EventStopped) != 1 || count(events, herd.EventResumed) != 1 || count(events, herd.EventCrashed) != 0 {
		t.Errorf("expected one stopped (reboot) and one resumed, no crash; got %d stopped, %d resumed, %d crashed",
			count(events, herd.EventStopped), count(events, herd.EventResumed), count(events, herd.EventCrashed))
	}
}

// TestLaunchNeverKillsForeignSession: regression — a launch killed any
// tmux session with the slot's name, even one herd did not start.
func TestLaunchNeverKillsForeignSession(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	if out, err := exec.Command("tmux", "-L", e.tmuxSock, "new-session", "-d", "-s", "w-0", "sleep", "300").CombinedOutput(); err != nil {
		t.Fatalf("new-session: %v %s", err, out)
	}
	pane, _ := exec.Command("tmux", "-L", e.tmuxSock, "list-panes", "-t", "=w-0:", "-F", "#{pane_pid}").Output()
	e.must("run", "w", "--", "sleep", "300")
	e.waitFor("the launch refused", 5*time.Second, func() bool {
		for _, ev := range e.events("--session", "w-0", "--kind", herd.EventExited) {
			if ev.Reason == herd.ReasonLaunchFailed {
				return true
			}
		}
		return false
	})
	after, err := exec.Command("tmux", "-L", e.tmuxSock, "list-panes", "-t", "=w-0:", "-F", "#{pane_pid}").Output()
	if err != nil || string(after) != string(pane) {
		t.Errorf("expected the foreign session untouched (pane %q), got %q %v", pane, after, err)
	}
}

// TestScaleDownStopsAtOnce: regression — the reconciler ran its stops one
// after another on its own loop, so a scale-down of agents that take their
// time on SIGTERM held every other stop, and every launch of every other
// role, for the sum of their exits. Stops now run side by side, off the loop.
func TestScaleDownStopsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	// Each agent takes 3s to exit after SIGTERM.
	e.must("run", "slow", "--runtime", "exec", "--replicas", "3", "--", "sh", "-c", "trap 'sleep 3; exit 0' TERM; while :; do sleep 0.1; done")
	for i := range 3 {
		e.waitState(fmt.Sprintf("slow-%d", i), herd.StateRunning, 10*time.Second)
	}
	e.must("scale", "slow", "--replicas", "0")
	e.must("run", "other", "--runtime", "exec", "--", "sleep", "300")
	for i := range 3 {
		e.waitState(fmt.Sprintf("slow-%d", i), herd.StateStopped, 20*time.Second)
	}
	var first, last time.Time
	for _, ev := range e.events("--kind", herd.EventStopped) {
		if !strings.HasPrefix(ev.Session, "slow-") {
			continue
		}
		if first.IsZero() || ev.Time.Before(first) {
			first = ev.Time
		}
		if ev.Time.After(last) {
			last = ev.Time
		}
	}
	// One after another, the stops would end about 3s apart.
	if spread := last.Sub(first); spread > 2*time.Second {
		t.Errorf("the three stops ended %v apart: they ran one after another", spread)
	}
	spawned := e.events("--session", "other-0", "--kind", herd.EventSpawned)
	if len(spawned) == 0 || !spawned[0].Time.Before(first) {
		t.Errorf("other-0 launched at %v, not before the slow stops ended (%v): the launch waited for them", spawned, first)
	}
}

// TestDaemonShutdownFinishesStops: regression — a stop under way when the
// daemon was told to shut down had its grace period cut short (an instant
// SIGKILL), was never recorded, and the next daemon counted the death as
// a crash and relaunched the agent. A stop, once begun, runs to its end,
// and the daemon waits for it.
func TestDaemonShutdownFinishesStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	// Each agent takes 2s to exit after SIGTERM, and says it exited cleanly.
	e.must("run", "slow", "--runtime", "exec", "--replicas", "2", "--", "sh", "-c", "trap 'sleep 2; exit 0' TERM; while :; do sleep 0.1; done")
	var pids []int
	for i := range 2 {
		pids = append(pids, e.waitState(fmt.Sprintf("slow-%d", i), herd.StateRunning, 10*time.Second).PID)
	}
	// slow-1 by a scale-down (the reconciler's stop), slow-0 by the user.
	e.must("scale", "slow", "--replicas", "1")
	user := exec.Command(bin, "stop", "slow-0")
	user.Env = e.environ()
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	defer user.Wait()
	e.waitFor("both agents to get SIGTERM", 10*time.Second, func() bool {
		for _, pid := range pids {
			out, _ := exec.Command("pgrep", "-P", strconv.Itoa(pid), "-fx", "sleep 2").Output()
			if len(strings.TrimSpace(string(out))) == 0 {
				return false
			}
		}
		return true
	})
	began := time.Now()
	e.kill(syscall.SIGTERM)
	if waited := time.Since(began); waited < time.Second {
		t.Errorf("the daemon exited %v after SIGTERM, before its stops ended", waited)
	}
	e.start()
	time.Sleep(time.Second) // a prober tick or more
	for i := range 2 {
		name := fmt.Sprintf("slow-%d", i)
		v, _ := e.session(name)
		events := e.events("--session", name)
		if v.State != herd.StateStopped || count(events, herd.EventStopped) != 1 || count(events, herd.EventCrashed) != 0 {
			t.Errorf("%s: expected stopped with one stopped event and no crash, got %s with %d stopped, %d crashed", name, v.State, count(events, herd.EventStopped), count(events, herd.EventCrashed))
		}
	}
}

// TestExecWrapperExitsAgentLivesOn: regression — in the exec runtime, the
// launched wrapper's exit was recorded as the agent's death although the
// agent found under it (started in the background) lived on: a crash, and
// a second copy launched beside the first. The agent's own death counts.
func TestExecWrapperExitsAgentLivesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "bg", "--runtime", "exec", "--agent-process", "tail", "--", "sh", "-c", "tail -f /dev/null & sleep 2; exit 3")
	var v api.SessionView
	e.waitFor("the backgrounded agent identified", 10*time.Second, func() bool {
		v, _ = e.session("bg-0")
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(v.PID) + "/cmdline")
		return v.State == herd.StateRunning && strings.HasPrefix(string(b), "tail\x00")
	})
	e.waitFor("the wrapper to exit", 10*time.Second, func() bool {
		out, _ := exec.Command("pgrep", "-fx", "sh -c tail -f /dev/null & sleep 2; exit 3").Output()
		return len(strings.TrimSpace(string(out))) == 0
	})
	time.Sleep(time.Second)
	if n, _ := e.session("bg-0"); n.State != herd.StateRunning || n.PID != v.PID || n.Restarts != 0 {
		t.Fatalf("after the wrapper exited: got %s pid %d restarts %d, want running pid %d restarts 0", n.State, n.PID, n.Restarts, v.PID)
	}
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("the agent's death recorded", 5*time.Second, func() bool {
		ev := e.events("--session", "bg-0", "--kind", herd.EventCrashed)
		return len(ev) == 1 && e.agentKilled(ev[0], syscall.SIGKILL)
	})
}

// agentKilled reports whether a crashed event tells an agent under a
// wrapper killed by sig: by that signal where the kernel reports the exits
// of processes that are not the daemon's children (the proc connector),
// process_gone where the daemon logged it cannot listen to them.
func (e *env) agentKilled(ev herd.Event, sig syscall.Signal) bool {
	log, _ := os.ReadFile(e.logPath)
	if strings.Contains(string(log), "exit statuses of agents under launchers are read from /proc only") {
		return ev.Reason == herd.ReasonProcessGone || ev.Reason == herd.ReasonSignal && crashSignal(ev) == int(sig)
	}
	return ev.Reason == herd.ReasonSignal && crashSignal(ev) == int(sig)
}
