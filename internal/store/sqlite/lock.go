package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pressly/goose/v3/lock"
	"golang.org/x/sys/unix"
)

var _ lock.Locker = (*fileLocker)(nil)

// fileLocker serializes migrations of one database across processes with an
// flock(2) on a separate lock file. SQLite itself uses POSIX record locks on
// the database file, which closing any descriptor of that file would drop, so
// the database file is never locked this way. goose has no lock of its own for
// SQLite.
type fileLocker struct {
	path string

	mu sync.Mutex // guards the field below
	f  *os.File
}

// lockPoll is how often Lock retries a held lock.
const lockPoll = 5 * time.Millisecond

// Lock takes the exclusive lock, waiting until it is free or ctx is done.
func (l *fileLocker) Lock(ctx context.Context, _ *sql.DB) error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: migration lock: %w", err)
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return fmt.Errorf("sqlite: migration lock %s: %w", l.path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return fmt.Errorf("sqlite: migration lock %s: %w", l.path, ctx.Err())
		case <-t.C:
		}
	}
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
	return nil
}

// Unlock releases the lock taken by Lock.
func (l *fileLocker) Unlock(context.Context, *sql.DB) error {
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	// Closing the only descriptor releases the flock.
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: migration unlock: %w", err)
	}
	return nil
}
