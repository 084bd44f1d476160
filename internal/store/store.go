// Package store defines herd's persistent state and the interface every backend implements.
package store

import (
	"context"
	"errors"
	"time"

	"herd"
)

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = errors.New("not found")

// NotFoundError names the row that does not exist, in words a user reads
// ("session worker-7 not found"), with no mention of the backend. It
// matches ErrNotFound under errors.Is.
type NotFoundError struct {
	// What is the kind of row: session, role, incarnation.
	What string
	// Key is its name or id.
	Key string
}

func (e *NotFoundError) Error() string { return e.What + " " + e.Key + " not found" }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// Store is herd's persistent state. Every write happens in a transaction; a
// write transaction sees no concurrent writer (SQLite: BEGIN IMMEDIATE).
type Store interface {
	// Update runs fn in a read-write transaction, committed when fn returns nil.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Close releases the store.
	Close() error
}

// EventFilter selects events. Zero fields do not filter.
type EventFilter struct {
	Session string
	Kind    string
	Since   time.Time
	AfterID int64 // only events with a greater id
	Limit   int   // 0 = no limit; with Limit the newest Limit events are returned
}

// Tx is one transaction. Lists are ordered by name (roles, sessions),
// start time (incarnations) or id (events).
type Tx interface {
	Role(name string) (herd.Role, error)
	Roles() ([]herd.Role, error)
	PutRole(r herd.Role) error
	// DeleteRole removes the role and its sessions (with their crash
	// history). Incarnations and events are kept for the record.
	DeleteRole(name string) error

	Session(name string) (herd.Session, error)
	Sessions() ([]herd.Session, error)
	PutSession(s herd.Session) error
	DeleteSession(name string) error

	Incarnation(id string) (herd.Incarnation, error)
	// OpenIncarnations lists incarnations not yet ended, of every host.
	OpenIncarnations() ([]herd.Incarnation, error)
	PutIncarnation(inc herd.Incarnation) error

	// AppendEvent stores e and sets e.ID.
	AppendEvent(e *herd.Event) error
	Events(f EventFilter) ([]herd.Event, error)

	// KV returns the value of key and whether it exists.
	KV(key string) (string, bool, error)
	PutKV(key, value string) error
	// ClaimKV sets key to value only if key is absent; it reports whether it did.
	ClaimKV(key, value string) (bool, error)
	DeleteKV(key string) error
}
