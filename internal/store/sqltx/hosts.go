package sqltx

import (
	"fmt"
	"strings"

	"herd"
)

var hostCols = []string{"name", "boot_id", "version", "started_at", "heartbeat_at"}

var (
	hostSelect = "SELECT " + strings.Join(hostCols, ", ") + " FROM hosts"
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
		h                  herd.Host
		started, heartbeat int64
	)
	if err := sc.Scan(&h.Name, &h.BootID, &h.Version, &started, &heartbeat); err != nil {
		return h, err
	}
	h.StartedAt = fromNanos(started)
	h.HeartbeatAt = fromNanos(heartbeat)
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
