package backend

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/store/pgtest"
	"herd/internal/store/postgres"
	"herd/internal/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// roundTrip writes a kv pair through s and reads it back.
func roundTrip(t *testing.T, s store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutKV("k", "v") }); err != nil {
		t.Fatalf("update: %v", err)
	}
	var got string
	if err := s.View(ctx, func(tx store.Tx) error {
		var err error
		got, _, err = tx.KV("k")
		return err
	}); err != nil {
		t.Fatalf("view: %v", err)
	}
	if got != "v" {
		t.Errorf("[round trip] expected %q, got %q", "v", got)
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	for _, driver := range []string{config.DriverSQLite, ""} {
		s, err := Open(context.Background(), config.Store{Driver: driver}, dir)
		if err != nil {
			t.Fatalf("[driver %q] open: %v", driver, err)
		}
		if _, ok := s.(*sqlite.Store); !ok {
			t.Errorf("[driver %q] expected a *sqlite.Store, got %T", driver, s)
		}
		roundTrip(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, SQLiteFile)); err != nil {
		t.Errorf("[database file] expected it in the state directory, got %v", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	s, err := Open(context.Background(), config.Store{Driver: config.DriverPostgres, DSN: pgtest.DSN(t)}, "")
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if _, ok := s.(*postgres.Store); !ok {
		t.Errorf("expected a *postgres.Store, got %T", s)
	}
	roundTrip(t, s)
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		name     string
		cfg      config.Store
		stateDir string
	}{
		{"unknown driver", config.Store{Driver: "mysql"}, t.TempDir()},
		{"sqlite without a state dir", config.Store{Driver: config.DriverSQLite}, ""},
		{"postgres without dsn", config.Store{Driver: config.DriverPostgres}, t.TempDir()},
		{"postgres, nobody listening", config.Store{Driver: config.DriverPostgres,
			DSN: "host=" + t.TempDir() + " user=herd dbname=herd sslmode=disable"}, t.TempDir()},
	}
	for _, c := range cases {
		s, err := Open(context.Background(), c.cfg, c.stateDir)
		if err == nil {
			_ = s.Close()
			t.Errorf("[%s] expected an error, got nil", c.name)
		}
	}
}
