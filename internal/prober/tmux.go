package prober

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/liveness"
	"herd/internal/loop"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/store"
)

// tmuxMemory is what the prober remembers between tmux listings.
type tmuxMemory struct {
	// last is the last good snapshot.
	last runtime.Snapshot
	// missing counts consecutive good listings a session was absent from.
	missing map[string]int
	// unmanaged holds the herd-named sessions of the last good listing
	// that have no record; reported those already announced by an event.
	unmanaged []runtime.Pane
	reported  map[string]bool
	// unattributed: the last good listing had a row with no session name
	// (logged when it starts).
	unattributed bool
	// behind holds, by incarnation, when the pane's own process was first
	// seen gone while tmux still showed the pane running.
	behind map[string]time.Time
	// observed counts listings; failed tells whether the last one failed
	// (tmux hung, unreachable).
	observed int
	failed   bool
	// listedAt is when the last full listing ran; kicked: a round was
	// asked for (Kick) since.
	listedAt time.Time
	kicked   bool
}

// quietListings is how many probe intervals apart the full listing runs
// while a pidfd watches every live tmux agent: each agent's death is
// then reported the moment it happens, and the listing only catches what
// no pidfd sees (a pane closed under an agent that ignores SIGHUP, a
// changed attachment, window activity, unmanaged sessions).
const quietListings = 5

// listingDue reports whether this round lists the tmux server: when a
// round was asked for, when the last listing failed (every round then
// reads its sessions unknown, as without pidfds), when a session is not watched by a pidfd (pending,
// unidentified, unknown), or when the quiet period is over.
func (p *Prober) listingDue(sessions []status.Live) bool {
	p.mu.Lock()
	kicked, failed, since := p.tmux.kicked, p.tmux.failed, time.Since(p.tmux.listedAt)
	p.tmux.kicked = false
	p.mu.Unlock()
	if kicked || failed || since >= quietListings*p.o.Interval {
		return true
	}
	for _, l := range sessions {
		if (l.S.State != herd.StateRunning && l.S.State != herd.StateStalled) || l.Inc.Identity.Zero() || !p.isWatched(l.Inc) {
			return true
		}
	}
	return false
}

// tmuxCatchUp is how long tmux gets to report the pane of an agent that
// died as dead, with its exit status, before the death is taken as it is
// (process_gone). It is usually there within milliseconds.
const tmuxCatchUp = 2 * time.Second

// probeTmux runs one batched listing for all tmux sessions and decides
// each session from both axes. Every session of this host (live or not)
// is read after a good listing, to tell records from unmanaged tmux
// sessions.
func (p *Prober) probeTmux(ctx context.Context, sessions []status.Live) {
	if p.o.Tmux == nil || (len(sessions) == 0 && !p.tmuxExpected()) {
		return
	}
	if !p.listingDue(sessions) {
		return
	}
	start := time.Now()
	snap := p.o.Tmux.Observe(ctx)
	p.st.Metrics.Probe(herd.RuntimeTmux, time.Since(start), snap.Err != nil && ctx.Err() != nil)
	p.mu.Lock()
	p.tmux.observed++
	p.tmux.failed = snap.Err != nil
	p.tmux.listedAt = time.Now()
	p.mu.Unlock()
	if snap.Err == nil {
		p.rememberListing(ctx, snap, sessions)
	}
	decided := make([]tmuxVerdict, len(sessions))
	idx := make([]int, len(sessions))
	for i := range idx {
		idx[i] = i
	}
	loop.Each(p.o.Concurrency, idx, func(i int) {
		decided[i] = p.decideTmux(ctx, sessions[i].S, sessions[i].Inc, snap)
	})
	p.breakMassDeath(ctx, decided)
	loop.Each(p.o.Concurrency, decided, func(d tmuxVerdict) { p.actTmux(ctx, d) })
}

// tmuxVerdict is one session's verdict from one listing.
type tmuxVerdict struct {
	s   herd.Session
	inc herd.Incarnation
	rt  liveness.Runtime
	v   liveness.Verdict
	why string
}

// breakMassDeath holds back the deaths of one listing that would account
// more than probe.mass_death_fraction of at least 5 sessions dead on the
// listing's word alone (a wedged or restarted server, a runtime answering
// garbage): they are unknown and observed again, with one probe_unknown
// event. A death the process axis proves (the agent's identity reads dead
// in /proc, as after its pidfd fired) is accounted whatever the breaker
// says.
func (p *Prober) breakMassDeath(ctx context.Context, ds []tmuxVerdict) {
	obs := make([]liveness.Observed, len(ds))
	for i, d := range ds {
		obs[i] = liveness.Observed{Verdict: d.v, Proven: d.v.Process == herd.Dead}
	}
	held := liveness.BreakMassDeath(obs, p.o.MassDeathFraction)
	if held == 0 {
		return
	}
	var names []string
	for i := range ds {
		if ds[i].v.Action == liveness.Crash && obs[i].Verdict.Action != liveness.Crash {
			names = append(names, ds[i].s.Name)
			ds[i].why = "held back: the listing would account most sessions dead at once (mass_death)"
		}
		ds[i].v = obs[i].Verdict
	}
	p.o.Log.Warn("probe: one listing would account most sessions dead; inconclusive, observing again", "held", held, "observed", len(ds))
	err := p.st.Store().Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(p.st.Event(herd.Session{}, "", herd.EventProbeUnknown, liveness.ReasonMassDeath,
			fmt.Sprintf("one listing would account %d of %d sessions dead; inconclusive, observing again", held, len(ds)),
			map[string]any{"held": held, "observed": len(ds), "sessions": names}))
	})
	if err != nil && ctx.Err() == nil {
		p.o.Log.Error("probe: record mass_death", "err", err)
	}
}

