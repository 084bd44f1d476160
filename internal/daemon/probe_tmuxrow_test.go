package daemon

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/runtime/tmux"
	"herd/internal/store"
)

// rowWrapper runs the real tmux; the session name of listed rows matching
// the awk regex in the file "blank" is emptied, as a garbled line would be.
// It refuses control mode, so every call goes through it.
const rowWrapper = `#!/bin/sh
case " $* " in *" -C "*) echo "no control mode" >&2; exit 1 ;; esac
dir=$(dirname "$0")
case " $* " in
*" list-panes "*)
	out=$(REALTMUX "$@") || exit $?
	pat=$(cat "$dir/blank" 2>/dev/null)
	printf '%s\n' "$out" | awk -F '\t' -v OFS='\t' -v pat="$pat" 'pat != "" && $1 ~ pat { $1 = "" } { print }'
	exit 0
	;;
esac
exec REALTMUX "$@"
`

// newRowEnv is a reapEnv (in-process daemon, private tmux server) probing
// four times a second through rowWrapper.
func newRowEnv(t *testing.T) *reapEnv {
	t.Helper()
	e := newReapEnv(t, func(c *config.Config) { c.Probe.Interval = 250 * time.Millisecond })
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	// Replaced by a rename: the daemon may exec the wrapper at any time.
	tmp := filepath.Join(e.wrapDir, "tmux.new")
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(rowWrapper, "REALTMUX", real)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.wrapDir, "tmux")); err != nil {
		t.Fatal(err)
	}
	return e
}

// blankRows makes listings empty the session name of rows matching re
// ("" stops it).
func blankRows(e *reapEnv, re string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.wrapDir, "blank"), []byte(re), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// pendingWrapper declares a one-replica role whose command is a wrapper
// under which the named agent never shows: the session stays pending, so
// only the tmux listing speaks for it. It returns the open incarnation.
func pendingWrapper(e *reapEnv, name string) herd.Incarnation {
	e.t.Helper()
	r := herd.Role{Name: name, Replicas: 1, Command: []string{"sh", "-c", "sleep 3600; :"}, AgentProcess: "claude", Workdir: e.t.TempDir()}
	if err := e.d.ApplyRoles(e.ctx(), []herd.Role{r}); err != nil {
		e.t.Fatal(err)
	}
	sess := name + "-0"
	// Pending from the launch's write-ahead record on: the launch is done
	// once its process is recorded.
	e.poll(sess+" pending with its pane listed and its launch recorded", func() bool {
		p, ok := e.pane(sess)
		if e.sessions()[sess].State != herd.StatePending || !ok || p.Err != nil || p.Dead {
			return false
		}
		var inc herd.Incarnation
		e.st.View(e.ctx(), func(tx store.Tx) error {
			s, err := tx.Session(sess)
			if err == nil {
				inc, err = tx.Incarnation(s.Incarnation)
			}
			return err
		})
		return inc.Root.PID != 0
	})
	return openIncarnation(e, sess)
}

