package slots

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/prober"
	"herd/internal/proc"
	"herd/internal/reconcile"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// gateRuntime starts real children like fakeRuntime, but each Start waits
// at a gate the test opens, and it counts the starts under way at once.
type gateRuntime struct {
	fakeRuntime
	gate chan struct{}
	once sync.Once

	mu       sync.Mutex // guards the fields below
	inFlight int
	most     int
	pids     []int
}

func (g *gateRuntime) Start(ctx context.Context, spec runtime.Spec, prev int) (runtime.Started, error) {
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	<-g.gate
	l, err := g.fakeRuntime.Start(ctx, spec, prev)
	g.mu.Lock()
	g.inFlight--
	if err == nil {
		g.pids = append(g.pids, l.RootPID)
	}
	g.mu.Unlock()
	return l, err
}

// open lets every start through, now and later.
func (g *gateRuntime) open() { g.once.Do(func() { close(g.gate) }) }

// waiting is the number of starts held at the gate now.
func (g *gateRuntime) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

// newWaveEnv is a Slots with one exec role of replicas sessions, started
// by a gateRuntime.
func newWaveEnv(t *testing.T, replicas int) (*Slots, *status.Manager, *gateRuntime) {
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
	policy := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Minute, MaxBackoff: time.Hour, ResetAfter: time.Hour, MaxRestarts: 3}
	st := status.New(db, "h", policy, log)
	p := prober.New(prober.Options{Status: st, Proc: proc.Real(), BootID: boot, Interval: time.Second, Concurrency: 2, Log: log})
	rt := &gateRuntime{gate: make(chan struct{})}
	sl := New(Options{Status: st, Prober: p, Runtimes: map[string]runtime.Runtime{herd.RuntimeExec: rt}, Proc: proc.Real(), BootID: boot,
		Grace: time.Second, Interval: time.Second, Log: log})
	t.Cleanup(func() {
		sl.Close()
		p.Close()
		db.Close()
		rt.mu.Lock()
		defer rt.mu.Unlock()
		for _, pid := range rt.pids {
			syscall.Kill(-pid, syscall.SIGKILL) // its own session and group (Setsid)
		}
	})
	t.Cleanup(rt.open) // first: a failed test leaves no launch held at the gate
	role := herd.Role{Name: "w", Replicas: replicas, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeExec, Agent: herd.AgentGeneric}
	if err := putRoles(context.Background(), st, policy, []herd.Role{role}); err != nil {
		t.Fatal(err)
	}
	return sl, st, rt
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, 10*time.Second, cond)
}

// TestReconcileLaunchesSideBySide: one round's launches run at most
// maxParallelLaunches at a time, Reconcile returns only once all are done,
// and each session ends running with one spawned event.
func TestReconcileLaunchesSideBySide(t *testing.T) {
	const n = 3*maxParallelLaunches + 1
	sl, st, rt := newWaveEnv(t, n)
	done := make(chan struct{})
	go func() {
		sl.Reconcile(context.Background())
		close(done)
	}()
	waitFor(t, fmt.Sprintf("%d launches waiting at once", maxParallelLaunches), func() bool { return rt.waiting() == maxParallelLaunches })
	select {
	case <-done:
		t.Fatal("expected Reconcile to wait for its launches … it returned")
	default:
	}
	rt.open()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("expected Reconcile to return once its launches were done")
	}
	rt.mu.Lock()
	most := rt.most
	rt.mu.Unlock()
	if most != maxParallelLaunches {
		t.Errorf("expected at most %d launches at once … got %d", maxParallelLaunches, most)
	}
	all, _, err := st.Live(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, s := range all {
		if s.State == herd.StateRunning {
			running++
		}
	}
	if running != n {
		t.Errorf("expected %d sessions running … got %d of %d", n, running, len(all))
	}
	var spawned map[string]int
	st.Store().View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Kind: herd.EventSpawned})
		spawned = map[string]int{}
		for _, e := range evs {
			spawned[e.Session]++
		}
		return err
	})
	for i := range n {
		if name := fmt.Sprintf("w-%d", i); spawned[name] != 1 {
			t.Errorf("[%s] expected one spawned event … got %d", name, spawned[name])
		}
	}
}

