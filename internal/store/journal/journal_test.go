package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// backend is a real SQLite store standing for the shared one.
func backend(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "shared.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// away returns a journal in an outage, seeded with role r and session s.
func away(t *testing.T, path string) *Journal {
	t.Helper()
	ctx := context.Background()
	j, err := Open(ctx, path, "h1")
	if err != nil {
		t.Fatal(err)
	}
	seed := Seed{
		Roles:    []herd.Role{{Name: "w", Replicas: 1}},
		Sessions: []herd.Session{{Name: "w-0", Role: "w", Host: "h1", State: herd.StateRunning, Incarnation: "i0"}},
		Incarnations: []herd.Incarnation{{ID: "i0", Session: "w-0", Host: "h1",
			StartedAt: time.Now().UTC().Truncate(time.Millisecond)}},
	}
	if err := j.Enter(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if _, a := j.Away(); !a {
		t.Fatal("expected the journal away after Enter")
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// writeEvents journals n transactions, each one event numbered in its
// message and the session's restart count set to the number.
func writeEvents(t *testing.T, j *Journal, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		err := j.Update(context.Background(), func(tx store.Tx) error {
			s, err := tx.Session("w-0")
			if err != nil {
				return err
			}
			s.Restarts = i
			if err := tx.PutSession(s); err != nil {
				return err
			}
			return tx.AppendEvent(&herd.Event{Time: time.Now().UTC(), Host: "h1", Session: "w-0", Kind: herd.EventCrashed, Message: fmt.Sprint(i)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// messages lists the events' messages in the backend, by id.
func messages(t *testing.T, st store.Store) []string {
	t.Helper()
	var out []string
	err := st.View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			out = append(out, e.Message)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func want(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReplayInOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := away(t, path)
	writeEvents(t, j, 0, 150) // more than two batches
	if n, _ := j.Pending(ctx); n != 150 {
		t.Fatalf("expected 150 entries pending, got %d", n)
	}
	be := backend(t)
	left, err := j.Replay(ctx, be, 0)
	if err != nil || left != 0 {
		t.Fatalf("replay: left %d, err %v", left, err)
	}
	if got := messages(t, be); !equal(got, want(0, 150)) {
		t.Fatalf("expected events 0..149 in order, got %v", got)
	}
	var s herd.Session
	be.View(ctx, func(tx store.Tx) (err error) { s, err = tx.Session("w-0"); return err })
	if s.Restarts != 149 {
		t.Fatalf("expected the session's last write (restarts 149), got %d", s.Restarts)
	}
	if err := j.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, a := j.Away(); a {
		t.Fatal("expected the journal back after Leave")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("expected the journal's file removed, got %v", err)
	}
}

func TestLeaveRefusedWhilePending(t *testing.T) {
	j := away(t, filepath.Join(t.TempDir(), "j.db"))
	writeEvents(t, j, 0, 1)
	if err := j.Leave(context.Background()); !errors.Is(err, ErrPending) {
		t.Fatalf("expected ErrPending, got %v", err)
	}
}

// lossy commits its Update, then reports the store unreachable, on the
// calls fail names (1-based): the answer lost after the commit.
type lossy struct {
	store.Store
	calls int
	fail  map[int]bool
}

func (l *lossy) Update(ctx context.Context, fn func(store.Tx) error) error {
	l.calls++
	if err := l.Store.Update(ctx, fn); err != nil {
		return err
	}
	if l.fail[l.calls] {
		return fmt.Errorf("%w: connection reset after commit", store.ErrUnreachable)
	}
	return nil
}

// TestReplayIdempotent: a batch whose commit was not answered is not
// written twice when replayed again (the marker says it was).
func TestReplayIdempotent(t *testing.T) {
	ctx := context.Background()
	j := away(t, filepath.Join(t.TempDir(), "j.db"))
	writeEvents(t, j, 0, 100)
	be := &lossy{Store: backend(t), fail: map[int]bool{1: true}}
	if _, err := j.Replay(ctx, be, 0); !errors.Is(err, store.ErrUnreachable) {
		t.Fatalf("expected the lost answer's error, got %v", err)
	}
	if n, _ := j.Pending(ctx); n != 100 {
		t.Fatalf("expected every entry still pending (the answer was lost), got %d", n)
	}
	if left, err := j.Replay(ctx, be, 0); err != nil || left != 0 {
		t.Fatalf("replay again: left %d, err %v", left, err)
	}
	if got := messages(t, be); !equal(got, want(0, 100)) {
		t.Fatalf("expected events 0..99 once each in order, got %d: %v", len(got), got)
	}
}

// TestReplayAfterCrash: a daemon killed mid-replay (the journal closed
// with entries left, one batch written whose drop was lost) opens the
// journal again away, and the next replay writes the rest once.
func TestReplayAfterCrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j := away(t, path)
	writeEvents(t, j, 0, 200)
	raw := backend(t)
	// The second batch commits but its answer is lost; the daemon dies.
	be := &lossy{Store: raw, fail: map[int]bool{2: true}}
	if _, err := j.Replay(ctx, be, 0); err == nil {
		t.Fatal("expected the replay to stop at the lost answer")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, err := Open(ctx, path, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	since, a := j2.Away()
	if !a || since.IsZero() {
		t.Fatalf("expected the reopened journal away since the outage began, got %v %v", since, a)
	}
	if n, _ := j2.Pending(ctx); n != 200-Batch {
		t.Fatalf("expected %d entries pending after the crash, got %d", 200-Batch, n)
	}
	writeEvents(t, j2, 200, 5) // the new run goes on writing meanwhile
	if left, err := j2.Replay(ctx, raw, 0); err != nil || left != 0 {
		t.Fatalf("replay after the crash: left %d, err %v", left, err)
	}
	if got := messages(t, raw); !equal(got, want(0, 205)) {
		t.Fatalf("expected events 0..204 once each in order, got %d", len(got))
	}
}

// resolver is a backend that answers Committed from a table.
type resolver struct {
	store.Store
	committed map[string]bool
}

func (r resolver) Committed(_ context.Context, xid string) (bool, error) {
	c, ok := r.committed[xid]
	if !ok {
		return false, errors.New("in progress")
	}
	return c, nil
}

// TestRecordUnknownCommit: a transaction whose commit went unanswered is
// written at replay only when the store says it did not commit; while the
// store cannot tell, it waits, and nothing after it is written.
func TestRecordUnknownCommit(t *testing.T) {
	ctx := context.Background()
	ev := func(msg string) []Op {
		return []Op{{Kind: opAppendEvent, Event: &herd.Event{Time: time.Now().UTC(), Host: "h1", Session: "w-0", Kind: herd.EventCrashed, Message: msg}}}
	}
	j := away(t, filepath.Join(t.TempDir(), "j.db"))
	if err := j.Record(ctx, ev("maybe-committed"), "100"); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, j, 0, 1)
	if err := j.Record(ctx, ev("maybe-aborted"), "101"); err != nil {
		t.Fatal(err)
	}
	writeEvents(t, j, 1, 1)
	// A local read sees the recorded writes: they are the daemon's truth.
	var local []string
	j.View(ctx, func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{})
		for _, e := range evs {
			local = append(local, e.Message)
		}
		return err
	})
	if !equal(local, []string{"maybe-committed", "0", "maybe-aborted", "1"}) {
		t.Fatalf("expected the local log to hold every write, got %v", local)
	}

	raw := backend(t)
	be := resolver{Store: raw, committed: map[string]bool{}}
	if left, err := j.Replay(ctx, be, 0); err == nil || left != 4 {
		t.Fatalf("expected the replay to wait while the outcome is unknown, got left %d, err %v", left, err)
	}
	be.committed["100"], be.committed["101"] = true, false
	if left, err := j.Replay(ctx, be, 0); err != nil || left != 0 {
		t.Fatalf("replay: left %d, err %v", left, err)
	}
	if got := messages(t, raw); !equal(got, []string{"0", "maybe-aborted", "1"}) {
		t.Fatalf("expected the committed transaction skipped and the aborted one written, got %v", got)
	}
}

// TestAwayRefusesFleetRows: hosts, placements, commands, kv and users wait for
// the store; nothing of a refused transaction is journaled.
func TestAwayRefusesFleetRows(t *testing.T) {
	ctx := context.Background()
	j := away(t, filepath.Join(t.TempDir(), "j.db"))
	cases := map[string]func(tx store.Tx) error{
		"put host":      func(tx store.Tx) error { return tx.PutHost(herd.Host{Name: "h1"}) },
		"hosts":         func(tx store.Tx) error { _, err := tx.Hosts(); return err },
		"put placement": func(tx store.Tx) error { return tx.PutPlacement(herd.Placement{Role: "w"}) },
		"commands":      func(tx store.Tx) error { _, err := tx.CommandsOnHost("h1", "pending"); return err },
		"add command":   func(tx store.Tx) error { return tx.AddCommand(&herd.Command{}) },
		"kv":            func(tx store.Tx) error { _, _, err := tx.KV("x"); return err },
		"put kv":        func(tx store.Tx) error { return tx.PutKV("x", "y") },
		"retention":     func(tx store.Tx) error { _, err := tx.DeleteEventsBefore(time.Now(), 10); return err },
		"set lease":     func(tx store.Tx) error { return tx.SetLease("h1", time.Now().Add(time.Minute)) },
		"now":           func(tx store.Tx) error { _, err := tx.Now(); return err },
		"placement":     func(tx store.Tx) error { _, err := tx.Placement("w", 0); return err },
		"add user":      func(tx store.Tx) error { return tx.AddUser(&store.User{Name: "alice", CreatedAt: time.Now()}) },
		"user":          func(tx store.Tx) error { _, err := tx.User("alice"); return err },
		"users":         func(tx store.Tx) error { _, err := tx.Users(); return err },
		"delete user":   func(tx store.Tx) error { return tx.DeleteUser("alice") },
		"user token":    func(tx store.Tx) error { return tx.AddUserToken("h", 1, time.Now()) },
		"token user":    func(tx store.Tx) error { _, err := tx.TokenUser("h"); return err },
	}
	for name, fn := range cases {
		err := j.Update(ctx, func(tx store.Tx) error {
			if err := tx.AppendEvent(&herd.Event{Time: time.Now().UTC(), Session: "w-0", Kind: herd.EventCrashed}); err != nil {
				return err
			}
			return fn(tx)
		})
		if !errors.Is(err, store.ErrAway) {
			t.Errorf("[%s] expected ErrAway, got %v", name, err)
		}
	}
	if n, _ := j.Pending(ctx); n != 0 {
		t.Fatalf("expected nothing journaled of refused transactions, got %d entries", n)
	}
}

// writing is a backend during whose first write the daemon journals more.
type writing struct {
	store.Store
	during func()
}

func (w *writing) Update(ctx context.Context, fn func(store.Tx) error) error {
	if w.during != nil {
		w.during()
		w.during = nil
	}
	return w.Store.Update(ctx, fn)
}

// TestReplayDoesNotChase: entries journaled while a replay runs are left
// to the next call, in order after the rest.
func TestReplayDoesNotChase(t *testing.T) {
	ctx := context.Background()
	j := away(t, filepath.Join(t.TempDir(), "j.db"))
	writeEvents(t, j, 0, 10)
	raw := backend(t)
	be := &writing{Store: raw, during: func() { writeEvents(t, j, 10, 5) }}
	left, err := j.Replay(ctx, be, 0)
	if err != nil || left != 5 {
		t.Fatalf("expected the 5 entries journaled meanwhile left, got %d, %v", left, err)
	}
	if left, err := j.Replay(ctx, be, 0); err != nil || left != 0 {
		t.Fatalf("second replay: left %d, err %v", left, err)
	}
	if got := messages(t, raw); !equal(got, want(0, 15)) {
		t.Fatalf("expected events 0..14 in order, got %v", got)
	}
}

// TestPrepareBesideEnter: the spare made after an outage (Prepare) and a
// new outage beginning at once (Enter) share one file: neither removes
// the file under the other's open store.
func TestPrepareBesideEnter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := Open(ctx, path, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	seed := Seed{Sessions: []herd.Session{{Name: "w-0", Role: "w", Host: "h1"}}}
	for i := range 10 {
		if err := j.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- j.Prepare(ctx) }()
		if err := j.Enter(ctx, seed); err != nil {
			t.Fatalf("[round %d] enter: %v", i, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("[round %d] prepare: %v", i, err)
		}
		writeEvents(t, j, i, 1)
		var s herd.Session
		if err := j.View(ctx, func(tx store.Tx) (err error) { s, err = tx.Session("w-0"); return err }); err != nil || s.Restarts != i {
			t.Fatalf("[round %d] expected the local store to hold the write, got %+v, %v", i, s, err)
		}
		if _, err := j.Replay(ctx, backend(t), 0); err != nil {
			t.Fatal(err)
		}
	}
}