// launchGrace is how long a tmux session whose launch began is not taken
// for unmanaged: its record is written once the launch returns.
const launchGrace = 30 * time.Second

// Launched forgets what earlier listings said of session name: a fresh
// launch starts its count of missing listings over. Its tmux session,
// which exists before its record, is not reported as unmanaged meanwhile.
func (p *Prober) Launched(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tmux.missing, name)
	p.launching[name] = time.Now()
}

// tmuxExpected reports whether a tmux listing is wanted even with no live
// sessions (unmanaged sessions to report).
func (p *Prober) tmuxExpected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tmux.unmanaged) > 0
}

// rememberListing remembers a good listing (see remember). Records are
// told from unmanaged sessions by the live sessions of the round; every
// session of this host is read only when the listing has a herd-named
// session that is none of them (unmanaged, or one whose record is not
// live), so that a round over a long history copies none of it.
func (p *Prober) rememberListing(ctx context.Context, snap runtime.Snapshot, live []status.Live) {
	known := make(map[string]bool, len(live))
	for _, l := range live {
		known[l.S.Name] = true
	}
	stranger := false
	for name := range snap.Panes {
		if !known[name] && herd.InNamespace(name) {
			stranger = true
			break
		}
	}
	if stranger {
		all, _, err := p.st.Live(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.o.Log.Warn("probe: read store", "err", err)
			}
			return
		}
		for _, s := range all {
			known[s.Name] = true
		}
	}
	p.remember(snap, known)
}

