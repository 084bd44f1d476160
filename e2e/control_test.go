package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestInjectBroadcast: inject --all, --role and -l reach every live tmux
// agent they name, and report each target: delivered, or refused and why
// (an exec agent has no terminal to type into).
func TestInjectBroadcast(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "talk", "--", bin, "sim", "--wait-input", "--interval", "200ms")
	e.must("scale", "talk", "--replicas", "2")
	e.must("run", "batch", "--runtime", "exec", "--", bin, "sim", "--interval", "200ms")
	for _, n := range []string{"talk-0", "talk-1", "batch-0"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	for _, n := range []string{"talk-0", "talk-1"} {
		e.waitFor(n+" prompt", 10*time.Second, func() bool { return strings.Contains(e.try("logs", n), "waiting for your input") })
	}

	out, errs, code := e.herd("inject", "--all", "hello herd")
	if code == 0 {
		t.Errorf("[--all] expected a non-zero exit (batch-0 refused), got 0: %s", out)
	}
	for _, want := range []string{"talk-0\tdelivered", "talk-1\tdelivered", "batch-0\trefused\tinject: session batch-0 is not a live tmux session"} {
		if !strings.Contains(out, want) {
			t.Errorf("[--all] expected %q in the report, got %q %q", want, out, errs)
		}
	}
	if !strings.Contains(errs, "1 of 3 session(s) refused") {
		t.Errorf("[--all] expected the refusals counted, got %q", errs)
	}
	e.must("inject", "--role", "talk", "second")
	if out := e.must("inject", "-l", "role=talk,state=running", "third"); strings.Count(out, "delivered") != 2 {
		t.Errorf("[-l] expected two deliveries, got %q", out)
	}
	for _, n := range []string{"talk-0", "talk-1"} {
		e.waitFor(n+" typed text", 10*time.Second, func() bool {
			l := e.try("logs", n)
			return strings.Contains(l, "You said: hello herd") && strings.Contains(l, "You said: second") && strings.Contains(l, "You said: third")
		})
	}
	if _, errs, code := e.herd("inject", "--role", "nobody", "x"); code == 0 || !strings.Contains(errs, "names no session") {
		t.Errorf("[empty role] expected an error naming no session, got %d %q", code, errs)
	}
}

// TestWaitForState: herd wait exits 0 once its sessions get there, 1 on
// the timeout naming the laggards, 2 on an error or an interrupt.
func TestWaitForState(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "turn", "--", bin, "sim", "--interval", "500ms", "--quiet",
		"--hooks", "SessionStart,PreToolUse:Bash,PostToolUse:Bash,PreToolUse:Bash,Stop")
	e.waitState("turn-0", herd.StateRunning, 10*time.Second)

	start := time.Now()
	out, errs, code := e.herd("wait", "--role", "turn", "--for", "idle", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "turn-0\treached\trunning/idle") {
		t.Fatalf("[idle] expected exit 0 with turn-0 reached, got %d %q %q", code, out, errs)
	}
	t.Logf("turn-0 idle after %s", time.Since(start).Round(time.Millisecond))

	out, errs, code = e.herd("wait", "turn-0", "--for", "stopped", "--timeout", "300ms")
	if code != 1 || !strings.Contains(errs, "timed out after 300ms: not stopped: turn-0") || !strings.Contains(out, "turn-0\tlagging") {
		t.Errorf("[timeout] expected exit 1 naming turn-0, got %d %q %q", code, out, errs)
	}
	if _, errs, code := e.herd("wait", "nope-0", "--for", "idle"); code != 2 || !strings.Contains(errs, "nope-0") {
		t.Errorf("[missing] expected exit 2 naming nope-0, got %d %q", code, errs)
	}
	if _, errs, code := e.herd("wait", "turn-0", "--for", "asleep"); code != 2 || !strings.Contains(errs, "want a state or an activity") {
		t.Errorf("[bad --for] expected exit 2, got %d %q", code, errs)
	}

	cmd := exec.Command(bin, "wait", "turn-0", "--for", "stopped", "--timeout", "1m")
	cmd.Env = e.environ()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// herd's main sets up its signal handling before anything else: once
	// the command holds a socket (it dialed the daemon), an interrupt is
	// its to handle. (A fixed sleep here was not enough under load: the
	// interrupt came first and the runtime's default ended the process.)
	e.waitFor("herd wait connected to the daemon", 20*time.Second, func() bool { return holdsSocket(cmd.Process.Pid) })
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("[interrupted] expected exit 2 saying interrupted, got %v %q", err, stderr.String())
	}

	done := make(chan string, 1)
	waiter := exec.Command(bin, "wait", "turn-0", "--for", "stopped", "--timeout", "30s")
	waiter.Env = e.environ()
	go func() {
		out, err := waiter.CombinedOutput()
		done <- fmt.Sprintf("%s exit %v", strings.TrimSpace(string(out)), err)
	}()
	e.must("stop", "turn-0")
	select {
	case got := <-done:
		if !strings.Contains(got, "turn-0\treached\tstopped") || !strings.HasSuffix(got, "exit <nil>") {
			t.Errorf("[stopped] expected turn-0 reached, got %q", got)
		}
	case <-time.After(15 * time.Second): // the stop and the wait's own wake-up
		t.Errorf("[stopped] expected the wait to end at the stop")
	}
}

// holdsSocket reports whether process pid has a socket open.
func holdsSocket(pid int) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			return true
		}
	}
	return false
}
