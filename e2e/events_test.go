package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// TestEventsDefaultLimitAndWholeLog: on a log longer than the default
// limit, `herd events` shows the newest 1000 (oldest first), --limit N the
// newest N, and --limit 0 the whole log, in order, streamed in pages by
// the daemon.
func TestEventsDefaultLimitAndWholeLog(t *testing.T) {
	t.Parallel()
	const n = 2600
	e := newEnv(t, "")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(e.dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour).UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			ev := herd.Event{Time: start.Add(time.Duration(i) * time.Millisecond), Host: "h", Session: "w-0", Kind: herd.EventActivity,
				Reason: "idle", Message: "event " + strings.Repeat("x", i%7), Data: map[string]any{"i": i}}
			if err := tx.AppendEvent(&ev); err != nil {
				return err
			}
		}
		return nil
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	e.start()

	check := func(name string, evs []herd.Event, want int) {
		t.Helper()
		if len(evs) != want {
			t.Fatalf("[%s] expected %d events, got %d", name, want, len(evs))
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].ID <= evs[i-1].ID {
				t.Fatalf("[%s] expected ascending ids, got %d after %d", name, evs[i].ID, evs[i-1].ID)
			}
		}
	}
	all := e.events("--limit", "0")
	check("whole log", all, n)
	if got := all[n-1].Data["i"]; got != float64(n-1) {
		t.Errorf("[whole log] expected the last event to be the newest (i=%d), got %v", n-1, got)
	}
	def := e.events()
	check("default", def, 1000)
	if def[0].ID != all[n-1000].ID || def[999].ID != all[n-1].ID {
		t.Errorf("[default] expected the newest 1000, got ids %d..%d", def[0].ID, def[999].ID)
	}
	some := e.events("--limit", "700", "--session", "w-0")
	check("limit 700", some, 700)
	if some[0].ID != all[n-700].ID {
		t.Errorf("[limit 700] expected the newest 700, first id %d, got %d", all[n-700].ID, some[0].ID)
	}
	table := e.must("events")
	if lines := strings.Count(table, "\n"); lines != 1001 || !strings.HasPrefix(table, "TIME") {
		t.Errorf("[table] expected a header and 1000 rows, got %d lines", lines)
	}
}
