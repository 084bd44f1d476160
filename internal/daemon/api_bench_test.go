package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// BenchmarkListSessions1000 measures GET /v1/sessions with 1000 sessions
// in the store: what one `herd get sessions` costs the daemon, for
// another host's sessions (read from the store) and this host's (served
// from the live set).
func BenchmarkListSessions1000(b *testing.B) {
	here, err := os.Hostname()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, host string }{{"other-host", "h"}, {"this-host", here}} {
		b.Run(c.name, func(b *testing.B) { listSessions(b, c.host) })
	}
}

func listSessions(b *testing.B, host string) {
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range 1000 {
			code := 1
			exit := &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now}
			s := herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: host, State: herd.StateFailed,
				Incarnation: fmt.Sprint(i), RuntimeKind: herd.RuntimeExec, Exit: exit, StartedAt: &now, StateSince: now,
				Snapshot: &herd.Snapshot{Argv: []string{"true"}, Workdir: dir}}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(Options{StateDir: dir, Config: testConfig(), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	h := d.server.Handler()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sessions", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkReadLive200 is the store read of one probe (or watchdog) tick
// over 200 live sessions: readLive's two queries against the naive read
// of each session's incarnation in a transaction of its own.
func BenchmarkReadLive200(b *testing.B) {
	dir := b.TempDir()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	d, err := New(Options{StateDir: dir, Config: testConfig(), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range 200 {
			inc := herd.Incarnation{ID: fmt.Sprint("inc-", i), Session: herd.SessionName("w", i), Host: d.host, StartedAt: now,
				Identity: herd.Identity{BootID: "b", PID: 1000 + i, StartTime: 1}, Argv: []string{"x"}}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			s := herd.Session{Name: inc.Session, Role: "w", Index: i, Host: d.host, State: herd.StateRunning, Incarnation: inc.ID, StartedAt: &now, StateSince: now}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bulk", func(b *testing.B) {
		for b.Loop() {
			if _, live, err := d.status.Live(ctx); err != nil || len(live) != 200 {
				b.Fatalf("expected 200 live sessions, got %d (%v)", len(live), err)
			}
		}
	})
	b.Run("per-session", func(b *testing.B) {
		for b.Loop() {
			sessions, _, err := d.status.Live(ctx)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, s := range sessions {
				err := st.View(ctx, func(tx store.Tx) error { _, err := tx.Incarnation(s.Incarnation); return err })
				if err == nil {
					n++
				}
			}
			if n != 200 {
				b.Fatalf("expected 200 incarnations, got %d", n)
			}
		}
	})
}
