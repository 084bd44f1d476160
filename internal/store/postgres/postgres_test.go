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
