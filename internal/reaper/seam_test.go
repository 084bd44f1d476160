package reaper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/runtime/tmux"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

var (
	_ Lister  = (*tmux.Runtime)(nil)
	_ Stopper = (*slots.Slots)(nil)
	_ Outputs = (*execrt.Runtime)(nil)
)

// fakeLister answers the n-th listing of a pass with the n-th snapshot of
// its script (the last one again once the script is spent), and records
// the unmanaged sessions killed.
type fakeLister struct {
	mu     sync.Mutex // guards the fields below
	script []runtime.Snapshot
	listed int
	killed []string
}

func (f *fakeLister) List(context.Context) runtime.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.listed, len(f.script)-1)
	f.listed++
	return f.script[i]
}

// ObserveSession is the next listing of the script, narrowed to session
// name, as a listing of that session alone shows it.
func (f *fakeLister) ObserveSession(ctx context.Context, name string) runtime.Snapshot {
	snap := f.List(ctx)
	if snap.Panes != nil {
		snap.Panes = map[string][]runtime.Pane{name: snap.Panes[name]}
		if len(snap.Panes[name]) == 0 {
			delete(snap.Panes, name)
		}
	}
	return snap
}

func (f *fakeLister) KillUnmanaged(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.killed = append(f.killed, name)
	return nil
}

// fakeStopper stops a session the way the stop path does as far as the
// reaper can tell: it runs the guard on the stored session, and records
// the stops that got past it.
type fakeStopper struct {
	st      *status.Manager
	mu      sync.Mutex // guards stopped
	stopped []slots.StopRequest
}

func (f *fakeStopper) KillContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

func (f *fakeStopper) Stop(ctx context.Context, req slots.StopRequest) error {
	s, err := f.st.Session(ctx, req.Name)
	if err != nil {
		return err
	}
	if req.Incarnation != "" && s.Incarnation != req.Incarnation {
		return slots.ErrAlreadyStopped
	}
	if req.Guard != nil {
		if err := req.Guard(s); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, req)
	return nil
}

func (*fakeStopper) RemoveWorktree(context.Context, string) {}

// noOutputs: no exec session in these tests.
type noOutputs struct{}

func (noOutputs) Paths(string, string) (string, string) { return "", "" }

// pane is w-0's agent pane (pid 4242) as a listing shows it.
func pane(attached int) tmux.Pane {
	return tmux.Pane{Session: "w-0", PaneID: "%1", PID: 4242, Attached: attached, WindowActivity: time.Now().Add(-time.Hour)}
}

