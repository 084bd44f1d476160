package status

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/journal"
	"herd/internal/store/sqlite"
)

// flaky is a real SQLite store standing for a shared one that can be
// away: while down, every transaction fails as unreachable; with
// loseCommit, the next write commits and its answer is lost.
type flaky struct {
	store.Store
	mu         sync.Mutex // guards the fields below
	down       bool
	hang       bool // every transaction waits for its caller's deadline
	loseCommit bool
	lost       map[string]bool // transaction ids whose answer was lost: all committed
	xids       int
}

func (f *flaky) state() (down, lose bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lose = f.loseCommit
	f.loseCommit = false
	return f.down, lose
}

func (f *flaky) set(down, loseCommit bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.loseCommit = down, loseCommit
}

func (f *flaky) Update(ctx context.Context, fn func(store.Tx) error) error {
	down, lose := f.state()
	if down {
		return fmt.Errorf("%w: connection refused", store.ErrUnreachable)
	}
	if err := f.Store.Update(ctx, fn); err != nil {
		return err
	}
	if lose {
		f.mu.Lock()
		f.xids++
		xid := fmt.Sprint(f.xids)
		f.lost[xid] = true
		f.down = true // the connection broke with the answer
		f.mu.Unlock()
		return &store.CommitUnknownError{XID: xid, Err: fmt.Errorf("connection reset")}
	}
	return nil
}

func (f *flaky) View(ctx context.Context, fn func(store.Tx) error) error {
	if down, _ := f.state(); down {
		return fmt.Errorf("%w: connection refused", store.ErrUnreachable)
	}
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return fmt.Errorf("begin: %w", ctx.Err())
	}
	return f.Store.View(ctx, fn)
}

func (f *flaky) Committed(_ context.Context, xid string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[xid], nil
}

// newOutageManager is newManager on a flaky store with a journal.
func newOutageManager(t *testing.T) (*Manager, *flaky) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &flaky{Store: st, lost: map[string]bool{}}
	policy := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Hour}
	m := New(f, "h", policy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	j, err := journal.Open(ctx, filepath.Join(dir, "journal.db"), "h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	m.SetJournal(j)
	err = m.Store().Update(ctx, func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"x"}, Runtime: herd.RuntimeExec, Restart: policy}); err != nil {
			return err
		}
		now := time.Now().UTC()
		if err := tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", State: herd.StateRunning, Incarnation: "inc-1", StateSince: now}); err != nil {
			return err
		}
		return tx.PutIncarnation(herd.Incarnation{ID: "inc-1", Session: "w-0", Host: "h", StartedAt: now.Add(-time.Second)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Live(ctx); err != nil { // the live set holds a read
		t.Fatal(err)
	}
	return m, f
}

// backendEvents counts the events of the store under the manager by kind.
func backendEvents(t *testing.T, f *flaky) map[string]int {
	t.Helper()
	out := map[string]int{}
	err := f.Store.View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			out[e.Kind]++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeathWhileAway: a death during an outage is accounted once, from
// the live set, into backoff; the listing answers meanwhile; once the store
// is back its events are there once each and the session matches.
func TestDeathWhileAway(t *testing.T) {
	ctx := context.Background()
	m, f := newOutageManager(t)
	f.set(true, false)
	for i := range 3 {
		ok, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode, Code: code3()}})
		if err != nil || ok != (i == 0) {
			t.Fatalf("[report %d] expected accounted %v, got %v, %v", i, i == 0, ok, err)
		}
	}
	if _, away := m.StoreAway(); !away {
		t.Fatal("expected the store away")
	}
	all, _, err := m.Live(ctx)
	if err != nil || len(all) != 1 || all[0].State != herd.StateBackoff || all[0].Restarts != 1 {
		t.Fatalf("expected w-0 in backoff after one crash from the live set, got %+v, %v", all, err)
	}
	if n := backendEvents(t, f)[herd.EventCrashed]; n != 0 {
		t.Fatalf("expected nothing written to the store while away, got %d crashed", n)
	}
	m.recover(ctx) // still down: nothing happens
	if _, away := m.StoreAway(); !away {
		t.Fatal("expected the store still away")
	}
	f.set(false, false)
	m.recover(ctx)
	if _, away := m.StoreAway(); away {
		t.Fatal("expected the outage over once the journal is written")
	}
	got := backendEvents(t, f)
	for _, k := range []string{herd.EventExited, herd.EventCrashed, herd.EventBackoff, herd.EventSummary} {
		if got[k] != 1 {
			t.Errorf("expected one %s event in the store, got %d", k, got[k])
		}
	}
	var s herd.Session
	f.Store.View(ctx, func(tx store.Tx) (err error) { s, err = tx.Session("w-0"); return err })
	if s.State != herd.StateBackoff || s.Restarts != 1 {
		t.Fatalf("expected the store's w-0 in backoff with one restart, got %s %d", s.State, s.Restarts)
	}
}

// TestLostCommitAnswer: the write whose COMMIT reached the store but
// whose answer was lost begins the outage; it counts as done (the death
// is not accounted twice) and is not written twice when the store is back.
func TestLostCommitAnswer(t *testing.T) {
	ctx := context.Background()
	m, f := newOutageManager(t)
	f.set(false, true)
	ok, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode, Code: code3()}})
	if err != nil || !ok {
		t.Fatalf("expected the death accounted, got %v, %v", ok, err)
	}
	if _, away := m.StoreAway(); !away {
		t.Fatal("expected the store away after the lost answer")
	}
	ok, err = m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonProcessGone}})
	if err != nil || ok {
		t.Fatalf("expected the second report ignored, got %v, %v", ok, err)
	}
	f.set(false, false)
	m.recover(ctx)
	if _, away := m.StoreAway(); away {
		t.Fatal("expected the outage over")
	}
	if got := backendEvents(t, f); got[herd.EventCrashed] != 1 || got[herd.EventExited] != 1 {
		t.Fatalf("expected the death's events once in the store, got %v", got)
	}
}

func code3() *int { c := 3; return &c }

// TestSilentStore: a store that stops answering at all (no error, every
// read runs out of its caller's time) is asked with time of the writer's
// own, and the outage begins; a store that answers is left alone.
func TestSilentStore(t *testing.T) {
	ctx := context.Background()
	m, f := newOutageManager(t)
	m.out.suspect.Store(true)
	m.check(ctx)
	if _, away := m.StoreAway(); away {
		t.Fatal("expected a store that answers not away")
	}
	f.mu.Lock()
	f.hang = true
	f.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := m.Store().View(rctx, func(tx store.Tx) error { _, err := tx.Roles(); return err })
	cancel()
	if err == nil || !m.out.suspect.Load() {
		t.Fatalf("expected the read to time out and the store suspect, got %v", err)
	}
	m.out.suspect.Store(false)
	m.check(ctx)
	if _, away := m.StoreAway(); !away {
		t.Fatal("expected the silent store away")
	}
	// Supervision goes on: a death is accounted from the live set.
	ok, err := m.RecordDeath(ctx, Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonExitCode, Code: code3()}})
	if err != nil || !ok {
		t.Fatalf("expected the death accounted while away, got %v, %v", ok, err)
	}
}
