package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

const fastRestart = `
[restart]
initial_backoff = "100ms"
max_backoff = "1s"
max_restarts = 3
`

// TestCrashLoopBacksOffThenFails: a command that exits 1 after 100 ms is
// relaunched with doubling gaps, then failed at max_restarts.
func TestCrashLoopBacksOffThenFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
[restart]
initial_backoff = "400ms"
max_backoff = "2s"
max_restarts = 3
`)
	e.start()
	e.must("run", "flaky", "--runtime", "exec", "--", "sh", "-c", "sleep 0.1; exit 1")

	// restarts grows while we watch, then the slot fails.
	seen := map[int]bool{}
	e.waitFor("flaky-0 to fail", 20*time.Second, func() bool {
		v, ok := e.session("flaky-0")
		if ok {
			seen[v.Restarts] = true
		}
		return ok && v.State == herd.StateFailed
	})
	v, _ := e.session("flaky-0")
	if v.Restarts != 3 || v.Exit == nil || v.Exit.Code == nil || *v.Exit.Code != 1 {
		t.Fatalf("expected failed after 3 restarts with exit code 1, got restarts %d exit %+v", v.Restarts, v.Exit)
	}
	if len(seen) < 3 {
		t.Errorf("expected to watch restarts grow, saw only %v", seen)
	}

	events := e.events("--session", "flaky-0")
	if got := count(events, herd.EventCrashed); got != 4 {
		t.Errorf("expected 4 crashes (3 relaunches + the final one), got %d", got)
	}
	if got := count(events, herd.EventSpawned) + count(events, herd.EventRestarted); got != 4 {
		t.Errorf("expected 4 launches in all, got %d", got)
	}
	if got := count(events, herd.EventFailed); got != 1 {
		t.Errorf("expected one failed event, got %d", got)
	}
	// Each relaunch waited its backoff: 400ms, 800ms, 1.6s.
	want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}
	var crashedAt time.Time
	i := 0
	for _, ev := range events {
		switch ev.Kind {
		case herd.EventCrashed:
			crashedAt = ev.Time
		case herd.EventRestarted:
			gap := ev.Time.Sub(crashedAt)
			if i < len(want) && gap < want[i] {
				t.Errorf("[relaunch %d] expected a gap of at least %v, got %v", i+1, want[i], gap)
			}
			if i < len(want) && gap > want[i]+time.Second {
				t.Errorf("[relaunch %d] expected a gap close to %v, got %v", i+1, want[i], gap)
			}
			i++
		}
	}
	if i != 3 {
		t.Errorf("expected 3 relaunches, got %d", i)
	}

	// Nothing relaunches a failed slot on its own.
	time.Sleep(500 * time.Millisecond)
	if got := count(e.events("--session", "flaky-0"), herd.EventRestarted); got != 3 {
		t.Errorf("expected no relaunch after failed, got %d relaunches", got)
	}
	// Until a person acts: scale re-arms it.
	e.must("scale", "flaky", "--replicas", "1")
	e.waitFor("a relaunch after scale", 5*time.Second, func() bool {
		return count(e.events("--session", "flaky-0"), herd.EventRestarted) > 3
	})
}

// TestSegvIsACrashWithSignal: kill -SEGV of a healthy agent → crashed with
// signal 11, then a new incarnation.
func TestSegvIsACrashWithSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "good", "--runtime", "exec", "--", bin, "sim", "--interval", "200ms")
	v := e.waitState("good-0", herd.StateRunning, 10*time.Second)
	e.waitOutput("good-0")
	if err := syscall.Kill(v.PID, syscall.SIGSEGV); err != nil {
		t.Fatal(err)
	}
	e.waitFor("a crash with signal 11", 5*time.Second, func() bool {
		for _, ev := range e.events("--session", "good-0", "--kind", herd.EventCrashed) {
			if sig, ok := ev.Data["signal"].(float64); ok && sig == 11 {
				return true
			}
		}
		return false
	})
	e.waitFor("a new incarnation", 5*time.Second, func() bool {
		n, ok := e.session("good-0")
		return ok && n.State == herd.StateRunning && n.Incarnation != v.Incarnation && n.PID != v.PID
	})
	if n, _ := e.session("good-0"); n.Restarts != 1 {
		t.Errorf("expected restarts 1, got %d", n.Restarts)
	}
}

// TestDaemonRestartReadoptsAndKeepsBackoff: SIGKILL the daemon and start it
// again: agents are re-adopted (same pid, not killed, not duplicated) and
// a slot in backoff keeps its backoff.
func TestDaemonRestartReadoptsAndKeepsBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, `
[restart]
initial_backoff = "1m"
max_backoff = "5m"
`)
	e.start()
	e.must("run", "steady", "--runtime", "exec", "--", "sleep", "300")
	e.must("run", "dies", "--runtime", "exec", "--", "sh", "-c", "exit 3")
	steady := e.waitState("steady-0", herd.StateRunning, 10*time.Second)
	dies := e.waitState("dies-0", herd.StateBackoff, 10*time.Second)

	e.kill(syscall.SIGKILL)
	if syscall.Kill(steady.PID, 0) != nil {
		t.Fatal("the agent died with the daemon")
	}
	e.start()
	e.waitFor("steady-0 adopted", 10*time.Second, func() bool {
		return count(e.events("--session", "steady-0"), herd.EventAdopted) == 1
	})
	after, _ := e.session("steady-0")
	if after.PID != steady.PID || after.Incarnation != steady.Incarnation || after.State != herd.StateRunning {
		t.Errorf("expected the same agent re-adopted (pid %d, %s), got pid %d, %s, %s", steady.PID, steady.Incarnation, after.PID, after.Incarnation, after.State)
	}
	if n := len(e.agentPIDs()); n != 1 {
		t.Errorf("expected exactly one agent process, got %d", n)
	}
	d, _ := e.session("dies-0")
	if d.State != herd.StateBackoff || d.BackoffUntil == nil || !d.BackoffUntil.Equal(*dies.BackoffUntil) || d.Restarts != 1 {
		t.Errorf("expected backoff kept until %v with restarts 1, got %s until %v restarts %d", dies.BackoffUntil, d.State, d.BackoffUntil, d.Restarts)
	}
	if got := count(e.events("--session", "steady-0"), herd.EventSpawned); got != 1 {
		t.Errorf("expected one spawn of steady-0, got %d", got)
	}
}

// TestNeverPolicyLaunchesNothing: policy never fails the slot on a crash
// and launches no replacement; on-failure with exit 0 succeeds.
func TestNeverPolicyLaunchesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "once", "--runtime", "exec", "--restart", "never", "--", "sh", "-c", "exit 2")
	e.must("run", "job", "--runtime", "exec", "--restart", "on-failure", "--", "true")
	e.waitState("once-0", herd.StateFailed, 10*time.Second)
	e.waitState("job-0", herd.StateSucceeded, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	for _, name := range []string{"once-0", "job-0"} {
		if n := count(e.events("--session", name), herd.EventRestarted); n != 0 {
			t.Errorf("[%s] expected no relaunch, got %d", name, n)
		}
	}
	if len(e.sessions()) != 2 {
		t.Errorf("expected no replacement slot, got %d sessions", len(e.sessions()))
	}
}

// TestBadConfigNamesKeyAndLine: a bad config exits non-zero naming the key
// and its line, for both apply and the daemon.
func TestBadConfigNamesKeyAndLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	bad := filepath.Join(e.dir, "bad.toml")
	os.WriteFile(bad, []byte("[probe]\ninterval = \"1s\"\n\n[[role]]\nname = \"w\"\ncommand = [\"claude\"]\nrestart = { policy = \"sometimes\" }\n"), 0o600)
	_, errs, code := e.herd("apply", "-f", bad)
	if code == 0 || !strings.Contains(errs, "bad.toml:7") || !strings.Contains(errs, "restart.policy") {
		t.Errorf("expected a non-zero exit naming restart.policy at line 7, got %d: %q", code, errs)
	}
	_, errs, code = e.herd("daemon", "--config", bad)
	if code == 0 || !strings.Contains(errs, "bad.toml:7") {
		t.Errorf("expected the daemon to refuse the file, got %d: %q", code, errs)
	}
}

// TestNoDaemonSaysHowToStart: with no daemon, one line says so and how.
func TestNoDaemonSaysHowToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	_, errs, code := e.herd("get", "sessions")
	if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "herd daemon") {
		t.Errorf("expected one line naming 'herd daemon', got %d: %q", code, errs)
	}
}

// TestSecondDaemonRefused: a live daemon on the socket refuses another.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.start()
	_, errs, code := e.herd("daemon")
	if code == 0 || !strings.Contains(errs, "already") {
		t.Errorf("expected a second daemon refused, got %d: %q", code, errs)
	}
	info, err := os.Stat(e.socket)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("expected the socket with mode 0600, got %v %v", info.Mode(), err)
	}
}
