package escalation

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
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

// TestEscalateOnceReadsOnlyOpenEpisodes: a tick over many quiet sessions
// reads the index and nothing else; a session whose condition fires gets
// its episode written and read back on the next tick, and only it.
func TestEscalateOnceReadsOnlyOpenEpisodes(t *testing.T) {
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
	e := NewEscalator(countingStore{db, &kv}, "h", config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := e.escalateOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if !e.Escalated("w-0") || e.Escalated("w-1") {
		t.Fatalf("expected w-0 escalated and w-1 not, got %v %v", e.Escalated("w-0"), e.Escalated("w-1"))
	}
	kv.Store(0)
	if err := e.escalateOnce(context.Background(), now.Add(time.Second)); err != nil {
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
