package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
)

// writeRoles writes a roles file for herd apply into the test's dir.
func (e *env) writeRoles(name, body string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// eventsOf keeps the events of kind with reason ("" for any).
func eventsOf(events []herd.Event, kind, reason string) []herd.Event {
	var out []herd.Event
	for _, ev := range events {
		if ev.Kind == kind && (reason == "" || ev.Reason == reason) {
			out = append(out, ev)
		}
	}
	return out
}

// TestRestartVerbs: herd restart NAME, role/NAME and --all give fresh
// incarnations through the stop path (stopped + restarted, reason user)
// and re-arm a failed session; the replica count is kept.
func TestRestartVerbs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "w", "--runtime", "exec", "--replicas", "2", "--", "sleep", "300")
	e.must("run", "once", "--runtime", "exec", "--restart", "never", "--", "sh", "-c", "sleep 0.2; exit 3")
	w0 := e.waitState("w-0", herd.StateRunning, 10*time.Second)
	e.waitState("w-1", herd.StateRunning, 10*time.Second)
	e.waitState("once-0", herd.StateFailed, 10*time.Second)

	out := e.must("restart", "w-0")
	if !strings.Contains(out, "session w-0 restarted") {
		t.Errorf("restart NAME: expected a confirmation … got %q", out)
	}
	after := e.waitState("w-0", herd.StateRunning, 10*time.Second)
	if after.Incarnation == w0.Incarnation || after.PID == w0.PID {
		t.Errorf("restart NAME: expected a fresh incarnation … got %s (pid %d) again", after.Incarnation, after.PID)
	}
	evs := e.events("--session", "w-0")
	if n := len(eventsOf(evs, herd.EventStopped, herd.ReasonUser)); n != 1 {
		t.Errorf("restart NAME: expected 1 stopped event (reason user) … got %d", n)
	}
	if n := len(eventsOf(evs, herd.EventRestarted, herd.ReasonUser)); n != 1 {
		t.Errorf("restart NAME: expected 1 restarted event (reason user) … got %d", n)
	}
	if n := len(eventsOf(evs, herd.EventCrashed, "")); n != 0 {
		t.Errorf("restart NAME: expected no crash … got %d", n)
	}

	// A failed session is re-armed: it runs again, with a whole budget.
	e.must("restart", "once-0")
	e.waitFor("once-0 to run again", 10*time.Second, func() bool {
		return len(eventsOf(e.events("--session", "once-0"), herd.EventRestarted, herd.ReasonUser)) == 1
	})
	e.waitState("once-0", herd.StateFailed, 10*time.Second)

	out = e.must("restart", "role/w")
	for _, want := range []string{"session/w-0 restarted", "session/w-1 restarted", "role w: 2 session(s) restarted"} {
		if !strings.Contains(out, want) {
			t.Errorf("restart role/w: expected %q … got %q", want, out)
		}
	}
	out = e.must("restart", "--all")
	if !strings.Contains(out, "all sessions: 3 session(s) restarted") {
		t.Errorf("restart --all: expected 3 restarted … got %q", out)
	}
	for _, name := range []string{"w-0", "w-1"} {
		e.waitState(name, herd.StateRunning, 10*time.Second)
	}
	var roles []map[string]any
	e.getJSON(&roles, "get", "roles", "w")
	if r := roles[0]["replicas"]; r != float64(2) {
		t.Errorf("restart: expected the role to keep 2 replicas … got %v", r)
	}

	for _, tc := range []struct{ args, want string }{
		{"restart nosuch-0", "session nosuch-0 not found"},
		{"restart role/nosuch", "role nosuch not found"},
		{"restart w-0 --all", "not both"},
		{"restart", "want one NAME"},
		{"restart w-0 --grace soon", "positive duration"},
	} {
		_, errs, code := e.herd(strings.Fields(tc.args)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("[%s] expected an error with %q … got %d %q", tc.args, tc.want, code, errs)
		}
	}
}

