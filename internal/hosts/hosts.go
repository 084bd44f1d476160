// Package hosts keeps this host's row in the store current and judges other
// hosts' daemons by their heartbeats.
package hosts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"herd"
	"herd/internal/store"
)

// Daemon states of a host, as `herd get hosts` shows them.
const (
	Up    = "up"    // heartbeat within the timeout
	Stale = "stale" // no heartbeat for the timeout: its sessions are unknown
)

// Status is Up when h's last heartbeat is at most timeout before now, else
// Stale. A heartbeat from the future (clocks apart) counts as Up.
func Status(h herd.Host, now time.Time, timeout time.Duration) string {
	if h.HeartbeatAt.IsZero() || now.Sub(h.HeartbeatAt) > timeout {
		return Stale
	}
	return Up
}

// Interval is how often a daemon should beat for other hosts to time it out
// after timeout: three beats per timeout, so one lost write is no outage.
func Interval(timeout time.Duration) time.Duration {
	return max(timeout/3, time.Second)
}

// Heartbeat records one host's daemon in the store: its row at start, then
// a fresh heartbeat every interval.
type Heartbeat struct {
	st       store.Store
	host     herd.Host // Name, BootID and Version; times are set by Run
	interval time.Duration
	log      *slog.Logger
	// lease, when set, is renewed with every beat.
	lease *Lease
}

// NewHeartbeat returns a Heartbeat for h (Name, BootID and Version set) that
// beats every interval.
func NewHeartbeat(st store.Store, h herd.Host, interval time.Duration, log *slog.Logger) (*Heartbeat, error) {
	if h.Name == "" {
		return nil, errors.New("hosts: heartbeat: empty host name")
	}
	if interval <= 0 {
		return nil, fmt.Errorf("hosts: heartbeat: interval %v must be positive", interval)
	}
	return &Heartbeat{st: st, host: h, interval: interval, log: log}, nil
}

// Renews has every beat renew l too, in the beat's transaction. Call it
// before Run.
func (hb *Heartbeat) Renews(l *Lease) { hb.lease = l }

// Run writes the host's row with StartedAt and HeartbeatAt now, then the
// heartbeat every interval until ctx is done. Only the first write's error
// ends Run (the daemon should not start unrecorded); later failures are
// logged and retried at the next beat.
func (hb *Heartbeat) Run(ctx context.Context) error {
	now := time.Now().UTC()
	hb.host.StartedAt, hb.host.HeartbeatAt = now, now
	if err := hb.beat(ctx); err != nil {
		return err
	}
	t := time.NewTicker(hb.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			hb.host.HeartbeatAt = time.Now().UTC()
			if err := hb.beat(ctx); err != nil && ctx.Err() == nil {
				hb.log.Warn("heartbeat not recorded", "host", hb.host.Name, "err", err)
			}
		}
	}
}

// beat writes the row and renews the lease, bounded by one interval. The
// lease ends Duration after the database's clock at the renewal; it is
// held here from the moment the beat was sent (see Lease).
func (hb *Heartbeat) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, hb.interval)
	defer cancel()
	h := hb.host
	sent := time.Now()
	err := hb.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutHost(h); err != nil || hb.lease == nil {
			return err
		}
		now, err := tx.Now()
		if err != nil {
			return err
		}
		return tx.SetLease(h.Name, now.Add(hb.lease.Duration()))
	})
	if hb.lease != nil {
		if err != nil {
			hb.lease.Failed()
		} else {
			hb.lease.Renewed(sent)
		}
	}
	return err
}
