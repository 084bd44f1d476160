package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/proc"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// TestConcurrentStops: 20 `herd stop X` processes at once → exactly one
// stopped event, the agent stopped once, every caller exits cleanly.
func TestConcurrentStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "x", "--runtime", "exec", "--", "sleep", "300")
	v := e.waitState("x-0", herd.StateRunning, 10*time.Second)

	var wg sync.WaitGroup
	results := make([]string, 20)
	codes := make([]int, 20)
	for i := range results {
		wg.Go(func() {
			cmd := exec.Command(bin, "stop", "x-0")
			cmd.Env = e.environ()
			out, err := cmd.CombinedOutput()
			results[i] = strings.TrimSpace(string(out))
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i] = -1
			}
		})
	}
	wg.Wait()
	stopped, already := 0, 0
	for i, r := range results {
		if codes[i] != 0 {
			t.Errorf("caller %d exited %d: %s", i, codes[i], r)
		}
		switch r {
		case "session x-0 stopped":
			stopped++
		case "session x-0 already stopped":
			already++
		default:
			t.Errorf("caller %d: unexpected output %q", i, r)
		}
	}
	if stopped != 1 || already != 19 {
		t.Errorf("expected 1 stopped and 19 already stopped, got %d and %d", stopped, already)
	}
	if n := count(e.events("--session", "x-0"), herd.EventStopped); n != 1 {
		t.Errorf("expected exactly one stopped event, got %d", n)
	}
	if syscall.Kill(v.PID, 0) == nil {
		t.Error("the agent still runs")
	}
	s := e.waitState("x-0", herd.StateStopped, time.Second)
	if s.Exit == nil || s.Exit.Reason != herd.ReasonUser {
		t.Errorf("expected exit reason user, got %+v", s.Exit)
	}
	// The stopped slot stays stopped: its role's replicas dropped by one.
	time.Sleep(500 * time.Millisecond)
	if n := count(e.events("--session", "x-0"), herd.EventRestarted) + count(e.events("--session", "x-0"), herd.EventSpawned); n != 1 {
		t.Errorf("expected no relaunch after stop, got %d launches", n)
	}
	// Resume brings it back from its snapshot.
	e.must("resume", "x-0")
	e.waitState("x-0", herd.StateRunning, 5*time.Second)
	_, errs, code := e.herd("resume", "x-0")
	if code == 0 || !strings.Contains(errs, "not stopped") {
		t.Errorf("expected resuming a running session to fail clearly, got %d %q", code, errs)
	}
	_, errs, code = e.herd("resume", "nosuch-0")
	if code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("expected resuming an unknown session to fail clearly, got %d %q", code, errs)
	}
}

// TestRebootSweep: run agents, stop the daemon, change the boot id, start
// the daemon: each old incarnation is stopped with reason reboot exactly
// once, roles that restart are resumed, a never role is not; a second start
// with the same boot id sweeps nothing.
func TestRebootSweep(t *testing.T) {
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "a", "--runtime", "exec", "--replicas", "2", "--", "sleep", "300")
	e.must("run", "b", "--runtime", "exec", "--restart", "never", "--", "sleep", "300")
	for _, n := range []string{"a-0", "a-1", "b-0"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	e.kill(syscall.SIGTERM)
	// A reboot: the old processes are gone and the boot id is new.
	for _, pid := range e.agentPIDs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	e.setBootID("00000000-0000-4000-8000-000000000001")
	e.start()
	for _, n := range []string{"a-0", "a-1"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	e.waitState("b-0", herd.StateStopped, 10*time.Second)
	check := func() {
		t.Helper()
		events := e.events()
		stops := map[string]int{}
		for _, ev := range events {
			if ev.Kind == herd.EventStopped {
				if ev.Reason != herd.ReasonReboot {
					t.Errorf("expected reason reboot, got %q", ev.Reason)
				}
				stops[ev.Session]++
			}
		}
		for _, n := range []string{"a-0", "a-1", "b-0"} {
			if stops[n] != 1 {
				t.Errorf("[%s] expected exactly one stopped event, got %d", n, stops[n])
			}
		}
		if n := count(events, herd.EventResumed); n != 2 {
			t.Errorf("expected 2 resumed (the restartable role), got %d", n)
		}
		if n := count(events, herd.EventCrashed); n != 0 {
			t.Errorf("expected no crash accounting for a reboot, got %d", n)
		}
	}
	check()
	// The same boot again: nothing to sweep.
	e.kill(syscall.SIGTERM)
	e.start()
	time.Sleep(time.Second)
	check()
}

// TestTwoDaemonsAfterReboot: two daemons started at once after a simulated
// reboot → one sweeps, one stopped event per incarnation.
func TestTwoDaemonsAfterReboot(t *testing.T) {
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "a", "--runtime", "exec", "--replicas", "3", "--", "sleep", "300")
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	e.kill(syscall.SIGTERM)
	for _, pid := range e.agentPIDs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	e.setBootID("00000000-0000-4000-8000-000000000002")
	for range 2 {
		e.startDaemon() // the cleanup stops both
	}
	e.waitFor("one of the daemons answers", 10*time.Second, func() bool {
		_, err := api.NewClient(e.socket).Ping(context.Background(), time.Second)
		return err == nil
	})
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	stops := map[string]int{}
	for _, ev := range e.events("--kind", herd.EventStopped) {
		stops[ev.Session]++
	}
	for _, n := range []string{"a-0", "a-1", "a-2"} {
		if stops[n] != 1 {
			t.Errorf("[%s] expected exactly one stopped event, got %d", n, stops[n])
		}
	}
}

// TestPidReuseNeverSignalled: a recorded identity whose pid now belongs to
// another process (another start time) is never signalled — neither by
// stop nor by the prober — and is accounted as dead.
func TestPidReuseNeverSignalled(t *testing.T) {
	e := newEnv(t, fastRestart)
	// An unrelated process that "reused" the pid.
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	real, err := proc.Real().Identify(victim.Process.Pid, bootID(t, e))
	if err != nil {
		t.Fatal(err)
	}
	forged := real
	forged.StartTime-- // the recorded process started one tick earlier: not this one
	forged.Marker = ""

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(e.dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	host := hostname(t)
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		role := herd.Role{Name: "old", Replicas: 1, Command: []string{"sleep", "300"}, Workdir: e.dir, Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric,
			Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second, MaxBackoff: time.Second, ResetAfter: time.Minute}}
		if err := tx.PutRole(role); err != nil {
			return err
		}
		inc := herd.Incarnation{ID: "inc-reused", Session: "old-0", Host: host, RuntimeKind: herd.RuntimeExec, Argv: role.Command, Workdir: e.dir, Identity: forged, Root: forged, StartedAt: now}
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		return tx.PutSession(herd.Session{Name: "old-0", Role: "old", Host: host, State: herd.StateRunning, Incarnation: inc.ID, RuntimeKind: herd.RuntimeExec, StartedAt: &now, StateSince: now})
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	e.waitState("old-0", herd.StateFailed, 10*time.Second)
	e.herd("stop", "old-0")
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(victim.Process.Pid, 0); err != nil {
		t.Fatalf("herd signalled a process whose identity did not match: %v", err)
	}
	ev := e.events("--session", "old-0", "--kind", herd.EventCrashed)
	if len(ev) != 1 || ev[0].Reason != herd.ReasonProcessGone {
		t.Errorf("expected one crash with reason process_gone, got %+v", ev)
	}
}

func bootID(t *testing.T, e *env) string {
	t.Helper()
	t.Setenv("HERD_BOOT_ID_FILE", e.bootFile)
	id, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
