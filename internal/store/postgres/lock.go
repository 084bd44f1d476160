package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"herd/internal/store"
)

var _ store.Locker = (*Store)(nil)

// TryLock takes the session-level advisory lock key on one of the Store's
// MaxConns connections, held until Release (or until that connection is
// lost: the server then releases the lock). It returns nil, nil when
// another session holds it; the connection then goes back to the pool.
func (s *Store) TryLock(ctx context.Context, key int64) (store.Lock, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: lock: %w", err)
	}
	// A holder cut off from the server (a partition: packets dropped,
	// nothing refused) must lose the lock within seconds, not when the
	// kernel gives the connection up (hours): the server probes the idle
	// connection and drops it, and with it the lock, once unanswered data
	// or probes have waited lockDeadAfter. Ignored on a unix socket, and
	// tcp_user_timeout before PostgreSQL 12: best effort.
	for _, set := range lockKeepalive {
		_, _ = conn.ExecContext(ctx, set)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil {
		_ = conn.Raw(func(any) error { return sqlBadConn })
		_ = conn.Close()
		return nil, fmt.Errorf("postgres: lock: %w", err)
	}
	if !ok {
		_ = conn.Close()
		return nil, nil
	}
	return &sessionLock{conn: conn, key: key}, nil
}

// lockKeepalive are the settings of a lock's connection: keepalive probes
// after 2s idle, every second, three unanswered ending it; data unacked
// for lockDeadAfter ending it too.
var lockKeepalive = []string{
	"SET tcp_keepalives_idle = 2", "SET tcp_keepalives_interval = 1", "SET tcp_keepalives_count = 3",
	fmt.Sprintf("SET tcp_user_timeout = %d", lockDeadAfter.Milliseconds()),
}

// lockDeadAfter is about how long the server keeps the lock of a holder
// it cannot reach.
const lockDeadAfter = 5 * time.Second

// sqlBadConn, returned from Conn.Raw, makes database/sql discard the
// connection rather than pool it.
var sqlBadConn = driver.ErrBadConn

// sessionLock is a held advisory lock and the connection holding it.
type sessionLock struct {
	conn *sql.Conn
	key  int64
}

// Check asks the holding connection whether the lock is still its own.
func (l *sessionLock) Check(ctx context.Context) error {
	var held bool
	err := l.conn.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND ((classid::bigint << 32) | objid::bigint) = $1)", l.key).Scan(&held)
	if err != nil {
		return fmt.Errorf("postgres: lock: %w", err)
	}
	if !held {
		return fmt.Errorf("postgres: lock %d no longer held", l.key)
	}
	return nil
}

// Release unlocks, then closes the holding connection for good: were the
// unlock lost, the server releases the lock with the session, and no
// pooled connection keeps it.
func (l *sessionLock) Release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = l.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", l.key)
	_ = l.conn.Raw(func(any) error { return sqlBadConn })
	_ = l.conn.Close()
}
