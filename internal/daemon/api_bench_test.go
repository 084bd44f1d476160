package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// BenchmarkListSessions1000 measures GET /v1/sessions with 1000 sessions
// in the store: what one `herd get sessions` costs the daemon.
func BenchmarkListSessions1000(b *testing.B) {
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
			s := herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: "h", State: herd.StateFailed,
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
	d, err := New(Options{StateDir: dir, Config: config.Default(), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	h := d.routes()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/sessions", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}