// TestPassThroughFakes: one reaper pass alone, its runtimes fakes, over an
// archived session w-0 (eligible once detached) and, where listed, a
// herd-named tmux session w-9 with no record. An attached session is
// never reaped; an unreadable listing or row never reads as gone; the
// re-check lists again just before the kill, and someone attaching (or a
// new pane) meanwhile keeps the session.
func TestPassThroughFakes(t *testing.T) {
	gone := errors.New("tmux: timed out")
	for _, c := range []struct {
		name string
		// listings are the pass's listings in turn: the first, the
		// re-check, the last look under the lock.
		listings     [][]tmux.Pane
		listErr      error
		wantErr      bool
		wantStopped  int
		wantKilled   []string
		wantW0Action string
	}{
		{name: "detached: reaped", listings: [][]tmux.Pane{{pane(0)}},
			wantStopped: 1, wantW0Action: api.ReapActionReaped},
		{name: "attached: kept", listings: [][]tmux.Pane{{pane(1)}},
			wantW0Action: api.ReapActionKept},
		{name: "listing failed: the pass aborts", listErr: gone, wantErr: true},
		{name: "garbled row: unknown, skipped", listings: [][]tmux.Pane{{{Session: "w-0", PaneID: "%1", Err: errors.New("garbled session_attached")}}},
			wantW0Action: api.ReapActionSkipped},
		{name: "missing beside a row of no name: unknown, never gone", listings: [][]tmux.Pane{{{Err: errors.New("empty session_name")}}},
			wantW0Action: api.ReapActionSkipped},
		{name: "absent from the listing: the prober's to decide", listings: [][]tmux.Pane{{}},
			wantW0Action: api.ReapActionSkipped},
		{name: "attached between the listing and the re-check: kept", listings: [][]tmux.Pane{{pane(0)}, {pane(1)}},
			wantW0Action: api.ReapActionSkipped},
		{name: "attached just before the kill: kept", listings: [][]tmux.Pane{{pane(0)}, {pane(0)}, {pane(1)}},
			wantW0Action: api.ReapActionSkipped},
		{name: "a different pane at the re-check: kept", listings: [][]tmux.Pane{{pane(0)}, {{Session: "w-0", PaneID: "%7", PID: 4242}}},
			wantW0Action: api.ReapActionSkipped},
		{name: "unmanaged herd-named session, detached: killed", listings: [][]tmux.Pane{{pane(0), {Session: "w-9", PaneID: "%9", PID: 99}}},
			wantStopped: 1, wantKilled: []string{"w-9"}, wantW0Action: api.ReapActionReaped},
		{name: "unmanaged herd-named session, attached: kept", listings: [][]tmux.Pane{{pane(0), {Session: "w-9", PaneID: "%9", PID: 99, Attached: 1}}},
			wantStopped: 1, wantW0Action: api.ReapActionReaped},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _, fl, fs := newSeamReaper(t)
			for _, l := range c.listings {
				fl.script = append(fl.script, tmux.Parse(l, nil, 0))
			}
			if c.listErr != nil {
				fl.script = []runtime.Snapshot{tmux.Parse(nil, c.listErr, 0)}
			}
			rep, err := r.Pass(context.Background(), PassOptions{})
			if (err != nil) != c.wantErr {
				t.Fatalf("[%s] expected error %v … got %v", c.name, c.wantErr, err)
			}
			if len(fs.stopped) != c.wantStopped {
				t.Errorf("[%s] expected %d stop(s) … got %d", c.name, c.wantStopped, len(fs.stopped))
			}
			for _, req := range fs.stopped {
				if req.Kind != herd.EventReaped || !req.DropReplica || req.Incarnation != "inc-w-0" {
					t.Errorf("[%s] expected a reaped stop of inc-w-0 dropping its replica … got %+v", c.name, req)
				}
			}
			if len(fl.killed) != len(c.wantKilled) || (len(c.wantKilled) > 0 && fl.killed[0] != c.wantKilled[0]) {
				t.Errorf("[%s] expected unmanaged kills %v … got %v", c.name, c.wantKilled, fl.killed)
			}
			if c.wantW0Action == "" {
				return
			}
			got := ""
			for _, cand := range rep.Candidates {
				if cand.Session == "w-0" {
					got = cand.Action + " (" + cand.Reason + ": " + cand.Detail + " " + cand.Error + ")"
					if cand.Action == c.wantW0Action {
						return
					}
				}
			}
			t.Errorf("[%s] expected w-0 %s … got %q", c.name, c.wantW0Action, got)
		})
	}
}

// TestDryRunKillsNothing: a dry run decides and reports, and neither
// stops nor kills, nor lists again.
func TestDryRunKillsNothing(t *testing.T) {
	r, _, fl, fs := newSeamReaper(t)
	fl.script = []runtime.Snapshot{tmux.Parse([]tmux.Pane{pane(0), {Session: "w-9", PaneID: "%9", PID: 99}}, nil, 0)}
	rep, err := r.Pass(context.Background(), PassOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.stopped) != 0 || len(fl.killed) != 0 || fl.listed != 1 {
		t.Errorf("expected nothing stopped or killed and one listing … got %d stops, kills %v, %d listings", len(fs.stopped), fl.killed, fl.listed)
	}
	if n := rep.Reaped[herd.ReasonArchived] + rep.Reaped[herd.ReasonOrphan]; n != 2 {
		t.Errorf("expected two would-reap candidates … got %+v", rep.Candidates)
	}
}

// newSeamReaper returns a reaper over a real store holding one running,
// archived tmux session w-0 (pane pid 4242), with fakes for its runtimes.
func newSeamReaper(t *testing.T) (*Reaper, *status.Manager, *fakeLister, *fakeStopper) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := status.New(db, "h", herd.RestartPolicy{Policy: herd.PolicyAlways}, log)
	cfg := config.Default()
	// Any binary on disk stands for tmux: the listings come from the fake.
	if cfg.Tmux.Binary, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	fl, fs := &fakeLister{}, &fakeStopper{st: st}
	r := New(Options{Status: st, Slots: fs, Tmux: fl, Exec: noOutputs{}, Config: cfg, Log: log})
	started := time.Now().Add(-2 * time.Hour).UTC()
	inc := herd.Incarnation{ID: "inc-w-0", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Workdir: t.TempDir(),
		Root: herd.Identity{PID: 4242}, Identity: herd.Identity{PID: 4242}, StartedAt: started}
	err = st.Store().Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"x"}, Runtime: herd.RuntimeTmux, Workdir: inc.Workdir}); err != nil {
			return err
		}
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		return tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning,
			Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityIdle, Archived: true, Incarnation: inc.ID, StateSince: started})
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, st, fl, fs
}
