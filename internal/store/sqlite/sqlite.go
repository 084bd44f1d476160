// Package sqlite implements store.Store on a single SQLite file.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"herd/internal/store"
	"herd/internal/store/sqltx"
)

//go:embed migrations/*.sql
var migrations embed.FS

// busyTimeoutMS is how long a connection waits for another connection's (or
// process's) write lock before giving up with SQLITE_BUSY.
const busyTimeoutMS = 10000

var _ store.Store = (*Store)(nil)

// dialect is SQLite's for the shared transaction code.
var dialect = sqltx.Dialect{Name: "sqlite"}

// Store is a store.Store backed by one SQLite database file in WAL mode.
// Several Stores, in one process or several, may share a file: write
// transactions take the database write lock when they begin (BEGIN
// IMMEDIATE), so a read-modify-write in Update never loses an update.
//
// Do not call Update from inside an Update fn of the same Store: the Store
// has a single write connection and the inner call would wait forever.
type Store struct {
	w *sql.DB // one connection, BEGIN IMMEDIATE
	r *sql.DB // read-only connections, deferred BEGIN
	// writes counts the write transactions run (see Writes).
	writes atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the database at path, applies pending
// migrations and returns the Store. The parent directory is created with mode
// 0700 and a new database file gets mode 0600. Concurrent Opens of one file,
// from any number of processes, are safe: migrations run under an flock on
// path+".lock", a file that stays beside the database.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: want a file path", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	// Create the file ourselves so it is private; SQLite gives its -wal and
	// -shm files the same mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}

	w, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", abs, err)
	}
	if err := migrate(ctx, w, abs+".lock"); err != nil {
		_ = w.Close()
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", abs, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", abs, err)
	}
	return &Store{w: w, r: r}, nil
}

// dsn builds the modernc.org/sqlite data source name for path. Writers begin
// every transaction with BEGIN IMMEDIATE; readers are query_only.
// synchronous=NORMAL in WAL mode keeps every committed transaction across a
// crash of the process (not necessarily across a power loss).
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, OmitHost: true, RawQuery: q.Encode()}
	return u.String()
}

// migrate applies the embedded migrations, holding lockPath's file lock so
// that concurrent Opens do not race on the schema.
func migrate(ctx context.Context, db *sql.DB, lockPath string) (err error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("sqlite: migrations: %w", err)
	}
	unlock, err := lockFile(ctx, lockPath)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("sqlite: migrate: unlock: %w", uerr)
		}
	}()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// Update runs fn in a write transaction, committed if fn returns nil and
// rolled back otherwise (also when fn panics). fn's error is returned as is.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	defer s.writes.Add(1)
	t, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = t.Rollback()
		}
	}()
	if err := fn(sqltx.New(ctx, t, dialect)); err != nil {
		return err
	}
	done = true
	if err := t.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// Writes counts the write transactions this Store has run, once each
// has ended (committed or not); see store.WriteCounter.
func (s *Store) Writes() uint64 { return s.writes.Load() }

// View runs fn in a read-only transaction that sees one consistent snapshot.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	t, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer func() { _ = t.Rollback() }()
	return fn(sqltx.New(ctx, t, dialect))
}

// Close closes the database. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}
