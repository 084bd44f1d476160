package status

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"herd/internal/store"
	"herd/internal/store/journal"
)

// How often, while the store is away, the writer asks it whether it
// answers again; how long one such question may take.
// enterTimeout bounds the seed of the local store at an outage's start.
const (
	outageProbe   = time.Second
	outageTimeout = 5 * time.Second
	enterTimeout  = 30 * time.Second
)

// outage is the writer's side of a shared store's outage: while the
// store is away, every transaction of this daemon runs on the journal
// (a local store seeded with the live set, whose writes are journaled),
// so that probing, crash accounting, relaunches with their backoff and
// stall detection go on; RunOutage writes the journal to the store once
// it answers again. A store the daemon alone opens (SQLite) has no
// journal: j is nil and nothing here runs.
type outage struct {
	// j is the journal; set once, before the daemon runs (SetJournal).
	j   *journal.Journal
	log *slog.Logger
	// suspect: a transaction of the store ran out of its caller's time.
	// A server that stops answering at all (its packets dropped) says
	// nothing else; RunOutage asks it, with time of its own.
	suspect atomic.Bool
}

// SetJournal makes the manager keep its writes in j while its store is
// away. Set before the daemon runs; j may hold entries of an earlier run
// (RunOutage writes them first).
func (m *Manager) SetJournal(j *journal.Journal) { m.out.j = j }

// StoreAway reports whether the store is away, and since when: the
// daemon's writes go to its journal meanwhile (see store.Health).
func (m *Manager) StoreAway() (since time.Time, away bool) { return m.out.Away() }

// Away is store.Health: false without a journal.
func (o *outage) Away() (time.Time, bool) {
	if o.j == nil {
		return time.Time{}, false
	}
	return o.j.Away()
}

// away reports whether transactions go to the journal.
func (o *outage) away() bool {
	if o == nil {
		return false
	}
	_, a := o.Away()
	return a
}

// enterLocked begins an outage, the live set as the journal's seed;
// called with applyMu held, so that the seed holds every write this
// daemon committed.
func (o *outage) enterLocked(ctx context.Context, ls *liveSet, cause error) error {
	if o.away() {
		return nil
	}
	ls.mu.Lock()
	seed := journal.Seed{Roles: slices.Clone(ls.roles), Sessions: slices.Clone(ls.sessions), Incarnations: slices.Collect(maps.Values(ls.incs))}
	ls.mu.Unlock()
	// The local store is made whatever the caller's deadline left: the
	// write that found the store away goes there next.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enterTimeout)
	defer cancel()
	if err := o.j.Enter(ectx, seed); err != nil {
		return err
	}
	o.log.Warn("store away: this host's changes go to the local journal until it is back", "err", cause,
		"sessions", len(seed.Sessions), "open_incarnations", len(seed.Incarnations))
	return nil
}

// unreachable reports whether err is the store's absence, with a journal
// to turn to. An error of the caller's deadline makes the store suspect.
func (o *outage) unreachable(err error) bool {
	if o.j == nil || err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		o.suspect.Store(true)
	}
	return errors.Is(err, store.ErrUnreachable)
}

// lockApply takes the write turn (applyMu), giving up with ctx.
func (ls *liveSet) lockApply(ctx context.Context) (unlock func(), err error) {
	select {
	case ls.applyMu <- struct{}{}:
		return func() { <-ls.applyMu }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// RunOutage, while the store is away, asks it every second whether it
// answers, and once it does writes the journal to it: in batches while
// the daemon goes on writing to the journal, the last ones holding the
// write turn, and then leaves the outage (the live set is read from the
// store again). Without a journal it returns at once.
func (m *Manager) RunOutage(ctx context.Context) {
	if m.out.j == nil {
		return
	}
	t := time.NewTicker(outageProbe)
	defer t.Stop()
	for {
		if m.out.away() {
			m.recover(ctx)
		} else if m.out.suspect.Swap(false) {
			m.check(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check asks a suspect store whether it answers, with time of its own,
// and begins the outage when it does not.
func (m *Manager) check(ctx context.Context) {
	err := m.ping(ctx)
	if err == nil || ctx.Err() != nil {
		return
	}
	unlock, lerr := m.live.lockApply(ctx)
	if lerr != nil {
		return
	}
	defer unlock()
	if lerr := m.out.enterLocked(ctx, &m.live, err); lerr != nil {
		m.log.Warn("store away, but the journal could not take over", "err", lerr)
	}
}

// ping reads the store once, within outageTimeout.
func (m *Manager) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, outageTimeout)
	defer cancel()
	return m.raw.View(pctx, func(tx store.Tx) error {
		_, _, err := tx.KV(journal.MarkerKey(m.host))
		return err
	})
}

// recover writes the journal to the store when it answers, and leaves the
// outage once it is all written.
func (m *Manager) recover(ctx context.Context) {
	if m.ping(ctx) != nil {
		return // still away
	}
	since, _ := m.out.Away()
	began := time.Now()
	entries, _ := m.out.j.Pending(ctx)
	for ctx.Err() == nil {
		// The backlog, while the daemon goes on journaling: each pass
		// writes what was journaled before it began.
		left, err := m.out.j.Replay(ctx, m.raw, 0)
		if err != nil {
			m.log.Warn("store back, but the journal could not be written yet", "err", err, "left", left)
			return
		}
		if left > journal.Batch {
			continue
		}
		// The tail, with no write of this daemon in between.
		unlock, err := m.live.lockApply(ctx)
		if err != nil {
			return
		}
		left, err = m.out.j.Replay(ctx, m.raw, 0)
		if err == nil && left == 0 {
			err = m.out.j.Leave(ctx)
		}
		if err == nil {
			m.live.Invalidate() // read the store again: other hosts' changes
		}
		unlock()
		if err != nil {
			m.log.Warn("store back, but the journal could not be written yet", "err", err, "left", left)
			return
		}
		if err := m.out.j.Prepare(ctx); err != nil {
			m.log.Warn("store journal: not ready for the next outage", "err", err)
		}
		m.log.Info("store back: the journal is written", "away_for", time.Since(since).Round(time.Millisecond),
			"entries", entries, "took", time.Since(began).Round(time.Millisecond))
		return
	}
}
