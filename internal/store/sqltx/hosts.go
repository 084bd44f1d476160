package sqltx

import (
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/store"
)

var hostCols = []string{"name", "boot_id", "version", "started_at", "heartbeat_at"}

var (
	// hostSelect reads the lease too; hostUpsert leaves it alone: only
	// SetLease writes it.
	hostSelect = "SELECT " + strings.Join(hostCols, ", ") + ", lease_until FROM hosts"
	hostUpsert = upsertSQL("hosts", "name", hostCols)
)

// Host returns the host called name, or an error wrapping store.ErrNotFound.
func (t *tx) Host(name string) (herd.Host, error) {
	h, err := scanHost(t.queryRow(hostSelect+" WHERE name = ?", name))
	if err != nil {
		return herd.Host{}, t.notFound(err, "host", name)
	}
	return h, nil
}

// Hosts lists every host by name.
func (t *tx) Hosts() ([]herd.Host, error) {
	return collect(t, "hosts", scanHost, hostSelect+" ORDER BY name")
}

func scanHost(sc scanner) (herd.Host, error) {
	var (
		h                         herd.Host
		started, heartbeat, lease int64
	)
	if err := sc.Scan(&h.Name, &h.BootID, &h.Version, &started, &heartbeat, &lease); err != nil {
		return h, err
	}
	h.StartedAt = fromNanos(started)
	h.HeartbeatAt = fromNanos(heartbeat)
	h.LeaseUntil = fromNanos(lease)
	return h, nil
}

// PutHost inserts or replaces h.
func (t *tx) PutHost(h herd.Host) error {
	if h.Name == "" {
		return fmt.Errorf("%s: put host: empty name", t.name)
	}
	started, err := nanos(h.StartedAt)
	if err != nil {
		return fmt.Errorf("%s: put host %q: started_at: %w", t.name, h.Name, err)
	}
	heartbeat, err := nanos(h.HeartbeatAt)
	if err != nil {
		return fmt.Errorf("%s: put host %q: heartbeat_at: %w", t.name, h.Name, err)
	}
	if _, err := t.exec(hostUpsert, h.Name, h.BootID, h.Version, started, heartbeat); err != nil {
		return fmt.Errorf("%s: put host %q: %w", t.name, h.Name, err)
	}
	return nil
}

// DeleteHost removes the host called name; deleting a missing host is not
// an error.
func (t *tx) DeleteHost(name string) error {
	if _, err := t.exec("DELETE FROM hosts WHERE name = ?", name); err != nil {
		return fmt.Errorf("%s: delete host %q: %w", t.name, name, err)
	}
	return nil
}

// SetLease sets the lease of the host called name to end at until; the
// host must be recorded.
func (t *tx) SetLease(name string, until time.Time) error {
	n, err := nanos(until)
	if err != nil {
		return fmt.Errorf("%s: set lease of %q: %w", t.name, name, err)
	}
	res, err := t.exec("UPDATE hosts SET lease_until = ? WHERE name = ?", n, name)
	if err != nil {
		return fmt.Errorf("%s: set lease of %q: %w", t.name, name, err)
	}
	if rows, err := res.RowsAffected(); err == nil && rows == 0 {
		return &store.NotFoundError{What: "host", Key: name}
	}
	return nil
}

// Now returns the database's clock (Dialect.Now), or this process's
// where the dialect has none (SQLite: the database is on this host).
func (t *tx) Now() (time.Time, error) {
	if t.d.Now == "" {
		return time.Now().UTC(), nil
	}
	var n int64
	if err := t.queryRow(t.d.Now).Scan(&n); err != nil {
		return time.Time{}, fmt.Errorf("%s: now: %w", t.name, err)
	}
	return fromNanos(n), nil
}
