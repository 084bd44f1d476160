package status

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"herd"
	"herd/internal/store"
)

// liveMaxAge bounds how long the live set is served from memory without a
// write of this daemon or a hint: a backstop for a write no hint announced
// (nothing of this host's own rows is written elsewhere in normal
// operation).
const liveMaxAge = 10 * time.Second

// liveSet is this host's roles, sessions and open incarnations as last
// read, served to the loops (prober, watchdog, reconcile, escalation)
// instead of a read of the whole sessions table by each, every second.
// The manager's store counts every write through it, and the backend
// counts every write of this process (store.WriteCounter), so a read after
// any write of this daemon reads the store again: the set is never stale
// by a write of ours.
//
// The set is authoritative for this host's sessions and incarnations: in a
// fleet only this host's daemon writes them (another host's request
// arrives as a command row, which this daemon claims and executes: its own
// writes). Other hosts' changes reach it as hints (Invalidate, from the
// store's notifications), and readers of other hosts' rows (the API's
// fleet-wide views) read the store, never this set. liveMaxAge is the
// backstop for a write no hint announced.
type liveSet struct {
	// gen counts the write transactions run through the manager's store
	// (when the backend does not count them) and the hints (Invalidate).
	gen atomic.Uint64

	mu sync.Mutex // guards the fields below
	// ok: the fields below hold a read taken at generation readGen.
	ok      bool
	readGen uint64
	readAt  time.Time
	roles   []herd.Role
	all     []herd.Session
	live    []Live
}

// countingStore counts the write transactions run through it.
type countingStore struct {
	store.Store
	gen *atomic.Uint64
}

// Update runs fn and counts the transaction once it has ended, committed
// or not: a reader that saw the old count before the commit reads again.
func (c countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	defer c.gen.Add(1)
	return c.Store.Update(ctx, fn)
}

// Invalidate makes the next read of the live set read the store: a hint
// that another process (another host's daemon) committed something that
// may bear on this host (a command for it, a role it reconciles).
func (m *Manager) Invalidate() { m.live.gen.Add(1) }

// Live returns this host's sessions and, for the live ones, their open
// incarnation, from memory when no write happened since the last read
// (and that read is recent), else from the store in one transaction. The
// slices are the caller's.
func (m *Manager) Live(ctx context.Context) (all []herd.Session, live []Live, err error) {
	_, all, live, err = m.Listing(ctx)
	return all, live, err
}

// Listing is Live with the roles.
func (m *Manager) Listing(ctx context.Context) (roles []herd.Role, all []herd.Session, live []Live, err error) {
	ls := &m.live
	gen := ls.gen.Load()
	if wc, ok := m.raw.(store.WriteCounter); ok {
		// Also the writes that bypass the manager (the escalator's own).
		gen += wc.Writes()
	}
	ls.mu.Lock()
	if ls.ok && ls.readGen == gen && time.Since(ls.readAt) < liveMaxAge {
		roles, all, live = slices.Clone(ls.roles), slices.Clone(ls.all), slices.Clone(ls.live)
		ls.mu.Unlock()
		return roles, all, live, nil
	}
	ls.mu.Unlock()
	at := time.Now()
	roles, all, live, err = m.readLive(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	ls.mu.Lock()
	if !ls.ok || gen >= ls.readGen {
		ls.ok, ls.readGen, ls.readAt = true, gen, at
		ls.roles, ls.all, ls.live = roles, all, live
		roles, all, live = slices.Clone(roles), slices.Clone(all), slices.Clone(live)
	}
	ls.mu.Unlock()
	return roles, all, live, nil
}
