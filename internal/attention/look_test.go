package attention

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// countingStore counts the KV point reads of the transactions it runs.
type countingStore struct {
	store.Store
	kv *atomic.Int64
}

type countingTx struct {
	store.Tx
	kv *atomic.Int64
}

func (c countingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return c.Store.View(ctx, func(tx store.Tx) error { return fn(countingTx{tx, c.kv}) })
}

func (c countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return c.Store.Update(ctx, func(tx store.Tx) error { return fn(countingTx{tx, c.kv}) })
}

func (c countingTx) KV(key string) (string, bool, error) {
	c.kv.Add(1)
	return c.Tx.KV(key)
}

// TestLookReadsOnlyOpenEpisodes: a tick over many quiet sessions
// reads the index and nothing else; a session whose condition fires gets
// its episode written and read back on the next tick, and only it.
func TestLookReadsOnlyOpenEpisodes(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	const n = 50
	err = db.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			s := herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: "h", State: herd.StateRunning,
				Activity: herd.ActivityWorking, Incarnation: fmt.Sprintf("inc-%d", i), StateSince: now}
			if i == 0 {
				s.State = herd.StateFailed // fires at once
			}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var kv atomic.Int64
	e := New(Options{Store: countingStore{db, &kv}, Host: "h", Config: config.Default(), Log: slog.New(slog.DiscardHandler)})
	if err := e.look(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if !e.Escalated("w-0") || e.Escalated("w-1") {
		t.Fatalf("expected w-0 escalated and w-1 not, got %v %v", e.Escalated("w-0"), e.Escalated("w-1"))
	}
	kv.Store(0)
	if err := e.look(context.Background(), now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// The index, and the one stored episode.
	if got := kv.Load(); got != 2 {
		t.Errorf("expected 2 KV reads on a quiet tick over %d sessions, got %d", n, got)
	}
	if !e.Escalated("w-0") {
		t.Error("expected w-0 still escalated on the next tick")
	}
}

// viewCountingStore counts the read-only transactions it runs.
type viewCountingStore struct {
	store.Store
	views *atomic.Int64
}

func (c viewCountingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	c.views.Add(1)
	return c.Store.View(ctx, fn)
}

// fakeLive is a live set whose sessions since a generation the func
// gives; it publishes no change.
type fakeLive func(gen uint64) ([]herd.Session, uint64, bool)

func (f fakeLive) SessionsSince(_ context.Context, gen uint64) ([]herd.Session, uint64, bool, error) {
	all, next, changed := f(gen)
	return all, next, changed, nil
}

func (fakeLive) Subscribe() (<-chan status.Change, func()) { return nil, func() {} }

// TestQuietTickReadsNoStore: with the sessions from the live set, a tick
// over sessions where no condition holds and no episode is stored reads
// the store once (the index), then never again while it stays so; a
// session starting to wait is read and escalated after waiting_after as
// before, and once its episode is gone the ticks are quiet again.
func TestQuietTickReadsNoStore(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	var sessions []herd.Session
	for i := range 20 {
		sessions = append(sessions, herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: "h", State: herd.StateRunning,
			Activity: herd.ActivityIdle, Incarnation: fmt.Sprintf("inc-%d", i), StateSince: now})
	}
	err = db.Update(context.Background(), func(tx store.Tx) error {
		for _, s := range sessions {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var views atomic.Int64
	cfg := config.Default()
	e := New(Options{Store: viewCountingStore{db, &views}, Host: "h", Config: cfg, Log: slog.New(slog.DiscardHandler),
		Live: fakeLive(func(uint64) ([]herd.Session, uint64, bool) {
			return append([]herd.Session(nil), sessions...), 0, true
		})})
	tick := func(at time.Time) {
		t.Helper()
		if err := e.look(context.Background(), at); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		tick(now.Add(time.Duration(i) * time.Second))
	}
	if got := views.Load(); got != 1 {
		t.Errorf("[quiet] expected 1 read (the index) over 5 ticks, got %d", got)
	}

	// w-3 waits for a permission: read every tick, escalated after
	// waiting_after, measured from when it was last seen clear.
	waitFrom := now.Add(4 * time.Second)
	put := func(s herd.Session) {
		t.Helper()
		if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.PutSession(s) }); err != nil {
			t.Fatal(err)
		}
	}
	sessions[3].Activity = herd.ActivityWaiting
	put(sessions[3])
	views.Store(0)
	tick(now.Add(5 * time.Second))
	if views.Load() == 0 {
		t.Error("[waiting] expected the store read while a condition holds")
	}
	if e.Escalated("w-3") {
		t.Fatal("[waiting] expected no escalation before waiting_after")
	}
	tick(waitFrom.Add(cfg.Escalation.WaitingAfter + 5*time.Second))
	if !e.Escalated("w-3") {
		t.Fatal("[waiting past waiting_after] expected w-3 escalated")
	}

	// Answered: the episode is closed and deleted, then quiet again.
	sessions[3].Activity = herd.ActivityWorking
	put(sessions[3])
	later := waitFrom.Add(cfg.Escalation.WaitingAfter + 6*time.Second)
	tick(later)
	tick(later.Add(time.Second))
	if e.Escalated("w-3") {
		t.Error("[answered] expected w-3 no longer escalated")
	}
	views.Store(0)
	for i := range 3 {
		tick(later.Add(time.Duration(2+i) * time.Second))
	}
	if got := views.Load(); got != 0 {
		t.Errorf("[quiet again] expected no read over 3 ticks, got %d", got)
	}
}

// TestQuietTickCopiesNothing: while the live set keeps its generation, a
// quiet tick neither copies nor walks the sessions; its clear sightings
// still count: a wait seen after quiet ticks began no earlier than the
// last of them, whatever older activity time it carries.
func TestQuietTickCopiesNothing(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	long := now.Add(-time.Hour)
	var sessions []herd.Session
	for i := range 5 {
		sessions = append(sessions, herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: "h", State: herd.StateRunning,
			Activity: herd.ActivityIdle, Incarnation: fmt.Sprintf("inc-%d", i), StateSince: long, LastActivityAt: &long})
	}
	put := func(s herd.Session) {
		t.Helper()
		if err := db.Update(context.Background(), func(tx store.Tx) error { return tx.PutSession(s) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range sessions {
		put(s)
	}
	var gen uint64 = 1
	var copies int
	cfg := config.Default()
	e := New(Options{Store: db, Host: "h", Config: cfg, Log: slog.New(slog.DiscardHandler),
		Live: fakeLive(func(since uint64) ([]herd.Session, uint64, bool) {
			if since == gen {
				return nil, gen, false
			}
			copies++
			return append([]herd.Session(nil), sessions...), gen, true
		})})
	tick := func(at time.Time) {
		t.Helper()
		if err := e.look(context.Background(), at); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		tick(now.Add(time.Duration(i) * time.Second))
	}
	if copies != 1 {
		t.Errorf("[quiet] expected 1 copy of the sessions over 10 ticks, got %d", copies)
	}

	// w-2 waits, with an activity time an hour old: the wait began after
	// the last quiet tick (now+9s), so it fires waiting_after later.
	sessions[2].Activity = herd.ActivityWaiting
	put(sessions[2])
	gen++
	tick(now.Add(10 * time.Second))
	if copies != 2 {
		t.Errorf("[changed] expected the sessions copied again, got %d copies", copies)
	}
	if e.Escalated("w-2") {
		t.Fatal("[waiting] expected no escalation at once: the wait began after the last quiet tick")
	}
	tick(now.Add(9*time.Second + cfg.Escalation.WaitingAfter - time.Millisecond))
	if e.Escalated("w-2") {
		t.Fatal("[waiting] expected no escalation before waiting_after from the last quiet tick")
	}
	tick(now.Add(9*time.Second + cfg.Escalation.WaitingAfter))
	if !e.Escalated("w-2") {
		t.Fatal("[waiting past waiting_after] expected w-2 escalated")
	}

	// A reload looks again, whatever the generation.
	sessions[2].Activity = herd.ActivityIdle
	put(sessions[2])
	gen++
	later := now.Add(10*time.Second + cfg.Escalation.WaitingAfter)
	tick(later)
	tick(later.Add(time.Second))
	before := copies
	e.Reconfigure(cfg)
	tick(later.Add(2 * time.Second))
	if e.Escalated("w-2") || copies != before {
		t.Errorf("[reload] expected w-2 clear and no copy, got escalated %v, %d copies", e.Escalated("w-2"), copies-before)
	}
}
