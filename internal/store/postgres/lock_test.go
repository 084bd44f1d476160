package postgres

import (
	"testing"
	"time"

	"herd/internal/store/pgtest"
)

// TestTryLock: one Store at a time holds the lock; a released lock, or
// one whose Store closed (its connection gone), is taken by the next;
// Check holds while held; the holder stays within MaxConns.
func TestTryLock(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	const key = 0x68657264746573 // "herdtes"
	la, err := a.TryLock(t.Context(), key)
	if err != nil || la == nil {
		t.Fatalf("[first] expected the lock, got %v, %v", la, err)
	}
	if err := la.Check(t.Context()); err != nil {
		t.Errorf("[check while held] expected nil, got %v", err)
	}
	if lb, err := b.TryLock(t.Context(), key); err != nil || lb != nil {
		t.Fatalf("[second while held] expected nil, nil, got %v, %v", lb, err)
	}
	if n := a.Conns(); n > MaxConns {
		t.Errorf("[connections] expected at most %d, got %d", MaxConns, n)
	}
	la.Release()
	lb, err := b.TryLock(t.Context(), key)
	if err != nil || lb == nil {
		t.Fatalf("[after release] expected the lock, got %v, %v", lb, err)
	}
	// The holder's connection is lost (the server ends its session): the
	// holder's Check says so, and the lock is free again.
	if _, err := a.db.ExecContext(t.Context(),
		"SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1", key&0xffffffff); err != nil {
		t.Fatal(err)
	}
	if err := lb.Check(t.Context()); err == nil {
		t.Errorf("[check after the connection is lost] expected an error, got nil")
	}
	lb.Release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		la, err = a.TryLock(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if la != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("[holder gone] expected the lock free within 10s, still held")
		}
		time.Sleep(20 * time.Millisecond)
	}
	la.Release()
}
