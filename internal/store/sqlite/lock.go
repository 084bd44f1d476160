package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockPoll is how often lockFile retries a held lock.
const lockPoll = 5 * time.Millisecond

// lockFile takes an exclusive flock(2) on path, creating it with mode 0600,
// waiting until the lock is free or ctx is done; unlock releases it.
//
// It serializes migrations of one database across processes. goose takes no
// lock of its own for SQLite, and its pending-migration check runs outside
// any lock it is given. SQLite uses POSIX record locks on the database file,
// which closing any descriptor of that file would drop, so the lock lives in
// a separate file.
func lockFile(ctx context.Context, path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock: %w", err)
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
			return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("sqlite: lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
	// Closing the only descriptor releases the flock.
	return f.Close, nil
}
