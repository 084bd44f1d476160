package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
)

// liveHerd is a herd installed the way a user has it: no flags, no config
// of the test's, the default state dir under $HOME and the default tmux
// socket `herd`. HOME and TMUX_TMPDIR point into temp dirs, so from its
// processes' point of view it is exactly the default layout, without
// touching the real user's.
type liveHerd struct {
	t       *testing.T
	env     []string // HOME, TMUX_TMPDIR and nothing of herd's
	home    string
	tmuxDir string
	state   string // ~/.local/state/herd
	id      string // its processes' herdtest marker, for the cleanup
	daemon  *exec.Cmd
}

func startLiveHerd(t *testing.T) *liveHerd {
	t.Helper()
	// Short paths: the tmux socket path is bounded (108 bytes).
	home, err := os.MkdirTemp("", "hl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) }) // runs last, after the kills below
	l := &liveHerd{t: t, home: home, tmuxDir: filepath.Join(home, "t"), state: filepath.Join(home, ".local", "state", "herd"),
		id: herdtest.Run + "/live"}
	if err := os.Mkdir(l.tmuxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	env := slices.DeleteFunc(herdtest.Scrub(os.Environ()), func(kv string) bool {
		return strings.HasPrefix(kv, "XDG_STATE_HOME=") || strings.HasPrefix(kv, "TMUX_TMPDIR=") || strings.HasPrefix(kv, "HOME=")
	})
	l.env = append(env, "HOME="+home, "TMUX_TMPDIR="+l.tmuxDir, herdtest.EnvSandbox+"="+l.id, "GORACE=atexit_sleep_ms=0 halt_on_error=0")
	l.daemon = exec.Command(bin, "daemon")
	l.daemon.Env = l.env
	log, err := os.Create(filepath.Join(home, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	l.daemon.Stdout, l.daemon.Stderr = log, log
	if err := l.daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.daemon.Process.Kill()
		l.daemon.Wait()
		l.tmux("kill-server")
		herdtest.Kill(l.id)
	})
	herdtest.WaitFor(t, "the live daemon answering", 10*time.Second, func() bool {
		_, err := api.NewClient(filepath.Join(l.state, "herd.sock")).Ping(context.Background(), time.Second)
		return err == nil
	})
	return l
}

// herd runs the live herd's CLI as its user would.
func (l *liveHerd) herd(args ...string) string {
	l.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = l.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("live herd %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tmux runs tmux on the default herd socket, as the live herd's user.
func (l *liveHerd) tmux(args ...string) string {
	cmd := exec.Command("tmux", append([]string{"-L", "herd"}, args...)...)
	cmd.Env = l.env
	out, _ := cmd.Output()
	return string(out)
}

func (l *liveHerd) sessions() []api.SessionView {
	l.t.Helper()
	var views []api.SessionView
	if err := json.Unmarshal([]byte(l.herd("get", "sessions", "-o", "json")), &views); err != nil {
		l.t.Fatal(err)
	}
	return views
}

// TestHarnessNeverTouchesALiveHerd: with a user's herd running on the
// default socket and state dir, and the test process itself inside one of
// its agents (HERD_* and TMUX set, as when an agent runs the tests),
// daemons started the way tests start them — agents of the same names, a
// reaper pass that stops herd-named sessions it has no record of, the hook
// command's daemon — leave the live herd's agents, pids and event log as
// they were. A harness daemon reaching the default socket or the inherited
// state dir would reap or relaunch them.
func TestHarnessNeverTouchesALiveHerd(t *testing.T) {
	hasTmux(t)
	live := startLiveHerd(t)
	live.herd("run", "w", "--replicas", "2", "--", "sleep", "300")
	live.herd("run", "x", "--runtime", "exec", "--", "sleep", "300")
	var before []api.SessionView
	herdtest.WaitFor(t, "the live agents running", 10*time.Second, func() bool {
		before = live.sessions()
		n := 0
		for _, v := range before {
			if v.State == herd.StateRunning && v.PID != 0 {
				n++
			}
		}
		return n == 3
	})
	if got := live.tmux("list-sessions", "-F", "#{session_name}"); !strings.Contains(got, "w-0\n") {
		t.Fatalf("expected the live agents on the default herd socket … got %q", got)
	}
	eventsBefore := strings.Count(live.herd("events", "-o", "json", "--limit", "0"), "\n")

	// The test process as if inside the live agent w-0: a daemon or CLI
	// inheriting any of this would reach the live herd.
	liveTmux := filepath.Join(live.tmuxDir, "tmux-"+strconv.Itoa(os.Getuid()), "herd")
	for k, v := range map[string]string{
		"HOME": live.home, "TMUX_TMPDIR": live.tmuxDir, "XDG_STATE_HOME": "",
		"HERD_STATE_DIR": live.state, "HERD_CONFIG": "", herd.EnvSocket: filepath.Join(live.state, "herd.sock"),
		herd.EnvSession: "w-0", herd.EnvIncarnation: before[0].Incarnation, "TMUX": liveTmux + ",1,0", "TMUX_PANE": "%0",
	} {
		t.Setenv(k, v)
	}

	t.Run("tmux agents of the same names and a reaper pass", func(t *testing.T) {
		e := newEnv(t, "[reaper]\ninterval = \"1s\"\n")
		e.start()
		e.must("run", "w", "--replicas", "2", "--", "sleep", "300")
		e.waitState("w-1", herd.StateRunning, 10*time.Second)
		e.must("run", "x", "--runtime", "exec", "--", "sleep", "300")
		e.waitState("x-0", herd.StateRunning, 10*time.Second)
		// A session of the harness's own with no record: the pass must
		// find it, on its own socket.
		if out, err := exec.Command("tmux", "-L", e.tmuxSock, "new-session", "-d", "-s", "z-0", "sleep", "300").CombinedOutput(); err != nil {
			t.Fatalf("tmux new-session: %v: %s", err, out)
		}
		// Reaped by the loop's pass (every second) or by this one.
		e.must("reap")
		e.waitFor("its own unrecorded z-0 reaped", 5*time.Second, func() bool {
			return count(e.events("--session", "z-0", "--kind", herd.EventReaped), herd.EventReaped) == 1
		})
		e.must("stop", "w-0")
		e.must("hook", "Stop")
		e.kill(syscall.SIGTERM)
	})
	t.Run("the hook command's daemon", func(t *testing.T) {
		sb := herdtest.New(t, "")
		hook := exec.Command(bin, "hook", "PreToolUse")
		hook.Env = sb.Environ()
		hook.Stdin = strings.NewReader(`{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"Bash"}`)
		if out, err := hook.CombinedOutput(); err != nil {
			t.Errorf("hook: %v: %s", err, out)
		}
		sb.Daemon(bin, nil)
		cli := exec.Command(bin, "reap")
		cli.Env = sb.Environ()
		if out, err := cli.CombinedOutput(); err != nil {
			t.Errorf("reap: %v: %s", err, out)
		}
	})

	after := live.sessions()
	if len(after) != len(before) {
		t.Fatalf("expected the live herd's %d sessions … got %d", len(before), len(after))
	}
	for i, b := range before {
		a := after[i]
		if a.Name != b.Name || a.Incarnation != b.Incarnation || a.PID != b.PID || a.State != herd.StateRunning {
			t.Errorf("live %s: expected incarnation %s pid %d running … got %s %s pid %d %s", b.Name, b.Incarnation, b.PID, a.Name, a.Incarnation, a.PID, a.State)
		}
		if syscall.Kill(b.PID, 0) != nil {
			t.Errorf("live %s: its agent (pid %d) is gone", b.Name, b.PID)
		}
	}
	if got := live.tmux("list-sessions", "-F", "#{session_name}"); !strings.Contains(got, "w-0\n") || !strings.Contains(got, "w-1\n") {
		t.Errorf("expected the live tmux sessions still there … got %q", got)
	}
	if n := strings.Count(live.herd("events", "-o", "json", "--limit", "0"), "\n"); n != eventsBefore {
		t.Errorf("expected no event in the live herd's log … got %d new:\n%s", n-eventsBefore, live.herd("events", "--limit", "0"))
	}
	if spooled, _ := filepath.Glob(filepath.Join(live.state, "activity", "*")); len(spooled) > 0 {
		t.Errorf("expected no hook report spooled into the live state dir … got %v", spooled)
	}
	b, _ := os.ReadFile(filepath.Join(live.home, "daemon.log"))
	if bytes.Contains(b, []byte("level=ERROR")) {
		t.Errorf("the live daemon logged an error:\n%s", b)
	}
}