func openIncarnation(e *reapEnv, name string) herd.Incarnation {
	e.t.Helper()
	var inc herd.Incarnation
	err := e.st.View(e.ctx(), func(tx store.Tx) error {
		s, err := tx.Session(name)
		if err != nil {
			return err
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil || inc.Root.PID == 0 {
		e.t.Fatalf("incarnation of %s: %+v, %v", name, inc, err)
	}
	return inc
}

func sessionEvents(e *reapEnv, name, kind string) []herd.Event {
	e.t.Helper()
	var evs []herd.Event
	err := e.st.View(e.ctx(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: name, Kind: kind})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// holdUnknown checks, over several probe ticks, that session name stays
// unknown in incarnation inc, never crashed, its wrapper alive.
func holdUnknown(e *reapEnv, name string, inc herd.Incarnation) {
	e.t.Helper()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		s := e.session(name)
		if s.State != herd.StateUnknown || s.Incarnation != inc.ID {
			e.t.Fatalf("expected %s unknown in %s … got %s in %s", name, inc.ID, s.State, s.Incarnation)
		}
	}
	if evs := sessionEvents(e, name, herd.EventCrashed); len(evs) != 0 {
		e.t.Fatalf("expected no crash … got %+v", evs)
	}
	if err := syscall.Kill(inc.Root.PID, 0); err != nil {
		e.t.Fatalf("expected the wrapper (pid %d) alive … %v", inc.Root.PID, err)
	}
}

// TestProbeRowWithoutSessionIsUnknown: regression — a listing row with an
// empty session name (a garbled line) was dropped, the session it belonged
// to read missing, then dead: a live session crashed, its wrapper got
// SIGTERM and every relaunch failed with "duplicate session". The session
// reads unknown while the row cannot be attributed, and recovers after.
func TestProbeRowWithoutSessionIsUnknown(t *testing.T) {
	e := newRowEnv(t)
	inc := pendingWrapper(e, "wrap")
	blankRows(e, "^wrap-")
	e.poll("wrap-0 unknown", func() bool { return e.session("wrap-0").State == herd.StateUnknown })
	holdUnknown(e, "wrap-0", inc)
	// One episode of unknown, one event: it names the row with no session
	// name, unless a listing slower than the tick (a loaded machine) made
	// the session unknown a moment before, for that reason.
	evs := sessionEvents(e, "wrap-0", herd.EventProbeUnknown)
	if len(evs) != 1 || !(strings.Contains(evs[0].Message, "no session name") || strings.Contains(evs[0].Message, "listing")) {
		t.Errorf("expected one probe_unknown event naming the row with no session name … got %+v", evs)
	}

	blankRows(e, "")
	e.poll("wrap-0 pending again", func() bool { return e.session("wrap-0").State == herd.StatePending })
	if s := e.session("wrap-0"); s.Incarnation != inc.ID {
		t.Errorf("expected the same incarnation … got %s (was %s)", s.Incarnation, inc.ID)
	}
	if evs := sessionEvents(e, "wrap-0", herd.EventCrashed); len(evs) != 0 {
		t.Errorf("expected no crash … got %+v", evs)
	}
}

// tmuxSocketPath is where the tmux server of socket name listens.
func tmuxSocketPath(name string) string {
	dir := os.Getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	return filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), name)
}

// TestProbeSocketDeletedUnderLiveServer: a /tmp cleaner deletes the socket
// of a running server. tmux then says "No such file or directory", which
// also means no server: the sessions read unknown while the server that
// answered before still runs, never dead (a crash, a wrapper killed, a
// second server started for the relaunch). Once tmux recreates its socket
// (SIGUSR1) they read as before.
func TestProbeSocketDeletedUnderLiveServer(t *testing.T) {
	e := newRowEnv(t)
	inc := pendingWrapper(e, "wrap")
	p, _ := e.pane("wrap-0")
	sock := tmuxSocketPath(e.socket)
	t.Cleanup(func() {
		// Let the environment's cleanup reach the server to kill it.
		if _, err := os.Stat(sock); err != nil && syscall.Kill(p.ServerPID, syscall.SIGUSR1) == nil {
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(sock); err == nil {
					return
				}
			}
		}
	})
	e.poll("the server's pid remembered", func() bool {
		return e.d.tmux.ServerPID() == p.ServerPID
	})
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	e.poll("wrap-0 unknown", func() bool { return e.session("wrap-0").State == herd.StateUnknown })
	// A launch meanwhile must not start a second server on the socket
	// path: the first one's sessions would all read gone for good.
	if err := e.d.ApplyRoles(e.ctx(), []herd.Role{{Name: "late", Replicas: 1, Command: []string{"sleep", "3600"}, Workdir: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	e.poll("late-0's launch refused for the lost socket", func() bool {
		for _, ev := range sessionEvents(e, "late-0", herd.EventCrashed) {
			if strings.Contains(ev.Message, "socket is gone") {
				return true
			}
		}
		return false
	})
	holdUnknown(e, "wrap-0", inc)
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("a second tmux server was started on the socket path")
	}
	evs := sessionEvents(e, "wrap-0", herd.EventProbeUnknown)
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "socket is gone") {
		t.Errorf("expected one probe_unknown event about the socket … got %+v", evs)
	}

	if err := syscall.Kill(p.ServerPID, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	e.poll("wrap-0 pending again", func() bool { return e.session("wrap-0").State == herd.StatePending })
	if s := e.session("wrap-0"); s.Incarnation != inc.ID {
		t.Errorf("expected the same incarnation … got %s (was %s)", s.Incarnation, inc.ID)
	}
}

// TestInjectAndLogsReachTheAgentPane: regression — inject, logs and the
// watchdog's pane hash addressed the session's active pane: once a user
// split the agent's window and left the new pane active, inject typed into
// the user's shell. They address the pane herd launched.
func TestInjectAndLogsReachTheAgentPane(t *testing.T) {
	e := newRowEnv(t)
	e.role(herd.Role{Name: "cat", Replicas: 1, Command: []string{"cat"}})
	inc := openIncarnation(e, "cat-0")
	dir := t.TempDir()
	split := exec.Command("tmux", "-L", e.socket, "split-window", "-t", "=cat-0:", "-c", dir,
		"sh", "-c", "echo user-screen; exec cat > user.out")
	if out, err := split.CombinedOutput(); err != nil {
		t.Fatalf("split-window: %v %s", err, out)
	}
	e.poll("the user's pane active", func() bool {
		out, err := e.tm.Capture(e.ctx(), "cat-0", 0)
		return err == nil && strings.Contains(string(out), "user-screen")
	})

	err := e.api.Do(e.ctx(), http.MethodPost, "/v1/sessions/cat-0/inject", nil, api.InjectRequest{Text: "hello-agent", Enter: true}, nil)
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
	var logs []byte
	e.poll("the text in the agent's pane", func() bool {
		if err := e.api.Do(e.ctx(), http.MethodGet, "/v1/sessions/cat-0/logs", nil, nil, &logs); err != nil {
			t.Fatalf("logs: %v", err)
		}
		return strings.Contains(string(logs), "hello-agent")
	})
	if strings.Contains(string(logs), "user-screen") {
		t.Errorf("expected logs of the agent's pane only … got %q", logs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "user.out")); len(b) != 0 {
		t.Errorf("expected nothing typed into the user's pane … got %q", b)
	}

	// The watchdog finds the same pane in the prober's listing.
	panes, err := e.tm.ListPanes(e.ctx())
	if err != nil {
		t.Fatal(err)
	}
	agent, ok := tmux.FindPane(panes, "cat-0", inc.Root.PID)
	if !ok {
		t.Fatalf("expected the agent's pane listed … got %+v", panes)
	}
	e.poll("the prober's listing has the agent's pane", func() bool {
		p, ok := e.d.prober.Last().Own("cat-0", inc.Root.PID)
		return ok && p.ID == agent.PaneID
	})
	if s := e.session("cat-0"); s.State != herd.StateRunning || s.Incarnation != inc.ID {
		t.Errorf("expected cat-0 running, same incarnation … got %s %s", s.State, s.Incarnation)
	}
}
