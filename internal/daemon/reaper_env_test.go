package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/herdtest"
	"herd/internal/reaper"
	"herd/internal/runtime/tmux"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// reapWait bounds every poll of the reaper tests.
const reapWait = 30 * time.Second

var reapSocketSeq atomic.Int64

// reapEnv is an in-process daemon on a private tmux server, with a tmux
// wrapper in front of the real binary that can garble or fail listings.
type reapEnv struct {
	t        *testing.T
	d        *Daemon
	cfg      *config.Config
	st       store.Store
	api      *api.Client
	tm       *tmux.Client // the real tmux, on the test's socket
	socket   string
	stateDir string
	// bg bounds every call the test makes.
	bg context.Context
	// wrapDir holds the wrapper and its switches: a file "garble" holding
	// an awk regex of session names whose window_activity is garbled, and
	// a file "fail" that makes every listing fail.
	wrapDir string
}

// reapLogBuffer collects the daemon's log, shown when a test fails.
type reapLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *reapLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *reapLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newReapEnv starts a daemon whose reaper loop is off (interval 0) unless
// mut turns it on; tests run passes themselves.
func newReapEnv(t *testing.T, mut func(*config.Config)) *reapEnv {
	t.Helper()
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	e := &reapEnv{t: t, stateDir: t.TempDir(), wrapDir: t.TempDir()}
	bg, cancelBG := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancelBG)
	e.bg = bg
	e.socket = fmt.Sprintf("herd-reap-%d-%d", os.Getpid(), reapSocketSeq.Add(1))
	e.tm = &tmux.Client{Socket: e.socket, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.tm.KillServer(ctx); err != nil && !errors.Is(err, tmux.ErrNoServer) {
			t.Errorf("kill tmux server: %v", err)
		}
		dir := os.Getenv("TMUX_TMPDIR")
		if dir == "" {
			dir = "/tmp"
		}
		os.Remove(filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), e.socket))
	})

	wrapper := filepath.Join(e.wrapDir, "tmux")
	script := strings.ReplaceAll(reapWrapper, "REALTMUX", real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Tmux = config.Tmux{Socket: e.socket, Binary: wrapper}
	cfg.Probe.Timeout = 5 * time.Second
	cfg.Reaper.Interval = 0
	cfg.Reaper.IdleAfter = time.Second
	if mut != nil {
		mut(cfg)
	}
	e.cfg = cfg

	ctx, cancel := context.WithCancel(context.Background())
	ln, release, err := Listen(e.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(e.stateDir, "herd.db"))
	if err != nil {
		release()
		t.Fatal(err)
	}
	e.st = st
	logs := &reapLogBuffer{}
	d, err := New(Options{
		StateDir: e.stateDir, Config: cfg, Store: st, StopGrace: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		release()
		t.Fatal(err)
	}
	e.d = d
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		e.killExecLeftovers()
		release()
		st.Close()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	e.api = api.NewClient(SocketPath(e.stateDir))
	return e
}

// reapWrapper runs the real tmux; listings can be garbled or failed. It
// refuses control mode, so every call goes through it.
const reapWrapper = `#!/bin/sh
case " $* " in *" -C "*) echo "no control mode" >&2; exit 1 ;; esac
dir=$(dirname "$0")
case " $* " in
*" list-panes "*)
	if [ -e "$dir/fail" ]; then
		echo "error connecting to /tmp/tmux-0/herd (Permission denied)" >&2
		exit 1
	fi
	out=$(REALTMUX "$@") || exit $?
	pat=$(cat "$dir/garble" 2>/dev/null)
	printf '%s\n' "$out" | awk -F '\t' -v OFS='\t' -v pat="$pat" 'pat != "" && $1 ~ pat { $8 = "garbled" } { print }'
	exit 0
	;;
esac
exec REALTMUX "$@"
`

// garble makes the wrapper garble window_activity of sessions matching re.
func (e *reapEnv) garble(re string) {
	if err := os.WriteFile(filepath.Join(e.wrapDir, "garble"), []byte(re), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// failListings makes every listing fail (on) or work again.
func (e *reapEnv) failListings(on bool) {
	p := filepath.Join(e.wrapDir, "fail")
	if on {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	os.Remove(p)
}

// killExecLeftovers kills exec agents the test left running (they are not
// in the tmux server).
func (e *reapEnv) killExecLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.st.View(ctx, func(tx store.Tx) error {
		incs, err := tx.OpenIncarnations()
		for _, inc := range incs {
			if inc.RuntimeKind == herd.RuntimeExec && !inc.Root.Zero() && e.d.proc.Check(inc.Root, e.d.bootID) == herd.Alive {
				syscall.Kill(-inc.Root.PID, syscall.SIGKILL)
			}
		}
		return err
	})
}

func (e *reapEnv) ctx() context.Context { return e.bg }

// poll calls cond until it holds, failing the test at the deadline.
func (e *reapEnv) poll(what string, cond func() bool) {
	e.t.Helper()
	herdtest.WaitFor(e.t, what, reapWait, cond)
}

// role declares a role and waits until its replicas run.
func (e *reapEnv) role(r herd.Role) {
	e.t.Helper()
	if r.Workdir == "" {
		r.Workdir = e.t.TempDir()
	}
	if err := e.d.ApplyRoles(e.ctx(), []herd.Role{r}); err != nil {
		e.t.Fatalf("apply %s: %v", r.Name, err)
	}
	e.poll(fmt.Sprintf("%d replica(s) of %s running", r.Replicas, r.Name), func() bool {
		n := 0
		for _, s := range e.sessions() {
			if s.Role == r.Name && s.State == herd.StateRunning {
				n++
			}
		}
		return n == r.Replicas
	})
}

func (e *reapEnv) sessions() map[string]herd.Session {
	e.t.Helper()
	out := map[string]herd.Session{}
	err := e.st.View(e.ctx(), func(tx store.Tx) error {
		all, err := tx.Sessions()
		for _, s := range all {
			out[s.Name] = s
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *reapEnv) session(name string) herd.Session {
	e.t.Helper()
	s, ok := e.sessions()[name]
	if !ok {
		e.t.Fatalf("no session %s", name)
	}
	return s
}

func (e *reapEnv) replicas(role string) int {
	e.t.Helper()
	r, err := e.d.status.Role(e.ctx(), role)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Replicas
}

// reapedEvents returns the reaped events by session.
func (e *reapEnv) reapedEvents() map[string][]herd.Event {
	e.t.Helper()
	out := map[string][]herd.Event{}
	err := e.st.View(e.ctx(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Kind: herd.EventReaped})
		for _, ev := range evs {
			out[ev.Session] = append(out[ev.Session], ev)
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// hasTmux reports whether the tmux session exists on the test's server.
func (e *reapEnv) hasTmux(name string) bool {
	e.t.Helper()
	ok, err := e.tm.HasSession(e.ctx(), name)
	if err != nil {
		e.t.Fatalf("has-session %s: %v", name, err)
	}
	return ok
}

// pane returns what the real tmux lists for session name.
func (e *reapEnv) pane(name string) (tmux.Pane, bool) {
	e.t.Helper()
	panes, err := e.tm.ListPanes(e.ctx())
	if err != nil && !errors.Is(err, tmux.ErrNoServer) {
		e.t.Fatalf("list panes: %v", err)
	}
	for _, p := range panes {
		if p.Session == name {
			return p, true
		}
	}
	return tmux.Pane{}, false
}

// attach attaches a real client to session name (a terminal client under
// script(1), else a control-mode client) and waits until tmux counts it.
func (e *reapEnv) attach(name string) {
	e.t.Helper()
	var cmd *exec.Cmd
	if _, err := exec.LookPath("script"); err == nil {
		cmd = exec.Command("script", "-qfc", fmt.Sprintf("tmux -L %s attach -t =%s", e.socket, name), "/dev/null")
	} else {
		cmd = exec.Command("tmux", "-L", e.socket, "-C", "attach", "-t", "="+name)
	}
	env := []string{"TERM=xterm"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "TERM=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe() // kept open: the client stays attached
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("attach %s: %v", name, err)
	}
	e.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stdin.Close()
		cmd.Wait()
	})
	e.poll(name+" attached", func() bool {
		p, ok := e.pane(name)
		return ok && p.Err == nil && p.Attached > 0
	})
}

// pass runs one reaper pass and fails the test on error.
func (e *reapEnv) pass(o reaper.PassOptions) api.ReapReport {
	e.t.Helper()
	rep, err := e.d.reaper.Pass(e.ctx(), o)
	if err != nil {
		e.t.Fatalf("reap pass: %v", err)
	}
	return rep
}

// waitVerdict runs dry passes until session name gets verdict/reason.
func (e *reapEnv) waitVerdict(name, verdict, reason string) {
	e.t.Helper()
	var last api.ReapCandidate
	deadline := time.Now().Add(reapWait)
	for {
		rep := e.pass(reaper.PassOptions{DryRun: true})
		last, _ = reapFind(rep, name)
		if last.Verdict == verdict && last.Reason == reason {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s to be %s/%s: last %+v", name, verdict, reason, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func reapFind(rep api.ReapReport, name string) (api.ReapCandidate, bool) {
	for _, c := range rep.Candidates {
		if c.Session == name {
			return c, true
		}
	}
	return api.ReapCandidate{}, false
}

var _ io.Writer = (*reapLogBuffer)(nil)
