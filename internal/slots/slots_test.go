package slots

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/prober"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// fakeRuntime starts real children (so the stop path has a real process to
// verify and signal) or fails on demand, and records what it was asked.
type fakeRuntime struct {
	mu      sync.Mutex
	fail    error
	starts  []runtime.Spec
	removed []string
	// removeFails is how many Remove calls fail before one succeeds.
	removeFails int
}

var _ runtime.Runtime = (*fakeRuntime)(nil)

func (f *fakeRuntime) Start(_ context.Context, spec runtime.Spec, _ int) (runtime.Started, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, spec)
	if f.fail != nil {
		return runtime.Started{}, f.fail
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return runtime.Started{}, err
	}
	return runtime.Started{RootPID: cmd.Process.Pid, Wait: func() herd.Exit { return execrt.ExitOf(cmd.ProcessState, cmd.Wait()) }}, nil
}

func (f *fakeRuntime) Remove(_ context.Context, inc herd.Incarnation) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, inc.ID)
	if f.removeFails > 0 {
		f.removeFails--
		return errors.New("tmux: listing unreadable; left in place")
	}
	return nil
}

func (f *fakeRuntime) Capture(context.Context, herd.Incarnation, int) ([]byte, error) {
	return nil, nil
}
func (f *fakeRuntime) Inject(context.Context, herd.Incarnation, string, bool) error { return nil }

type env struct {
	sl *Slots
	st *status.Manager
	rt *fakeRuntime
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	policy := testPolicy
	st := status.New(db, "h", policy, log)
	p := prober.New(prober.Options{Status: st, Proc: proc.Real(), BootID: boot, Interval: time.Second, Concurrency: 2, Log: log})
	rt := &fakeRuntime{}
	sl := New(Options{Status: st, Prober: p, Runtimes: map[string]runtime.Runtime{herd.RuntimeExec: rt}, Proc: proc.Real(), BootID: boot,
		Grace: time.Second, Interval: time.Second, Log: log})
	t.Cleanup(func() {
		sl.Close()
		p.Close()
		db.Close()
	})
	if err := putRoles(context.Background(), st, policy, []herd.Role{{Name: "w", Replicas: 1, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric}}); err != nil {
		t.Fatal(err)
	}
	return &env{sl: sl, st: st, rt: rt}
}

func (e *env) session(t *testing.T) herd.Session {
	t.Helper()
	s, err := e.st.Session(context.Background(), "w-0")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) count(t *testing.T, kind string) int {
	t.Helper()
	var n int
	e.st.Store().View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Session: "w-0", Kind: kind})
		n = len(evs)
		return err
	})
	return n
}

// TestLaunchFailureIsACrash: a runtime that cannot start the agent goes
// through crash accounting: backoff, a crashed event, no tight loop.
func TestLaunchFailureIsACrash(t *testing.T) {
	e := newEnv(t)
	e.rt.fail = errors.New("no such binary")
	e.sl.Reconcile(context.Background())
	e.sl.Reconcile(context.Background()) // still in backoff: no second launch
	s := e.session(t)
	if s.State != herd.StateBackoff || s.Exit == nil || s.Exit.Reason != herd.ReasonLaunchFailed {
		t.Fatalf("expected backoff after launch_failed … got %s %+v", s.State, s.Exit)
	}
	if n := len(e.rt.starts); n != 1 {
		t.Errorf("expected one start during the backoff … got %d", n)
	}
	if n := e.count(t, herd.EventCrashed); n != 1 {
		t.Errorf("expected one crashed event … got %d", n)
	}
}

