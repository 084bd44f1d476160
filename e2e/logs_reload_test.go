package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// TestLogsScrollbackRoleSince: herd logs of a tmux session shows the
// whole scrollback by default, not the visible screen; --role and --all
// merge sessions under name prefixes; --since shows each incarnation of
// the window under a header.
func TestLogsScrollbackRoleSince(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "tm", "--replicas", "2", "--", "sh", "-c", "seq 1 300; echo done-$HERD_SESSION; sleep 300")
	e.must("run", "ex", "--runtime", "exec", "--", "sh", "-c", "echo exec-line; sleep 300")
	for _, name := range []string{"tm-0", "tm-1"} {
		e.waitState(name, herd.StateRunning, 10*time.Second)
		e.waitFor(name+" output", 10*time.Second, func() bool { return strings.Contains(e.try("logs", name), "done-"+name) })
	}
	out := e.must("logs", "tm-0")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 301 || strings.TrimSpace(lines[0]) != "1" {
		t.Errorf("logs of a tmux session: expected all 300 lines from the first … got %d lines, first %q", len(lines), lines[0])
	}
	if tail := strings.TrimSpace(e.must("logs", "tm-0", "--tail", "2")); tail != "300\ndone-tm-0" {
		t.Errorf("logs --tail 2: expected the last two lines … got %q", tail)
	}

	out = e.must("logs", "--role", "tm")
	for _, want := range []string{"tm-0 | 1\n", "tm-0 | done-tm-0", "tm-1 | 300\n", "tm-1 | done-tm-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs --role tm: expected %q … got %d bytes", want, len(out))
		}
	}
	if strings.Contains(out, "exec-line") {
		t.Errorf("logs --role tm: expected only role tm's sessions")
	}
	e.waitFor("ex-0 output", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "ex-0"), "exec-line") })
	out = e.must("logs", "--all", "--tail", "1")
	for _, want := range []string{"ex-0 | exec-line", "tm-0 | done-tm-0", "tm-1 | done-tm-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs --all: expected %q … got %q", want, out)
		}
	}

	// A tmux session restarts too: a fresh pane, its output from the top.
	before, _ := e.session("tm-1")
	e.must("restart", "tm-1")
	e.waitFor("tm-1 to run a fresh incarnation", 10*time.Second, func() bool {
		v, _ := e.session("tm-1")
		return v.State == herd.StateRunning && v.Incarnation != before.Incarnation && strings.Contains(e.try("logs", "tm-1"), "done-tm-1")
	})
	if out := e.must("logs", "tm-1"); strings.Count(out, "done-tm-1") != 1 {
		t.Errorf("logs after a tmux restart: expected the new pane's output only … got %d bytes", len(out))
	}

	// --since: the exec session restarted once shows both incarnations.
	first, _ := e.session("ex-0")
	e.must("restart", "ex-0")
	e.waitState("ex-0", herd.StateRunning, 10*time.Second)
	e.waitFor("ex-0 output again", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "ex-0"), "exec-line") })
	out = e.must("logs", "ex-0", "--since", "1h")
	if strings.Count(out, "exec-line") != 2 || strings.Count(out, "--- incarnation ") != 2 ||
		!strings.Contains(out, "--- incarnation "+first.Incarnation) || !strings.Contains(out, "ended user") {
		t.Errorf("logs --since 1h: expected both incarnations under headers, the first ended by the user … got %q", out)
	}
	if out := e.must("logs", "ex-0"); strings.Count(out, "exec-line") != 1 {
		t.Errorf("logs without --since: expected the current incarnation only … got %q", out)
	}
	for _, tc := range []struct{ args, want string }{
		{"logs", "want one session NAME"},
		{"logs tm-0 --all", "not both"},
		{"logs --role nosuch", "role nosuch not found"},
		{"logs tm-0 --since yesterday", "positive duration"},
	} {
		_, errs, code := e.herd(strings.Fields(tc.args)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("[%s] expected an error with %q … got %d %q", tc.args, tc.want, code, errs)
		}
	}
}

// TestLaunchFailureShown: a role whose command does not exist (declared
// by apply, which cannot check it on the daemon's host) fails its launch
// with the reason in LAST-EXIT and in herd logs, for both runtimes.
func TestLaunchFailureShown(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	e.must("apply", "-f", e.writeRoles("bad.toml", `[[role]]
name = "badtm"
command = ["no-such-agent-binary", "--go"]
[[role]]
name = "badex"
runtime = "exec"
command = ["no-such-agent-binary", "--go"]
`))
	for _, name := range []string{"badtm-0", "badex-0"} {
		e.waitFor(name+" to fail its launch", 10*time.Second, func() bool {
			v, ok := e.session(name)
			return ok && v.Exit != nil && v.Exit.Reason == herd.ReasonLaunchFailed
		})
		v, _ := e.session(name)
		if !strings.Contains(v.Exit.Message, `"no-such-agent-binary" not found`) {
			t.Errorf("%s: expected the exit to say the command is not found … got %q", name, v.Exit.Message)
		}
		row := e.must("get", "sessions", name, "--no-headers")
		if !strings.Contains(row, "launch_failed: command") {
			t.Errorf("%s: expected LAST-EXIT to show why … got %q", name, row)
		}
		logs := e.must("logs", name)
		if !strings.Contains(logs, `herd: launch failed: command "no-such-agent-binary" not found in PATH`) {
			t.Errorf("%s: expected herd logs to say why … got %q", name, logs)
		}
	}
	if _, errs, code := e.herd("run", "x", "--workdir", "/nonexistent", "--", "sleep", "1"); code == 0 || !strings.Contains(errs, "/nonexistent is not a directory") {
		t.Errorf("run --workdir /nonexistent: expected refused … got %d %q", code, errs)
	}
	if _, errs, code := e.herd("run", "x", "--", "no-such-agent-binary"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("run of a missing command: expected refused … got %d %q", code, errs)
	}
}

