package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
)

// fakeSystemctl writes a systemctl to a fresh PATH directory: it records
// its arguments in log and, for `--user start herd.service`, does what
// systemd does with the unit `herd startup` wrote — runs its daemon —
// unless fail is set, when it says so and exits 1.
func fakeSystemctl(t *testing.T, e *env, log string, fail bool) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
echo "$@" >> %q
if [ %q = true ]; then echo "Failed to start herd.service: Unit herd.service is masked." >&2; exit 1; fi
setsid %q daemon --state-dir %q --config %q >> %q 2>&1 < /dev/null &
`, log, fmt.Sprint(fail), bin, e.dir, e.sb.Config(), e.logPath)
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAutostartAsksSystemd: with a unit that `herd startup` installed for
// this state dir, a command finding no daemon asks systemd to start the
// unit, instead of starting a daemon outside it (which would block the
// unit's restarts); systemctl failing is a refusal that says why, with
// no daemon started. A unit for another state dir changes nothing.
func TestAutostartAsksSystemd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.autostart = true
	units := t.TempDir()
	e.extraEnv = append(e.extraEnv, "XDG_CONFIG_HOME="+units)
	e.must("startup") // the unit, for this state dir
	if b, err := os.ReadFile(filepath.Join(units, "systemd", "user", "herd.service")); err != nil || !strings.Contains(string(b), e.dir) {
		t.Fatalf("expected the unit written for %s, got %q (%v)", e.dir, b, err)
	}
	calls := filepath.Join(t.TempDir(), "calls")

	// systemctl refuses: said, and nothing started behind its back.
	path := "PATH=" + fakeSystemctl(t, e, calls, true) + ":" + os.Getenv("PATH")
	e.extraEnv = append(e.extraEnv, path)
	if _, errs, code := e.herd("get", "sessions"); code == 0 || !strings.Contains(errs, "systemctl --user start herd.service` failed") || !strings.Contains(errs, "masked") {
		t.Errorf("[systemctl fails] expected a refusal saying why, got %d %q", code, errs)
	}
	if n := daemons(e.dir); n != 0 {
		t.Errorf("[systemctl fails] expected no daemon started outside the unit, found %d", n)
	}

	// systemctl starts it: the command goes on with the unit's daemon.
	e.extraEnv[len(e.extraEnv)-1] = "PATH=" + fakeSystemctl(t, e, calls, false) + ":" + os.Getenv("PATH")
	out, errs, code := e.herd("get", "sessions")
	if code != 0 || !strings.Contains(errs, "asked systemd to start herd.service") || strings.Contains(errs, "started one") {
		t.Fatalf("[unit] expected the unit started through systemd, got %d %q %q", code, out, errs)
	}
	t.Cleanup(func() {
		for _, pid := range daemonPIDs(e.dir) {
			exec.Command("kill", fmt.Sprint(pid)).Run()
		}
		e.waitFor("the unit's daemon gone", 20*time.Second, func() bool { return daemons(e.dir) == 0 })
	})
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "--user start herd.service\n") != 2 {
		t.Errorf("[unit] expected systemctl --user start herd.service asked twice (failed, then started), got %q", b)
	}
	if n := daemons(e.dir); n != 1 {
		t.Errorf("[unit] expected one daemon, found %d", n)
	}

	// A unit for another state dir: the command starts its own daemon.
	other := newEnv(t, fastRestart)
	other.autostart = true
	other.extraEnv = append(other.extraEnv, "XDG_CONFIG_HOME="+units, path)
	if _, errs, code := other.herd("get", "sessions"); code != 0 || !strings.Contains(errs, "started one") {
		t.Errorf("[another state dir] expected a daemon started by the command, got %d %q", code, errs)
	}
}

// TestDaemonRefusesAnotherTmuxSocket: a daemon whose config names another
// tmux socket than the one the state dir's live agents run on refuses to
// start, and says which and how; started with the config they were
// launched with, it adopts them.
func TestDaemonRefusesAnotherTmuxSocket(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "keep", "--runtime", "tmux", "--", "sleep", "300")
	before := e.waitState("keep-0", herd.StateRunning, 20*time.Second)
	e.kill(9)

	cfg, err := os.ReadFile(e.sb.Config())
	if err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "moved.toml")
	if err := os.WriteFile(moved, []byte(strings.Replace(string(cfg), e.tmuxSock, "elsewhere-"+e.tmuxSock, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "daemon", "--config", moved)
	cmd.Env = e.environ()
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("expected the daemon to refuse at once; it ran: %s", out)
	}
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("run on tmux socket %q", e.tmuxSock)) || !strings.Contains(string(out), "keep-0") {
		t.Errorf("expected a refusal naming the agents' socket %q and keep-0, got %v: %s", e.tmuxSock, err, out)
	}
	e.start()
	after := e.waitState("keep-0", herd.StateRunning, 20*time.Second)
	if after.Incarnation != before.Incarnation || after.PID != before.PID {
		t.Errorf("expected keep-0 adopted (same incarnation and pid), got %s/%d, was %s/%d", after.Incarnation, after.PID, before.Incarnation, before.PID)
	}
}