// TestResetAndSignal: herd reset clears the crash count and re-arms a
// failed session; herd signal reaches the agent, identity-checked.
func TestResetAndSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "flaky", "--runtime", "exec", "--", "sh", "-c", "sleep 0.1; exit 1")
	e.waitState("flaky-0", herd.StateFailed, 20*time.Second)
	out := e.must("reset", "flaky-0")
	if !strings.Contains(out, "crash count reset") || !strings.Contains(out, "relaunches now") {
		t.Errorf("reset of a failed session: expected it re-armed … got %q", out)
	}
	e.waitFor("flaky-0 relaunched after the reset", 10*time.Second, func() bool {
		v, _ := e.session("flaky-0")
		return v.Restarts > 0 || v.State == herd.StateRunning
	})
	if evs := eventsOf(e.events("--session", "flaky-0"), herd.EventActivity, herd.ReasonUser); len(evs) != 1 || evs[0].Data["restarts_before"] != float64(3) {
		t.Errorf("reset: expected one event saying the count was 3 … got %+v", evs)
	}

	e.must("run", "trap", "--runtime", "exec", "--", "sh", "-c", `trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done`)
	e.waitState("trap-0", herd.StateRunning, 10*time.Second)
	e.waitFor("trap-0 ready", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "trap-0"), "ready") })
	v, _ := e.session("trap-0")
	out = e.must("signal", "trap-0", "USR1")
	if want := fmt.Sprintf("SIGUSR1 sent to session trap-0 (pid %d)", v.PID); !strings.Contains(out, want) {
		t.Errorf("signal: expected %q … got %q", want, out)
	}
	e.waitFor("the agent to handle SIGUSR1", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "trap-0"), "got-usr1") })
	if v2, _ := e.session("trap-0"); v2.State != herd.StateRunning || v2.Incarnation != v.Incarnation {
		t.Errorf("signal USR1: expected the agent to live on … got %s, %s", v2.State, v2.Incarnation)
	}
	e.must("signal", "trap-0", "9")
	e.waitFor("the SIGKILL to be a crash", 10*time.Second, func() bool {
		return len(eventsOf(e.events("--session", "trap-0"), herd.EventCrashed, herd.ReasonSignal)) == 1
	})
	for _, tc := range []struct{ args, want string }{
		{"signal trap-0 BOGUS", "not a signal name"},
		{"signal trap-0 99", "want 1 to 64"},
		{"signal nosuch-0 TERM", "session nosuch-0 not found"},
		{"signal trap-0", "want NAME and SIG"},
	} {
		_, errs, code := e.herd(strings.Fields(tc.args)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("[%s] expected an error with %q … got %d %q", tc.args, tc.want, code, errs)
		}
	}
}

// TestStopGraceEscalation: an agent ignoring SIGTERM is killed after
// --grace, and the stopped event says so.
func TestStopGraceEscalation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "stubborn", "--runtime", "exec", "--", "sh", "-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	e.must("run", "polite", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("stubborn-0", herd.StateRunning, 10*time.Second)
	e.waitState("polite-0", herd.StateRunning, 10*time.Second)
	e.waitFor("stubborn-0 ready", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "stubborn-0"), "ready") })

	start := time.Now()
	e.must("stop", "stubborn-0", "--grace", "300ms")
	took := time.Since(start)
	if took > 4*time.Second {
		t.Errorf("stop --grace 300ms: expected well under the default 5s grace … took %s", took)
	}
	stopped := eventsOf(e.events("--session", "stubborn-0"), herd.EventStopped, herd.ReasonUser)
	if len(stopped) != 1 || stopped[0].Data["escalated"] != true || stopped[0].Data["after"] != "300ms" {
		t.Fatalf("stop --grace: expected one stopped event with escalated: true, after: 300ms … got %+v", stopped)
	}
	e.must("stop", "polite-0", "--grace", "10s")
	stopped = eventsOf(e.events("--session", "polite-0"), herd.EventStopped, herd.ReasonUser)
	if len(stopped) != 1 || stopped[0].Data["escalated"] != nil {
		t.Errorf("stop of an agent that obeys SIGTERM: expected no escalation … got %+v", stopped)
	}
	t.Logf("stop --grace 300ms of an agent ignoring SIGTERM took %s", took.Round(time.Millisecond))
}

// getJSON runs a herd command with -o json and decodes its output.
func (e *env) getJSON(v any, args ...string) {
	e.t.Helper()
	out := e.must(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("herd %s: %v: %q", strings.Join(args, " "), err, out)
	}
}
