package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// seeded opens a store holding sessions sessions and events events. With
// full, every session also carries an exit record and a snapshot.
func seeded(b *testing.B, sessions, events int, full bool) *Store {
	b.Helper()
	s := openAt(b, filepath.Join(b.TempDir(), "herd.db"))
	now := time.Now()
	err := s.Update(testCtx(b), func(tx store.Tx) error {
		for i := range sessions {
			s := herd.Session{
				Name: herd.SessionName("worker", i), Role: "worker", Index: i, Host: "h",
				State: herd.StateRunning, Incarnation: fmt.Sprint("inc-", i),
				RuntimeKind: herd.RuntimeTmux, Runtime: herd.Alive, Process: herd.Alive,
				Activity: herd.ActivityWorking, StartedAt: &now, LastActivityAt: &now,
				StateSince: now,
			}
			if full {
				code := 1
				s.Exit = &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now}
				s.Snapshot = &herd.Snapshot{Argv: []string{"claude"}, Workdir: "/src"}
			}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		for i := range events {
			err := tx.AppendEvent(&herd.Event{Time: now, Session: herd.SessionName("worker", i%sessions),
				Kind: herd.EventActivity, Message: "working", Data: map[string]any{"i": i}})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
	return s
}

func BenchmarkSessions1000(b *testing.B) {
	b.Run("running", func(b *testing.B) { benchSessions(b, false) })
	b.Run("with-exit-and-snapshot", func(b *testing.B) { benchSessions(b, true) })
}

func benchSessions(b *testing.B, full bool) {
	s := seeded(b, 1000, 0, full)
	ctx := testCtx(b)
	for b.Loop() {
		err := s.View(ctx, func(tx store.Tx) error {
			got, err := tx.Sessions()
			if err == nil && len(got) != 1000 {
				err = fmt.Errorf("got %d sessions", len(got))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLast50Events(b *testing.B) {
	s := seeded(b, 100, 20000, false)
	ctx := testCtx(b)
	for b.Loop() {
		err := s.View(ctx, func(tx store.Tx) error {
			got, err := tx.Events(store.EventFilter{Limit: 50})
			if err == nil && len(got) != 50 {
				err = fmt.Errorf("got %d events", len(got))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLast50EventsOfSession(b *testing.B) {
	s := seeded(b, 100, 20000, false)
	ctx := testCtx(b)
	for b.Loop() {
		err := s.View(ctx, func(tx store.Tx) error {
			got, err := tx.Events(store.EventFilter{Session: "worker-7", Limit: 50})
			if err == nil && len(got) != 50 {
				err = fmt.Errorf("got %d events", len(got))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPruneEvents measures one retention batch (DefaultRetentionBatch
// events) on a log of 200,000 events: by age, and by row count (keeping the
// newest 100,000).
func BenchmarkPruneEvents(b *testing.B) {
	const events = 200_000
	for _, c := range []struct {
		name string
		r    store.Retention
	}{
		{"by-age", store.Retention{MaxAge: time.Nanosecond}},
		{"by-rows", store.Retention{MaxRows: events / 2}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := seeded(b, 10, events, false)
			ctx := testCtx(b)
			now := time.Now().Add(time.Hour)
			deleted := 0
			for b.Loop() {
				n, err := store.PruneEvents(ctx, s, c.r, now, store.DefaultRetentionBatch)
				if err != nil {
					b.Fatal(err)
				}
				if n != store.DefaultRetentionBatch {
					b.Fatalf("expected a full batch of %d … got %d after %d deleted", store.DefaultRetentionBatch, n, deleted)
				}
				deleted += n
			}
		})
	}
}
