package status

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// viewCounter counts the read transactions run through it.
type viewCounter struct {
	store.Store
	views atomic.Int64
}

func (v *viewCounter) View(ctx context.Context, fn func(store.Tx) error) error {
	v.views.Add(1)
	return v.Store.View(ctx, fn)
}

// Writes passes on the backend's count of its write transactions.
func (v *viewCounter) Writes() uint64 { return v.Store.(store.WriteCounter).Writes() }

// TestLiveSetWrittenThrough: repeated reads with no write in between are
// served from memory; a write through the manager's store is applied to
// the set with no read; a write around it is seen by the next reader,
// which reads the store.
func TestLiveSetWrittenThrough(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	vc := &viewCounter{Store: db}
	m := New(vc, "h", herd.RestartPolicy{Policy: herd.PolicyNever}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	now := time.Now().UTC()
	put := func(name, inc string, state herd.State) {
		t.Helper()
		err := m.Store().Update(ctx, func(tx store.Tx) error {
			if err := tx.PutIncarnation(herd.Incarnation{ID: inc, Session: name, Host: "h", StartedAt: now}); err != nil {
				return err
			}
			return tx.PutSession(herd.Session{Name: name, Role: "w", Host: "h", State: state, Incarnation: inc, StateSince: now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("w-0", "inc-0", herd.StateRunning)
	all, live, err := m.Live(ctx)
	if err != nil || len(all) != 1 || len(live) != 1 {
		t.Fatalf("[first read] expected 1 session, 1 live, got %d %d %v", len(all), len(live), err)
	}
	before := vc.views.Load()
	for range 10 {
		if _, _, err := m.Live(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := vc.views.Load() - before; got != 0 {
		t.Errorf("[no write] expected no store read for 10 reads, got %d", got)
	}
	// A caller's changes to what it got do not leak into the set.
	all[0].State = herd.StateFailed
	put("w-1", "inc-1", herd.StateStopped)
	all, live, err = m.Live(ctx)
	if err != nil || len(all) != 2 || len(live) != 1 || all[0].State != herd.StateRunning {
		t.Fatalf("[after write] expected 2 sessions (w-0 running), 1 live, got %+v, %d live, %v", all, len(live), err)
	}
	if got := vc.views.Load() - before; got != 0 {
		t.Errorf("[after write] expected the write applied with no store read, got %d reads", got)
	}
	// A write of this process that bypasses the manager is seen too, by
	// a read.
	err = db.Update(ctx, func(tx store.Tx) error { return tx.DeleteSession("w-1") })
	if err != nil {
		t.Fatal(err)
	}
	if all, _, err := m.Live(ctx); err != nil || len(all) != 1 {
		t.Errorf("[write around the manager] expected 1 session, got %d (%v)", len(all), err)
	}
	if got := vc.views.Load() - before; got != 1 {
		t.Errorf("[write around the manager] expected one store read, got %d", got)
	}
}

// listeningStore is a backend that counts its writes and notifies.
type listeningStore struct {
	store.Store
}

func (listeningStore) Writes() uint64 { return 0 }
func (listeningStore) Listen(ctx context.Context, fn func(channel, payload string)) error {
	return nil
}

// TestStoreKeepsListener: regression — the manager wrapped every store to
// count its writes, which hid the backend's store.Listener: the daemon
// listened to nothing, and a command from another host waited for the
// runner's 10s poll. The manager's store keeps what the backend
// implements, and no more.
func TestStoreKeepsListener(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := New(listeningStore{}, "h", herd.RestartPolicy{}, log)
	if _, ok := m.Store().(store.Listener); !ok {
		t.Errorf("[counting backend] expected Store() to keep store.Listener, got %T", m.Store())
	}
	if _, ok := m.Store().(writeThrough); ok {
		t.Errorf("[listening backend] expected more than a plain writeThrough, got %T", m.Store())
	}
	type plain struct{ store.Store }
	m = New(plain{}, "h", herd.RestartPolicy{}, log)
	if _, ok := m.Store().(writeThrough); !ok {
		t.Errorf("[plain backend] expected the manager's write-through store, got %T", m.Store())
	}
	if _, ok := m.Store().(store.Listener); ok {
		t.Errorf("[plain backend] expected no store.Listener, got %T", m.Store())
	}
}

// TestLiveSetInvalidated: a write by another process (here another handle
// on the same database, whose writes this one does not count) is not seen
// from memory until a hint says so; after Invalidate the next read reads
// the store.
func TestLiveSetInvalidated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	ctx := context.Background()
	open := func() store.Store {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	mine, other := open(), open()
	m := New(mine, "h", herd.RestartPolicy{Policy: herd.PolicyNever}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	put := func(st store.Store, name string) {
		t.Helper()
		now := time.Now().UTC()
		err := st.Update(ctx, func(tx store.Tx) error {
			if err := tx.PutIncarnation(herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", StartedAt: now}); err != nil {
				return err
			}
			return tx.PutSession(herd.Session{Name: name, Role: "w", Host: "h", State: herd.StateRunning, Incarnation: "inc-" + name, StateSince: now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(mine, "w-0")
	if all, _, err := m.Live(ctx); err != nil || len(all) != 1 {
		t.Fatalf("[first read] expected 1 session, got %d (%v)", len(all), err)
	}
	put(other, "w-1")
	if all, _, _ := m.Live(ctx); len(all) != 1 {
		t.Fatalf("[no hint] expected the set served from memory (1 session), got %d", len(all))
	}
	m.Invalidate()
	if all, live, err := m.Live(ctx); err != nil || len(all) != 2 || len(live) != 2 {
		t.Errorf("[after Invalidate] expected 2 sessions, 2 live, got %d, %d (%v)", len(all), len(live), err)
	}
}

// TestSessionsSince: a reader holding the current generation gets no copy;
// a write through the manager, or a hint, gives it the sessions again,
// with a new generation.
func TestSessionsSince(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := New(db, "h", herd.RestartPolicy{Policy: herd.PolicyNever}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	put := func(name string) {
		t.Helper()
		err := m.Store().Update(ctx, func(tx store.Tx) error {
			return tx.PutSession(herd.Session{Name: name, Role: "w", Host: "h", State: herd.StateStopped, StateSince: time.Now().UTC()})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("w-0")
	all, gen, changed, err := m.SessionsSince(ctx, 0)
	if err != nil || !changed || len(all) != 1 || gen == 0 {
		t.Fatalf("[first] expected 1 session and a generation, got %d %d %v %v", len(all), gen, changed, err)
	}
	for range 3 {
		if all, next, changed, err := m.SessionsSince(ctx, gen); err != nil || changed || all != nil || next != gen {
			t.Fatalf("[unchanged] expected no copy, got %d sessions, gen %d→%d, changed %v (%v)", len(all), gen, next, changed, err)
		}
	}
	put("w-1")
	all, next, changed, err := m.SessionsSince(ctx, gen)
	if err != nil || !changed || len(all) != 2 || next == gen {
		t.Fatalf("[written] expected 2 sessions and a new generation, got %d %d→%d %v %v", len(all), gen, next, changed, err)
	}
	m.Invalidate()
	if _, after, changed, err := m.SessionsSince(ctx, next); err != nil || !changed || after == next {
		t.Errorf("[hint] expected a new read, got gen %d→%d, changed %v (%v)", next, after, changed, err)
	}
}

// TestBackstopAge: the set is read again after liveMaxAge on a store other
// hosts share (one that notifies), after soleMaxAge on one only this
// daemon opens.
func TestBackstopAge(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	type plain struct{ store.Store }
	for _, c := range []struct {
		name string
		st   store.Store
		want time.Duration
	}{{"shared", listeningStore{}, liveMaxAge}, {"sole", plain{}, soleMaxAge}} {
		if got := New(c.st, "h", herd.RestartPolicy{}, log).live.maxAge; got != c.want {
			t.Errorf("[%s] expected backstop %v, got %v", c.name, c.want, got)
		}
	}
}
