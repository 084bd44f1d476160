package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/store"
	"herd/internal/store/storetest"
)

// testCtx is a bounded context for one test.
func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// openAt opens the store at path and closes it when the test ends.
func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openAt(t, filepath.Join(t.TempDir(), "herd.db"))
	})
}

// TestTwoStoresNoLostUpdate has two Stores on one file increment a counter
// with read-modify-write transactions; BEGIN IMMEDIATE must serialize them.
func TestTwoStoresNoLostUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	stores := []*Store{openAt(t, path), openAt(t, path)}
	const perStore = 50
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	start := make(chan struct{})
	for i, s := range stores {
		wg.Go(func() {
			<-start
			for range perStore {
				err := s.Update(ctx, func(tx store.Tx) error {
					v, _, err := tx.KV("counter")
					if err != nil {
						return err
					}
					n := 0
					if v != "" {
						if n, err = strconv.Atoi(v); err != nil {
							return err
						}
					}
					// Let the other store run between the read and the write.
					runtime.Gosched()
					return tx.PutKV("counter", strconv.Itoa(n+1))
				})
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("update: %v", err)
	}
	for i, s := range stores {
		var got string
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			got, _, err = tx.KV("counter")
			return err
		}); err != nil {
			t.Fatalf("view: %v", err)
		}
		if got != strconv.Itoa(len(stores)*perStore) {
			t.Errorf("[store %d] expected counter %d, got %s", i, len(stores)*perStore, got)
		}
	}
}

// TestTwoStoresRaces races two Stores on one file; a third follows the
// event log.
func TestTwoStoresRaces(t *testing.T) {
	open3 := func(t *testing.T) (a, b, c store.Store) {
		path := filepath.Join(t.TempDir(), "herd.db")
		return openAt(t, path), openAt(t, path), openAt(t, path)
	}
	t.Run("one stop wins", func(t *testing.T) {
		a, b, _ := open3(t)
		storetest.RaceStops(t, a, b)
	})
	t.Run("follower misses no event", func(t *testing.T) {
		a, b, c := open3(t)
		storetest.FollowLog(t, c, a, b)
	})
}

// TestReopenKeepsEverything writes, closes, reopens (which re-runs the
// migration step) and expects every row back.
func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "herd.db")
	ctx := testCtx(t)
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	role := herd.Role{Name: "w", Replicas: 2, Command: []string{"claude"}, UpdatedAt: at}
	sess := herd.Session{Name: "w-0", Role: "w", State: herd.StateRunning, StateSince: at,
		BackoffUntil: &at, Exit: &herd.Exit{Code: new(int), Reason: herd.ReasonExitCode, At: at}}
	inc := herd.Incarnation{ID: "i1", Session: "w-0", StartedAt: at,
		Identity: herd.Identity{BootID: "b", PID: 7, StartTime: 99, Marker: "i1"}}
	ev := herd.Event{Time: at, Session: "w-0", Kind: herd.EventSpawned, Data: map[string]any{"pid": 7.0}}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return errors.Join(tx.PutRole(role), tx.PutSession(sess), tx.PutIncarnation(inc),
			tx.AppendEvent(&ev), tx.PutKV("boot", "b"))
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("[state dir] expected mode 0700, got %v, %v", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("[database file] expected mode 0600, got %v, %v", fi.Mode().Perm(), err)
	}

	for round := range 2 {
		s := openAt(t, path)
		err := s.View(ctx, func(tx store.Tx) error {
			r, err := tx.Role("w")
			if err != nil {
				return err
			}
			se, err := tx.Session("w-0")
			if err != nil {
				return err
			}
			in, err := tx.Incarnation("i1")
			if err != nil {
				return err
			}
			evs, err := tx.Events(store.EventFilter{})
			if err != nil {
				return err
			}
			v, _, err := tx.KV("boot")
			if err != nil {
				return err
			}
			got := []any{r, se, in, evs, v}
			want := []any{role, sess, inc, []herd.Event{ev}, "b"}
			opt := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
			if d := cmp.Diff(want, got, opt); d != "" {
				t.Errorf("[reopen %d] mismatch (-want +got):\n%s", round, d)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("view: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
}

// TestConcurrentOpen opens one new file from many goroutines at once: the
// migration must run once and every Open must succeed.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(testCtx(t), path)
		})
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Errorf("[open %d] unexpected error %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Update(testCtx(t), func(tx store.Tx) error {
			return tx.PutKV(fmt.Sprint("k", i), "v")
		}); err != nil {
			t.Errorf("[store %d] update: %v", i, err)
		}
	}
	// goose records version 0 and then one row per applied migration.
	if s := stores[0]; s != nil {
		var rows int
		if err := s.r.QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM goose_db_version").Scan(&rows); err != nil {
			t.Fatalf("count versions: %v", err)
		}
		if want := 1 + migrationCount(t); rows != want {
			t.Errorf("[version rows] expected %d (migrations ran once), got %d", want, rows)
		}
	}
}

// migrationCount is the number of embedded migrations.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

func TestOpenBadPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte(strings.Repeat("not a database\n", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
	}{
		{"empty", ""},
		{"memory", ":memory:"},
		{"uri", "file:x.db"},
		{"parent is a file", filepath.Join(file, "herd.db")},
		{"not a database", file},
	}
	for _, c := range cases {
		s, err := Open(testCtx(t), c.path)
		if err == nil {
			_ = s.Close()
			t.Errorf("[%s] expected an error, got nil", c.name)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	// Characters with a meaning in URIs must not change which file is opened.
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%20")
	path := filepath.Join(dir, "herd.db")
	s := openAt(t, path)
	if err := s.Update(testCtx(t), func(tx store.Tx) error { return tx.PutKV("k", "v") }); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("[file at the odd path] expected it to exist, got %v", err)
	}
}

// TestEventTimeIndex: retention by age deletes through an index on the
// event time, not a scan of the table.
func TestEventTimeIndex(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "herd.db"))
	var plan []string
	rows, err := s.r.QueryContext(testCtx(t), "EXPLAIN QUERY PLAN SELECT id FROM events WHERE at < ? ORDER BY at LIMIT ?", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) == 0 || !strings.Contains(strings.Join(plan, "; "), "USING COVERING INDEX events_at") && !strings.Contains(strings.Join(plan, "; "), "USING INDEX events_at") {
		t.Errorf("expected the events_at index used … got plan %q", plan)
	}
}