// TestReconcileShutdownMidWave: a shutdown during a round starts no more
// launches, and each launch already under way is recorded (the agent it
// started has its incarnation on record, running): no agent is left
// unrecorded, none started twice.
func TestReconcileShutdownMidWave(t *testing.T) {
	const n = 2 * maxParallelLaunches
	sl, st, rt := newWaveEnv(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		sl.Reconcile(ctx)
		close(done)
	}()
	waitFor(t, "a full wave waiting", func() bool { return rt.waiting() == maxParallelLaunches })
	cancel()
	rt.open()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("expected Reconcile to return after the shutdown")
	}
	rt.fakeRuntime.mu.Lock()
	starts := append([]runtime.Spec(nil), rt.starts...)
	rt.fakeRuntime.mu.Unlock()
	if len(starts) != maxParallelLaunches {
		t.Errorf("expected only the launches under way to start (%d) … got %d", maxParallelLaunches, len(starts))
	}
	for _, spec := range starts {
		s, err := st.Session(context.Background(), spec.Session)
		if err != nil {
			t.Fatalf("[%s] expected a record … got %v", spec.Session, err)
		}
		if s.Incarnation != spec.Incarnation || s.State != herd.StateRunning {
			t.Errorf("[%s] expected its started incarnation %s on record, running … got %s %s", spec.Session, spec.Incarnation, s.Incarnation, s.State)
		}
		inc, err := st.Incarnation(context.Background(), spec.Incarnation)
		if err != nil || inc.Identity.Marker != spec.Incarnation {
			t.Errorf("[%s] expected the agent's identity recorded … got %+v, %v", spec.Session, inc.Identity, err)
		}
	}
}

// TestRestartHoldsItsSlot: a session whose restart is under way holds its
// slot, though it is stopped between the restart's stop and its launch. A
// role scaled by the task queue (replicas 1, max_replicas 2) planned at
// that moment launches no other slot in its place — before, the lowest
// free index was launched, and once the restart was done the restarted
// replica was stopped as one too many.
func TestRestartHoldsItsSlot(t *testing.T) {
	sl, st, rt := newWaveEnv(t, 1)
	rt.open()
	ctx := context.Background()
	policy := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Minute, MaxBackoff: time.Hour, ResetAfter: time.Hour, MaxRestarts: 3}
	// A task role runs in tmux: the gate runtime stands in for it.
	sl.o.Runtimes[herd.RuntimeTmux] = rt
	role := herd.Role{Name: "w", Replicas: 1, MaxReplicas: 2, Tasks: true, Command: []string{"sleep", "60"}, Workdir: t.TempDir(), Runtime: herd.RuntimeTmux, Agent: herd.AgentGeneric}
	if err := putRoles(ctx, st, policy, []herd.Role{role}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	demand := reconcile.Demand{Want: map[string]int{"w": 2}, Known: true}
	sl.o.Demand = func() reconcile.Demand {
		mu.Lock()
		defer mu.Unlock()
		return demand
	}
	state := func(name string) herd.State {
		s, err := st.Session(ctx, name)
		if err != nil {
			t.Fatalf("[%s] %v", name, err)
		}
		return s.State
	}
	sl.Reconcile(ctx)
	for _, name := range []string{"w-0", "w-1"} {
		if got := state(name); got != herd.StateRunning {
			t.Fatalf("[%s] expected running for a demand of 2 … got %s", name, got)
		}
		if err := sl.Stop(ctx, StopRequest{Name: name, Reason: herd.ReasonUser}); err != nil {
			t.Fatal(err)
		}
	}
	// w-1 between its restart's stop and its launch; the queue wants one.
	end := sl.beginRestart("w-1")
	mu.Lock()
	demand = reconcile.Demand{Want: map[string]int{"w": 1}, Keep: map[string]bool{"w-1": true}, Known: true}
	mu.Unlock()
	sl.Reconcile(ctx)
	if got := state("w-0"); got != herd.StateStopped {
		t.Errorf("expected w-0 left stopped while w-1's restart holds the one slot wanted … got %s", got)
	}
	end()
	if got := sl.holdRestarting([]herd.Session{{Name: "w-1", State: herd.StateStopped}}); got[0].State != herd.StateStopped {
		t.Errorf("expected the hold to end with the restart … got %s", got[0].State)
	}
}
