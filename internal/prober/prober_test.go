package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/liveness"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/tmux"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// TestRuntimeAxis: the runtime axis reads the agent's own pane; a session
// missing beside a row with no session name is unknown, never missing; a
// session missing from two good listings in a row is dead, from one only
// it is re-checked.
func TestRuntimeAxis(t *testing.T) {
	p := New(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Close()
	user := tmux.Pane{Session: "w-0", PaneID: "%2", PID: 11}
	agent := tmux.Pane{Session: "w-0", PaneID: "%1", PID: 10, Dead: true}
	nameless := tmux.Pane{Err: errors.New("empty session_name")}
	withNameless := tmux.Parse([]tmux.Pane{user, agent, nameless}, nil, 0)

	rt, why := p.runtimeAxis("gone-0", 10, withNameless)
	if rt.Axis != herd.Unknown || rt.MissingOnce || why == "" {
		t.Errorf("[nameless row] expected a missing session unknown … got %+v %q", rt, why)
	}
	if rt, _ = p.runtimeAxis("w-0", 10, withNameless); rt.Axis != herd.Dead {
		t.Errorf("[own pane] expected the agent's dead pane read … got %+v", rt)
	}
	clean := tmux.Parse([]tmux.Pane{user}, nil, 0)
	if rt, _ = p.runtimeAxis("w-1", 20, clean); rt.Axis != herd.Dead || !rt.MissingOnce {
		t.Errorf("[missing once] expected dead, to be re-checked … got %+v", rt)
	}
	if rt, _ = p.runtimeAxis("w-1", 20, clean); rt.Axis != herd.Dead || rt.MissingOnce {
		t.Errorf("[missing twice] expected dead … got %+v", rt)
	}
	p.Launched("w-1")
	if rt, _ = p.runtimeAxis("w-1", 20, clean); !rt.MissingOnce {
		t.Errorf("[relaunched] expected the count to start over … got %+v", rt)
	}
	if rt, why = p.runtimeAxis("w-0", 11, tmux.Parse(nil, errors.New("boom"), 0)); rt.Axis != herd.Unknown || why == "" {
		t.Errorf("[failed listing] expected unknown with a reason … got %+v %q", rt, why)
	}
}

// TestMassDeathBreaker: one listing that would account most sessions dead
// on its own word is inconclusive: no crash is accounted, the sessions are
// unknown, one probe_unknown event says mass_death. A death the process
// axis proves is accounted whatever the breaker says; below the fraction
// every death is accounted.
func TestMassDeathBreaker(t *testing.T) {
	for _, c := range []struct {
		name          string
		sessions      int
		dead          int // listed with a dead pane, agent never identified
		proven        int // of those, with an identity that reads dead in /proc
		wantCrashed   int
		wantMassEvent bool
	}{
		{"80% dead on the listing's word", 10, 8, 0, 0, true},
		{"half dead: not more than the fraction", 10, 5, 0, 5, false},
		{"too few sessions to judge", 4, 4, 0, 4, false},
		{"proven deaths are accounted anyway", 10, 9, 3, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, st := newStatusProber(t)
			boot, _ := proc.BootID()
			var ds []tmuxVerdict
			var panes []tmux.Pane
			for i := range c.sessions {
				name := fmt.Sprintf("w-%d", i)
				inc := herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", RuntimeKind: herd.RuntimeTmux, StartedAt: time.Now().UTC(),
					Root: herd.Identity{BootID: boot, PID: 100000 + i, StartTime: 1}}
				if i < c.proven {
					inc.Identity = inc.Root // reads dead: no such start time
				}
				seedSession(t, st, name, inc)
				panes = append(panes, tmux.Pane{Session: name, PaneID: fmt.Sprintf("%%%d", i), PID: inc.Root.PID, Dead: i < c.dead})
				ds = append(ds, tmuxVerdict{})
				ds[i].s, _ = st.Session(context.Background(), name)
				ds[i].inc = inc
			}
			snap := tmux.Parse(panes, nil, 0)
			for i := range ds {
				if i >= c.dead {
					ds[i] = tmuxVerdict{s: ds[i].s, inc: ds[i].inc, v: liveness.Verdict{State: herd.StateRunning}}
					continue
				}
				ds[i] = p.decideTmux(context.Background(), ds[i].s, ds[i].inc, snap)
			}
			p.breakMassDeath(context.Background(), ds)
			for _, d := range ds {
				if d.v.Action == liveness.Crash {
					p.recordDeath(context.Background(), status.Death{Session: d.s.Name, Incarnation: d.inc.ID, Exit: d.v.Exit})
				}
			}
			crashed, mass := 0, 0
			st.Store().View(context.Background(), func(tx store.Tx) error {
				evs, _ := tx.Events(store.EventFilter{})
				for _, e := range evs {
					switch {
					case e.Kind == herd.EventCrashed:
						crashed++
					case e.Kind == herd.EventProbeUnknown && e.Reason == liveness.ReasonMassDeath:
						mass++
					}
				}
				return nil
			})
			if crashed != c.wantCrashed || (mass == 1) != c.wantMassEvent || mass > 1 {
				t.Errorf("expected %d crashes and mass_death event %v … got %d crashes, %d events", c.wantCrashed, c.wantMassEvent, crashed, mass)
			}
		})
	}
}

