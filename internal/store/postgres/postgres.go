// Package postgres implements store.Store on PostgreSQL, one store shared by
// the daemons of several hosts.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"herd/internal/store"
	"herd/internal/store/sqltx"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MaxConns is the most connections one Store holds to the server.
const MaxConns = 4

// eventsLockKey is the transaction-level advisory lock every transaction
// takes before its first event: it makes events commit in id order (below).
const eventsLockKey = 0x6865726465766e74 // "herdevnt"

// dialect is PostgreSQL's for the shared transaction code.
//
// An identity column hands out ids in the order transactions insert, not the
// order they commit: without the lock a reader following the log by id
// (EventFilter.AfterID) could pass id 11, committed first, and never see id
// 10 committed a moment later. Holding a lock from the first insert to the
// commit makes every id visible before any greater one.
var dialect = sqltx.Dialect{
	Name:         "postgres",
	Numbered:     true,
	StrictText:   true,
	BeforeAppend: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(eventsLockKey)),
	OnAppend:     "SELECT pg_notify('" + store.ChannelEvents + "', '')",
	OnCommand:    "SELECT pg_notify('" + store.ChannelCommands + "', ?)",
	OnPlacement:  "SELECT pg_notify('" + store.ChannelPlacements + "', ?)",
	Now:          "SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint",
}

// Retries of a transaction that lost a serialization conflict: backoff from
// retryMin doubling to retryMax, with jitter, at most maxAttempts runs.
const (
	maxAttempts = 30
	retryMin    = 2 * time.Millisecond
	retryMax    = 200 * time.Millisecond
)

var _ store.Store = (*Store)(nil)

// Store is a store.Store on a PostgreSQL database. Any number of Stores, in
// any number of processes and hosts, may share a database.
//
// Update runs SERIALIZABLE: a read-modify-write (the compare-and-set on a
// session's incarnation, a kv claim) holds against every other Store as it
// does against one SQLite writer. A transaction that loses a conflict is
// rolled back and fn runs again, from the start, in a new transaction; fn
// must therefore leave nothing behind but its writes to the Tx (set results
// it returns through variables anew on each run).
//
// Do not call Update from inside an Update fn: the pool has MaxConns
// connections and nested calls can exhaust it.
type Store struct {
	db *sql.DB
	// retries counts the runs of fn after a conflict.
	retries atomic.Uint64
	// writes counts the write transactions run (see Writes).
	writes atomic.Uint64

	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database dsn names (a postgres:// URL or
// keyword/value string), applies pending migrations and returns the Store.
// Concurrent Opens of one database, from any number of hosts, are safe:
// migrations run under a session advisory lock.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if dsn == "" {
		return nil, errors.New("postgres: open: empty dsn")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return openConfig(ctx, cfg)
}

// openConfig is Open with a parsed configuration.
func openConfig(ctx context.Context, cfg *pgx.ConnConfig) (*Store, error) {
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Store{db: db}, nil
}

// migrate applies the embedded migrations under goose's session lock.
func migrate(ctx context.Context, db *sql.DB) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// Update runs fn in a SERIALIZABLE transaction, committed if fn returns nil
// and rolled back otherwise (also when fn panics). When the transaction
// loses a serialization conflict or a deadlock, fn runs again in a new one
// (see Store). fn's error is returned as is.
//
// An error because the server cannot be reached wraps store.ErrUnreachable;
// one while the COMMIT was unanswered is a *store.CommitUnknownError.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	defer s.writes.Add(1)
	return unreachableErr(ctx, s.retry(ctx, func() error {
		return s.run(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}, fn)
	}))
}

// Writes counts the write transactions this Store has run, once each
// has ended (committed or not); see store.WriteCounter.
func (s *Store) Writes() uint64 { return s.writes.Load() }

// View runs fn in a read-only transaction that sees one snapshot.
// An error because the server cannot be reached wraps store.ErrUnreachable.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return unreachableErr(ctx, s.run(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, fn))
}

// run runs fn in one transaction with opts; a read-only one is never
// committed.
func (s *Store) run(ctx context.Context, opts *sql.TxOptions, fn func(store.Tx) error) error {
	t, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
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
	if opts.ReadOnly {
		return nil
	}
	// The transaction's id, read before its COMMIT, tells afterwards
	// whether a COMMIT left unanswered by a broken connection committed
	// (Committed).
	var xid string
	if err := t.QueryRowContext(ctx, "SELECT txid_current()::text").Scan(&xid); err != nil {
		return fmt.Errorf("postgres: transaction id: %w", err)
	}
	done = true
	if err := t.Commit(); err != nil {
		// A COMMIT cut short by the caller's own deadline is the caller's
		// to judge, not the server's absence.
		if unreachable(err) && ctx.Err() == nil {
			return &store.CommitUnknownError{XID: xid, Err: fmt.Errorf("postgres: commit: %w", err)}
		}
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// retry runs once until it returns an error other than a serialization
// conflict, maxAttempts times at most, waiting a little longer each time.
func (s *Store) retry(ctx context.Context, once func() error) error {
	wait := retryMin
	for attempt := 1; ; attempt++ {
		err := once()
		if err == nil || !conflict(err) || attempt == maxAttempts {
			return err
		}
		// Full jitter: racers that collided once do not collide in step.
		t := time.NewTimer(rand.N(wait) + time.Microsecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
		s.retries.Add(1)
	}
}

// conflict reports whether err is a serialization failure or a deadlock:
// a transaction that may succeed when run again.
func conflict(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Code == "40001" || pe.Code == "40P01" // serialization_failure, deadlock_detected
}

// Retries is the number of times an Update's fn ran again after a
// conflict, since Open.
func (s *Store) Retries() uint64 { return s.retries.Load() }

// Conns is the number of connections the Store holds open now.
func (s *Store) Conns() int { return s.db.Stats().OpenConnections }

// Close closes the connection pool. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("postgres: close: %w", err)
		}
	})
	return s.closeErr
}