// TestLaunchThenStop: a launch records a running incarnation with the
// identity of the started process and the HERD_* environment; the one stop
// path takes it down, records one stopped event with a snapshot, drops the
// replica, and asks the runtime to remove what is left.
func TestLaunchThenStop(t *testing.T) {
	e := newEnv(t)
	e.sl.Reconcile(context.Background())
	s := e.session(t)
	if s.State != herd.StateRunning || s.Process != herd.Alive {
		t.Fatalf("expected running … got %s/%s", s.State, s.Process)
	}
	spec := e.rt.starts[0]
	if spec.Env[herd.EnvIncarnation] != s.Incarnation || spec.Env[herd.EnvSession] != "w-0" {
		t.Errorf("expected the incarnation marker in the agent's env … got %v", spec.Env)
	}
	inc, err := e.st.Incarnation(context.Background(), s.Incarnation)
	if err != nil || inc.Identity.Zero() || inc.Identity.Marker != s.Incarnation {
		t.Fatalf("expected the agent's verified identity recorded … got %+v, %v", inc.Identity, err)
	}
	if err := e.sl.Stop(context.Background(), StopRequest{Name: "w-0", Reason: herd.ReasonUser, DropReplica: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.sl.Stop(context.Background(), StopRequest{Name: "w-0", Reason: herd.ReasonUser, DropReplica: true}); !errors.Is(err, ErrAlreadyStopped) {
		t.Errorf("expected a second stop to find it stopped … got %v", err)
	}
	s = e.session(t)
	if s.State != herd.StateStopped || s.Snapshot == nil || s.Snapshot.Argv[0] != "sleep" {
		t.Errorf("expected stopped with a snapshot … got %s %+v", s.State, s.Snapshot)
	}
	if axis := proc.Real().Check(inc.Identity, inc.Identity.BootID); axis != herd.Dead {
		t.Errorf("expected the agent dead … got %s", axis)
	}
	if n := e.count(t, herd.EventStopped); n != 1 {
		t.Errorf("expected exactly one stopped event … got %d", n)
	}
	if n := e.count(t, herd.EventCrashed); n != 0 {
		t.Errorf("expected the stop not counted as a crash … got %d", n)
	}
	if r, _ := e.st.Role(context.Background(), "w"); r.Replicas != 0 {
		t.Errorf("expected the replica dropped … got %d", r.Replicas)
	}
	if len(e.rt.removed) != 1 || e.rt.removed[0] != inc.ID {
		t.Errorf("expected the runtime asked to remove the incarnation once … got %v", e.rt.removed)
	}
}

// TestLeftoverRetriedAndReported: what a stop cannot remove (the runtime
// refuses twice) is reported, retried until removed, and reported again:
// never silently left.
func TestLeftoverRetriedAndReported(t *testing.T) {
	e := newEnv(t)
	e.rt.removeFails = 2
	e.sl.Reconcile(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.sl.td.Run(ctx)
	if err := e.sl.Stop(context.Background(), StopRequest{Name: "w-0", Reason: herd.ReasonUser, DropReplica: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.count(t, herd.EventLeftover) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	var reasons []string
	e.st.Store().View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventLeftover})
		for _, ev := range evs {
			reasons = append(reasons, ev.Reason)
		}
		return err
	})
	if want := []string{"left_behind", "removed"}; !slices.Equal(reasons, want) {
		t.Errorf("expected leftover events %v … got %v", want, reasons)
	}
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	if n := len(e.rt.removed); n != 3 {
		t.Errorf("expected the stop's removal and two retries … got %d calls", n)
	}
}

// putRoles declares roles as an apply does: restart fields left zero take
// the defaults, each is validated and declared on this host.
func putRoles(ctx context.Context, st *status.Manager, defaults herd.RestartPolicy, roles []herd.Role) error {
	return st.WriteRoles(ctx, func(tx store.Tx, rearm status.Rearm) error {
		for _, ro := range roles {
			if ro.Restart.InitialBackoff == 0 {
				ro = config.ResolveRole(ro, defaults)
			}
			if err := config.ValidateRole(ro); err != nil {
				return err
			}
			ro.Host = st.Host()
			ro.UpdatedAt = time.Now().UTC()
			if err := tx.PutRole(ro); err != nil {
				return err
			}
			if err := rearm(ro.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// testPolicy is the [restart] default of the tests' roles.
var testPolicy = herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Minute, MaxBackoff: time.Hour, ResetAfter: time.Hour, MaxRestarts: 3}