func newStatusProber(t testing.TB) (*Prober, *status.Manager) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	policy := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Minute, MaxBackoff: time.Hour, ResetAfter: time.Hour, MaxRestarts: 3}
	st := status.New(db, "h", policy, log)
	boot, _ := proc.BootID()
	p := New(Options{Status: st, Proc: proc.Real(), BootID: boot, Interval: time.Second, Concurrency: 4, MassDeathFraction: 0.5, Log: log})
	t.Cleanup(p.Close)
	return p, st
}

func seedSession(t testing.TB, st *status.Manager, name string, inc herd.Incarnation) {
	t.Helper()
	err := st.Store().Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 10, Command: []string{"x"}, Runtime: herd.RuntimeTmux}); err != nil {
			return err
		}
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		return tx.PutSession(herd.Session{Name: name, Role: "w", Host: "h", RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning,
			Runtime: herd.Alive, Process: herd.Alive, Incarnation: inc.ID, StateSince: time.Now().UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnfinishedLaunchResolved: regression — a daemon killed between
// starting an agent and recording it left the agent unrecorded, and the
// next daemon launched a second one beside it. The launch's write-ahead
// record is now resolved: the process carrying its marker is adopted (no
// second launch); with none, the launch is accounted as failed. A young
// record belongs to the launch still running and is left alone.
func TestUnfinishedLaunchResolved(t *testing.T) {
	p, st := newStatusProber(t)
	seed := func(name string, age time.Duration) herd.Incarnation {
		inc := herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", RuntimeKind: herd.RuntimeExec,
			Argv: []string{"sleep", "300"}, StartedAt: time.Now().Add(-age).UTC()}
		seedSession(t, st, name, inc)
		st.Store().Update(context.Background(), func(tx store.Tx) error {
			s, _ := tx.Session(name)
			s.State = herd.StatePending
			return tx.PutSession(s)
		})
		return inc
	}
	orphan := seed("w-0", time.Minute)
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), herd.EnvIncarnation+"="+orphan.ID)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	herdtest.AwaitExec(t, cmd.Process.Pid)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	seed("w-1", time.Minute)          // nothing was started
	young := seed("w-2", time.Second) // its launch is still running

	p.Once(context.Background())

	s0, _ := st.Session(context.Background(), "w-0")
	inc0, _ := st.Incarnation(context.Background(), orphan.ID)
	if s0.State != herd.StateRunning || inc0.Root.PID != cmd.Process.Pid || inc0.Identity.Marker != orphan.ID {
		t.Errorf("[orphan] expected the marked process adopted … got %s, root %+v", s0.State, inc0.Root)
	}
	s1, _ := st.Session(context.Background(), "w-1")
	if (s1.State != herd.StateBackoff && s1.State != herd.StateCrashed) || s1.Exit == nil || s1.Exit.Reason != herd.ReasonLaunchFailed {
		t.Errorf("[nothing started] expected a failed launch accounted … got %s %+v", s1.State, s1.Exit)
	}
	s2, _ := st.Session(context.Background(), "w-2")
	inc2, _ := st.Incarnation(context.Background(), young.ID)
	if s2.State != herd.StatePending || inc2.EndedAt != nil {
		t.Errorf("[young] expected the running launch's record left alone … got %s", s2.State)
	}
}

// TestLaunchingNotUnmanaged: a herd-named tmux session whose launch has
// begun, and whose record is not written yet, is not reported unmanaged;
// one nobody launched is.
func TestLaunchingNotUnmanaged(t *testing.T) {
	p, _ := newStatusProber(t)
	p.Launched("w-1")
	snap := runtime.Snapshot{Panes: map[string][]runtime.Pane{
		"w-0": {{Session: "w-0", ID: "%1", PID: 11}},
		"w-1": {{Session: "w-1", ID: "%2", PID: 12}},
	}}
	p.remember(snap, nil)
	var got []string
	for _, u := range p.Unmanaged() {
		got = append(got, u.Session)
	}
	if len(got) != 1 || got[0] != "w-0" {
		t.Errorf("expected only w-0 unmanaged, got %v", got)
	}
}

// TestMarkAliveWatchesAfterCommit: a mark-alive write that rolls back
// registers no watcher (a later round must still adopt the agent, with its
// event); one that commits does.
func TestMarkAliveWatchesAfterCommit(t *testing.T) {
	p, st := newStatusProber(t)
	boot, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := proc.Real().Identify(cmd.Process.Pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	inc := herd.Incarnation{ID: "inc-a", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: time.Now().UTC()}
	// The session points at inc-a, whose row is missing: the write fails
	// and rolls back.
	err = st.Store().Update(context.Background(), func(tx store.Tx) error {
		return tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", RuntimeKind: herd.RuntimeTmux, State: herd.StatePending, Incarnation: inc.ID, StateSince: time.Now().UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
	s := herd.Session{Name: "w-0"}
	p.markAlive(context.Background(), s, inc, herd.EventAdopted)
	if p.isWatched(inc) {
		t.Fatal("[rolled back] expected no watcher, got one")
	}
	seedSession(t, st, "w-0", inc)
	p.markAlive(context.Background(), s, inc, herd.EventAdopted)
	if !p.isWatched(inc) {
		t.Fatal("[committed] expected a watcher, got none")
	}
	var adopted []herd.Event
	st.Store().View(context.Background(), func(tx store.Tx) (err error) {
		adopted, err = tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventAdopted})
		return err
	})
	if len(adopted) != 1 {
		t.Errorf("expected one adopted event, got %d", len(adopted))
	}
}