// remember keeps a good listing and announces herd-named sessions that
// have no record, once each. known holds the names recorded on this host
// (it is added to).
func (p *Prober) remember(snap runtime.Snapshot, known map[string]bool) {
	if known == nil {
		known = map[string]bool{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, at := range p.launching {
		if time.Since(at) < launchGrace {
			known[name] = true
		} else {
			delete(p.launching, name)
		}
	}
	m := &p.tmux
	unattributed := snap.Unattributed != nil
	if unattributed && !m.unattributed {
		p.o.Log.Warn("tmux listing has a row with no session name; sessions missing from it read unknown")
	}
	m.unattributed = unattributed
	m.last = snap
	var unmanaged []runtime.Pane
	for name, rows := range snap.Panes {
		if known[name] || !herd.InNamespace(name) {
			continue
		}
		first := rows[0]
		for _, r := range rows {
			if r.Err == nil {
				first = r
				break
			}
		}
		unmanaged = append(unmanaged, first)
	}
	m.unmanaged = unmanaged
	var fresh []runtime.Pane
	seen := map[string]bool{}
	for _, u := range unmanaged {
		seen[u.Session] = true
		if !m.reported[u.Session] {
			fresh = append(fresh, u)
		}
	}
	m.reported = seen
	if len(fresh) > 0 {
		p.group.Go("report unmanaged", func() { p.reportUnmanaged(fresh) })
	}
}

// reportUnmanaged records one event per herd-named tmux session found with
// no record; such sessions are left for the reaper.
func (p *Prober) reportUnmanaged(panes []runtime.Pane) {
	err := p.st.Store().Update(p.ctx, func(tx store.Tx) error {
		for _, u := range panes {
			e := p.st.Event(herd.Session{Name: u.Session}, "", herd.EventProbeUnknown, "unmanaged",
				"herd-named tmux session with no record; left for the reaper", map[string]any{"pid": u.PID, "pane": u.ID})
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && p.ctx.Err() == nil {
		p.o.Log.Error("report unmanaged sessions", "err", err)
	}
}

// Unmanaged lists the herd-named tmux sessions of the last good listing
// that have no record.
func (p *Prober) Unmanaged() []runtime.Pane {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]runtime.Pane(nil), p.tmux.unmanaged...)
}

// decideTmux reads one session's two axes and decides.
func (p *Prober) decideTmux(ctx context.Context, s herd.Session, inc herd.Incarnation, snap runtime.Snapshot) tmuxVerdict {
	fs, boot := p.o.Proc, p.o.BootID
	rt, why := p.runtimeAxis(s.Name, inc.Root.PID, snap)
	identified := !inc.Identity.Zero()
	if !identified && rt.Axis == herd.Alive {
		inc = p.findAgent(ctx, s, inc)
		identified = !inc.Identity.Zero()
	} else if identified && rt.Axis == herd.Alive && p.isProvisional(inc.ID) {
		inc = p.followLauncher(ctx, s, inc)
	}
	process := herd.Unknown
	switch {
	case identified && rt.Axis == herd.Alive && p.isWatched(inc):
		// Its pidfd watcher reports the death the moment it happens (and
		// is dropped then): no /proc read on every round.
		process = herd.Alive
	case identified:
		process = fs.Check(inc.Identity, boot)
	}
	if rt.Axis == herd.Alive && process == herd.Dead && inc.Identity.PID == inc.Root.PID {
		rt.Behind = p.paneBehind(inc.ID)
	}
	return tmuxVerdict{s: s, inc: inc, rt: rt, v: liveness.Decide(rt, process, identified), why: why}
}

// actTmux reports one session's verdict to status.
func (p *Prober) actTmux(ctx context.Context, d tmuxVerdict) {
	s, inc, rt, v, why := d.s, d.inc, d.rt, d.v, d.why
	switch v.Action {
	case liveness.Crash:
		p.forgetBehind(inc.ID)
		// The pane tells how its own process (a launcher, a wrapper)
		// ended; the agent under it may have ended otherwise.
		exit, msg := p.agentExit(inc, v.Exit)
		// What is left (a wrapper living on, the pane) is taken down by
		// slots, told by the writer's subscription.
		p.recordDeath(ctx, status.Death{Session: s.Name, Incarnation: inc.ID, Exit: exit, Message: msg, Leftover: true})
		return
	case liveness.Reprobe:
		p.group.Go("reprobe", func() {
			select {
			case <-time.After(100 * time.Millisecond):
				p.Kick()
			case <-p.ctx.Done():
			}
		})
	}
	switch v.State {
	case herd.StateRunning:
		if s.Process == herd.Alive && s.State != herd.StatePending && s.State != herd.StateUnknown && p.isWatched(inc) {
			return // already recorded alive and watched: no write on every tick
		}
		kind := ""
		if !p.isWatched(inc) {
			kind = herd.EventAdopted
			if s.State == herd.StatePending {
				kind = ""
			}
		}
		p.markAlive(ctx, s, inc, kind)
	case herd.StatePending:
		if s.State == herd.StateUnknown {
			p.markPending(ctx, s, inc.ID)
		}
	case herd.StateUnknown:
		if why == "" {
			why = "tmux pane and agent process disagree"
			if rt.MissingOnce {
				why = "session missing from one tmux listing; re-checking"
			}
		}
		p.markUnknown(ctx, s, inc.ID, why)
	}
}

// paneBehind reports whether the pane of incarnation inc, whose own
// process is gone while tmux still shows it running, is within
// tmuxCatchUp of that first sighting. The first sighting also nudges the
// server with SIGCHLD, which tmux 3.3a sometimes misses.
func (p *Prober) paneBehind(inc string) bool {
	p.mu.Lock()
	m := &p.tmux
	if m.behind == nil {
		m.behind = map[string]time.Time{}
	}
	first, seen := m.behind[inc]
	if seen {
		p.mu.Unlock()
		return time.Since(first) < tmuxCatchUp
	}
	for other, at := range m.behind {
		if time.Since(at) > time.Minute {
			delete(m.behind, other) // decided elsewhere (a stop)
		}
	}
	m.behind[inc] = time.Now()
	p.mu.Unlock()
	p.o.Tmux.Nudge()
	return true
}

// forgetBehind drops inc's catch-up record once its death is decided.
func (p *Prober) forgetBehind(inc string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tmux.behind, inc)
}

// runtimeAxis reads one session's runtime axis from a snapshot, from the
// row of its agent's pane (pane pid rootPID), with why when it is unknown.
// A session missing from one good listing is not yet dead; from two in a
// row it is. Missing from a listing with a row of no session name, it is
// unknown: that row may be it.
func (p *Prober) runtimeAxis(name string, rootPID int, snap runtime.Snapshot) (liveness.Runtime, string) {
	if snap.Err != nil {
		return liveness.Runtime{Axis: herd.Unknown}, snap.Err.Error()
	}
	row, ok := snap.Agent(name, rootPID)
	p.mu.Lock()
	defer p.mu.Unlock()
	m := &p.tmux
	if m.missing == nil {
		m.missing = map[string]int{}
	}
	if !ok && !snap.NoServer && snap.Unattributed != nil {
		return liveness.Runtime{Axis: herd.Unknown}, "session not in a tmux listing that has a row with no session name"
	}
	if !ok || snap.NoServer {
		m.missing[name]++
		if m.missing[name] < 2 {
			return liveness.Runtime{Axis: herd.Dead, MissingOnce: true}, ""
		}
		return liveness.Runtime{Axis: herd.Dead}, ""
	}
	delete(m.missing, name)
	switch {
	case row.Err != nil:
		return liveness.Runtime{Axis: herd.Unknown}, row.Err.Error()
	case row.Dead:
		return liveness.Runtime{Axis: herd.Dead, Status: row.Status, Signal: row.Signal}, ""
	}
	return liveness.Runtime{Axis: herd.Alive}, ""
}