// TestApplySectionsAndReload: apply -f refuses daemon sections and points
// to herd reload; a file without [restart] gives roles the daemon's
// [restart]; herd reload and SIGHUP apply [restart], [watchdog] and the
// file's roles live and name what needs a restart; a bad file changes
// nothing.
func TestApplySectionsAndReload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "[restart]\ninitial_backoff = \"3s\"\nmax_restarts = 7\n")
	e.start()
	_, errs, code := e.herd("apply", "-f", e.writeRoles("mixed.toml", "[watchdog]\nstall_after = \"1m\"\n[[role]]\nname = \"a\"\ncommand = [\"sleep\", \"300\"]\n"))
	if code == 0 || !strings.Contains(errs, "[watchdog] configures the daemon, not roles") || !strings.Contains(errs, "herd reload") {
		t.Errorf("apply with [watchdog]: expected a clear refusal pointing to herd reload … got %d %q", code, errs)
	}
	if roles := e.must("get", "roles"); strings.Contains(roles, "a ") {
		t.Errorf("apply with [watchdog]: expected nothing applied … got %q", roles)
	}

	e.must("apply", "-f", e.writeRoles("plain.toml", "[[role]]\nname = \"a\"\nruntime = \"exec\"\ncommand = [\"sleep\", \"300\"]\nrestart = { policy = \"on-failure\" }\n"))
	var roles []api.RoleView
	e.getJSON(&roles, "get", "roles", "a")
	if r := roles[0].Restart; r.InitialBackoff != 3*time.Second || r.MaxRestarts != 7 || r.Policy != herd.PolicyOnFailure {
		t.Errorf("apply without [restart]: expected the daemon's 3s backoff, 7 restarts and the role's own policy … got %+v", r)
	}
	e.must("apply", "-f", e.writeRoles("own.toml", "[restart]\nmax_restarts = 2\n[[role]]\nname = \"a\"\nruntime = \"exec\"\ncommand = [\"sleep\", \"300\"]\n"))
	e.getJSON(&roles, "get", "roles", "a")
	if r := roles[0].Restart; r.InitialBackoff != 10*time.Second || r.MaxRestarts != 2 {
		t.Errorf("apply with its own [restart]: expected it over the built-in defaults … got %+v", r)
	}

	// herd reload: [restart] and [watchdog] live, [probe] needs a restart,
	// the file's roles applied.
	cfgPath := filepath.Join(e.dir, "herd.toml")
	base, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	write := func(extra string) {
		cfg := strings.Replace(string(base), "initial_backoff = \"3s\"", "initial_backoff = \"4s\"", 1)
		cfg = strings.Replace(cfg, "interval = \"200ms\"", "interval = \"300ms\"", 1)
		if err := os.WriteFile(cfgPath, []byte(cfg+extra), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[watchdog]\nstall_after = \"2m\"\n[[role]]\nname = \"fromfile\"\nruntime = \"exec\"\ncommand = [\"sleep\", \"300\"]\n")
	out := e.must("reload")
	for _, want := range []string{"[restart] applied", "[watchdog] applied", "[probe] changed; takes effect when the daemon restarts", "role/fromfile created"} {
		if !strings.Contains(out, want) {
			t.Errorf("reload: expected %q … got %q", want, out)
		}
	}
	e.waitState("fromfile-0", herd.StateRunning, 10*time.Second)
	e.must("run", "later", "--runtime", "exec", "--", "sleep", "300")
	e.getJSON(&roles, "get", "roles", "later")
	if r := roles[0].Restart; r.InitialBackoff != 4*time.Second {
		t.Errorf("after reload: expected a new role to inherit the reloaded 4s backoff … got %s", r.InitialBackoff)
	}

	write("[watchdog]\nstall_after = \"soon\"\n")
	if _, errs, code := e.herd("reload"); code == 0 || !strings.Contains(errs, "stall_after") || !strings.Contains(errs, "nothing changed") {
		t.Errorf("reload of a bad file: expected refused, nothing changed … got %d %q", code, errs)
	}

	// SIGHUP does the same, and the daemon lives on.
	write("[watchdog]\nstall_after = \"3m\"\n")
	e.daemon.Process.Signal(syscall.SIGHUP)
	e.waitFor("the SIGHUP reload logged", 10*time.Second, func() bool {
		b, _ := os.ReadFile(e.logPath)
		return strings.Contains(string(b), "SIGHUP: config reloaded: applied: [watchdog]")
	})
	if _, errs, code := e.herd("get", "sessions"); code != 0 {
		t.Errorf("after SIGHUP: expected the daemon to answer … got %d %q", code, errs)
	}
}
