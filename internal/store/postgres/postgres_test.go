package postgres

import (
	"context"
	"os"
	"testing"
	"time"

	"herd/internal/store"
	"herd/internal/store/pgtest"
	"herd/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testCtx is a bounded context for one test.
func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// openDSN opens a store on dsn and closes it when the test ends.
func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openDSN(t, pgtest.DSN(t))
	})
}

// TestTwoStores races two Stores (two connection pools, as the daemons of
// two hosts) on one database; a third follows the event log.
func TestTwoStores(t *testing.T) {
	checks := []struct {
		name string
		fn   func(t *testing.T, a, b, c store.Store)
	}{
		{"one stop wins", func(t *testing.T, a, b, _ store.Store) { storetest.RaceStops(t, a, b) }},
		{"no lost update", func(t *testing.T, a, b, _ store.Store) { storetest.RaceCounter(t, a, b) }},
		{"follower misses no event", func(t *testing.T, a, b, c store.Store) { storetest.FollowLog(t, c, a, b) }},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			c.fn(t, openDSN(t, dsn), openDSN(t, dsn), openDSN(t, dsn))
		})
	}
}
