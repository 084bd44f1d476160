// Package backend opens the store a configuration names, SQLite or PostgreSQL.
package backend

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/store/postgres"
	"herd/internal/store/sqlite"
)

// SQLiteFile is the SQLite store's database file in the state directory.
const SQLiteFile = "herd.db"

// openTimeout bounds Open when ctx has no deadline: a PostgreSQL server that
// does not answer fails the daemon's start with an error instead of hanging it.
const openTimeout = 30 * time.Second

// Open opens (creating and migrating if needed) the store cfg names: the
// SQLite database stateDir/herd.db, or the PostgreSQL database at cfg.DSN.
func Open(ctx context.Context, cfg config.Store, stateDir string) (store.Store, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, openTimeout)
		defer cancel()
	}
	switch cfg.Driver {
	case config.DriverSQLite, "":
		if stateDir == "" {
			return nil, errors.New("store: sqlite: no state directory")
		}
		return sqlite.Open(ctx, filepath.Join(stateDir, SQLiteFile))
	case config.DriverPostgres:
		if cfg.DSN == "" {
			return nil, errors.New(`store: postgres: store.dsn is required when store.driver is "postgres"`)
		}
		s, err := postgres.Open(ctx, cfg.DSN)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("store: unknown driver %q (want %q or %q)", cfg.Driver, config.DriverSQLite, config.DriverPostgres)
	}
}
