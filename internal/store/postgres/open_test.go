package postgres

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"herd/internal/store"
	"herd/internal/store/pgtest"
)

func TestConflict(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"wrapped", fmt.Errorf("postgres: put session %q: %w", "w-0", &pgconn.PgError{Code: "40001"}), true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"aborted transaction", &pgconn.PgError{Code: "25P02"}, false},
		{"not a server error", context.DeadlineExceeded, false},
	}
	for _, c := range cases {
		if got := conflict(c.err); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}

func TestOpenBadDSN(t *testing.T) {
	missing, err := pgtest.WithDatabase(pgtest.DSN(t), "herd_no_such_database")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		dsn  string
	}{
		{"empty", ""},
		{"garbled", "postgres://%zz"},
		{"unknown keyword value", "host=/nonexistent sslmode=sometimes"},
		{"no server at the socket", "host=" + t.TempDir() + " user=herd dbname=x sslmode=disable connect_timeout=5"},
		{"missing database", missing},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		s, err := Open(ctx, c.dsn)
		cancel()
		if err == nil {
			_ = s.Close()
			t.Errorf("[%s] expected an error, got nil", c.name)
		}
	}
}

// TestConcurrentOpen opens one new database from several Stores at once, as
// daemons starting together would: migrations run once, every Open works.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(testCtx(t), dsn)
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
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if s := stores[0]; s != nil {
		var rows int
		if err := s.db.QueryRowContext(testCtx(t), "SELECT COUNT(*) FROM goose_db_version").Scan(&rows); err != nil {
			t.Fatalf("count versions: %v", err)
		}
		// goose records version 0 and then one row per applied migration.
		if want := 1 + len(files); rows != want {
			t.Errorf("[version rows] expected %d (migrations ran once), got %d", want, rows)
		}
	}
}

// TestConnsBounded runs many transactions at once and expects the Store
// never to hold more than MaxConns connections, by its own count and by the
// server's.
func TestConnsBounded(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	ctx := testCtx(t)
	probe, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = probe.Close(context.Background()) }()
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex // guards the fields below
		peakPool   int
		peakServer int
		errs       []error
	)
	for i := range 32 {
		wg.Go(func() {
			err := s.Update(ctx, func(tx store.Tx) error {
				mu.Lock()
				peakPool = max(peakPool, s.Conns())
				mu.Unlock()
				return tx.PutKV(fmt.Sprint("k", i), "v")
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		var n int
		if err := probe.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity"+
			" WHERE datname = current_database() AND pid <> pg_backend_pid()").Scan(&n); err != nil {
			t.Fatalf("count connections: %v", err)
		}
		peakServer = max(peakServer, n)
	}
	if len(errs) > 0 {
		t.Fatalf("update: %v", errs[0])
	}
	if peakPool > MaxConns || peakPool == 0 {
		t.Errorf("[pool connections] expected 1..%d, got a peak of %d", MaxConns, peakPool)
	}
	if peakServer > MaxConns {
		t.Errorf("[server connections] expected at most %d, got a peak of %d", MaxConns, peakServer)
	}
}
