package verbs

import (
	"context"
	"sort"
	"time"

	"herd"
	"herd/internal/commands"
	"herd/internal/hosts"
	"herd/internal/store"
)

// Fleet reads the verbs' rows from the store shared by the fleet and
// forwards verbs to other hosts' daemons as command rows.
type Fleet struct {
	Store store.Store
	// Host is this daemon's host.
	Host string
	// HostTimeout is how old a heartbeat makes a host stale.
	HostTimeout time.Duration
}

var (
	_ Reader    = (*Fleet)(nil)
	_ Forwarder = (*Fleet)(nil)
)

// Session returns a session's row.
func (f *Fleet) Session(ctx context.Context, name string) (s herd.Session, err error) {
	err = f.Store.View(ctx, func(tx store.Tx) error {
		s, err = tx.Session(name)
		return err
	})
	return s, err
}

// Role returns a role's row.
func (f *Fleet) Role(ctx context.Context, name string) (r herd.Role, err error) {
	err = f.Store.View(ctx, func(tx store.Tx) error {
		r, err = tx.Role(name)
		return err
	})
	return r, err
}

// Incarnation returns an incarnation's row.
func (f *Fleet) Incarnation(ctx context.Context, id string) (inc herd.Incarnation, err error) {
	err = f.Store.View(ctx, func(tx store.Tx) error {
		inc, err = tx.Incarnation(id)
		return err
	})
	return inc, err
}

// Sessions returns the fleet's sessions of role (all when ""), by role
// and index.
func (f *Fleet) Sessions(ctx context.Context, role string) ([]herd.Session, error) {
	var out []herd.Session
	err := f.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		all, err := tx.Sessions()
		for _, s := range all {
			if role == "" || s.Role == role {
				out = append(out, s)
			}
		}
		return err
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Role < b.Role || a.Role == b.Role && a.Index < b.Index
	})
	return out, err
}

// Stale reports whether host's daemon is stale (this host never is).
func (f *Fleet) Stale(ctx context.Context, host string) (bool, error) {
	var stale bool
	err := f.Store.View(ctx, func(tx store.Tx) error {
		hs, err := tx.Hosts()
		stale = hosts.NewFleet(f.Host, f.HostTimeout, time.Now(), hs).Stale(host)
		return err
	})
	return stale, err
}

// remotePoll is how often a forwarded verb's row is read at first.
const remotePoll = 100 * time.Millisecond

// Forward writes c as a command row for its host and waits for the
// outcome (see commands.Submit).
func (f *Fleet) Forward(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
	return commands.Submit(ctx, f.Store, c, timeout, remotePoll)
}
