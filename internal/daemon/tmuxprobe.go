package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/execrt"
	"herd/internal/liveness"
	"herd/internal/store"
	"herd/internal/tmux"
)

// tmuxState is what the prober remembers between tmux listings.
type tmuxState struct {
	mu sync.Mutex // guards the fields below
	// inflight is true while a listing runs: a hung tmux never gets a
	// second call piled on top of the first.
	inflight bool
	// missing counts consecutive good listings a session was absent from.
	missing map[string]int
	// attached and unmanaged come from the last good listing.
	attached  map[string]bool
	unmanaged []tmux.Pane
	// lastActivity is window_activity from the last good listing.
	lastActivity map[string]time.Time
	// reported holds the unmanaged sessions already announced by an event.
	reported map[string]bool
}

func (d *Daemon) tmuxClient() *tmux.Client {
	return &tmux.Client{Binary: d.cfg.Tmux.Binary, Socket: d.cfg.Tmux.Socket, Timeout: d.cfg.Probe.Timeout}
}

// startTmux launches argv in a new detached tmux session (no shell in
// between). A session of the same name is removed first only when it is
// this slot's leftover: a dead pane, or the pane of the slot's previous
// incarnation (prevRoot). Anything else — an unmanaged session, someone's
// own — is never touched, and the launch fails.
func (d *Daemon) startTmux(ctx context.Context, spec execrt.Spec, prevRoot int) (launched, error) {
	c := d.tmuxClient()
	d.tmuxState.mu.Lock()
	delete(d.tmuxState.missing, spec.Session)
	d.tmuxState.mu.Unlock()
	pid, err := c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	if err == nil || !strings.Contains(err.Error(), "duplicate session") {
		return launched{RootPID: pid}, err
	}
	// The name is taken: look before removing anything.
	panes, err := c.ListPanes(ctx)
	if err != nil && !errors.Is(err, tmux.ErrNoServer) {
		return launched{}, fmt.Errorf("tmux: list before launch: %w", err)
	}
	for _, p := range panes {
		if p.Session != spec.Session {
			continue
		}
		if p.Err != nil || (!p.Dead && (prevRoot == 0 || p.PID != prevRoot)) {
			return launched{}, fmt.Errorf("tmux: a session named %s already exists and is not this slot's leftover (pane pid %d); not touching it", spec.Session, p.PID)
		}
		if err := c.KillSession(ctx, spec.Session); err != nil && !errors.Is(err, tmux.ErrNoSession) {
			return launched{}, fmt.Errorf("tmux: clear old session: %w", err)
		}
		break
	}
	pid, err = c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	return launched{RootPID: pid}, err
}

// killPane removes an incarnation's tmux session, only if its pane is
// still the one herd launched for it (same pane pid): a replacement
// launched meanwhile under the same name is never killed.
func (d *Daemon) killPane(ctx context.Context, inc herd.Incarnation) error {
	c := d.tmuxClient()
	panes, err := c.ListPanes(ctx)
	if errors.Is(err, tmux.ErrNoServer) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range panes {
		if p.Session != inc.Session {
			continue
		}
		if p.Err != nil || inc.Root.PID == 0 || p.PID != inc.Root.PID {
			return nil // not this incarnation's pane
		}
		err := c.KillSession(ctx, inc.Session)
		if err == nil || errors.Is(err, tmux.ErrNoSession) || errors.Is(err, tmux.ErrNoServer) {
			return nil
		}
		return err
	}
	return nil
}

func (d *Daemon) capturePane(ctx context.Context, name string, lines int) ([]byte, error) {
	return d.tmuxClient().Capture(ctx, name, lines)
}

// listing is the outcome of one tmux listing.
type listing struct {
	panes map[string]tmux.Pane
	// err: the listing failed; every session is unknown.
	err error
	// noServer: tmux said no server runs: every session is missing.
	noServer bool
}

// listTmux runs one list-panes with its own timeout. If the call does not
// return within the tick, the tick goes on without it (sessions unknown)
// while the call finishes in the background; no second call starts meanwhile.
func (d *Daemon) listTmux(ctx context.Context) listing {
	ts := &d.tmuxState
	ts.mu.Lock()
	if ts.inflight {
		ts.mu.Unlock()
		return listing{err: errors.New("tmux: previous listing still running")}
	}
	ts.inflight = true
	ts.mu.Unlock()

	done := make(chan listing, 1)
	go func() {
		defer func() {
			ts.mu.Lock()
			ts.inflight = false
			ts.mu.Unlock()
		}()
		callCtx, cancel := context.WithTimeout(context.Background(), d.cfg.Probe.Timeout)
		defer cancel()
		panes, err := d.tmuxClient().ListPanes(callCtx)
		l := listing{panes: map[string]tmux.Pane{}}
		switch {
		case errors.Is(err, tmux.ErrNoServer):
			l.noServer = true
		case err != nil:
			l.err = err
		}
		for _, p := range panes {
			if p.Session == "" {
				continue
			}
			if old, dup := l.panes[p.Session]; dup && old.Err == nil {
				continue // several panes: the first one is the agent's
			}
			l.panes[p.Session] = p
		}
		done <- l
	}()
	select {
	case l := <-done:
		return l
	case <-ctx.Done():
		return listing{err: fmt.Errorf("tmux: listing did not answer within the tick: %w", ctx.Err())}
	}
}

// probeTmux runs one batched listing for all tmux sessions and decides
// each session from both axes.
// all is every session of this host (live or not), to tell records from
// unmanaged tmux sessions.
func (d *Daemon) probeTmux(ctx context.Context, sessions []liveItem, all []herd.Session) {
	if len(sessions) == 0 && !d.tmuxExpected() {
		return
	}
	l := d.listTmux(ctx)
	if l.err == nil {
		d.rememberListing(l, all)
	}
	sem := make(chan struct{}, max(1, d.cfg.Probe.Concurrency))
	var wg sync.WaitGroup
	for _, it := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.probeTmuxSession(ctx, it.s, it.inc, l)
		})
	}
	wg.Wait()
}

// tmuxExpected reports whether a tmux listing is wanted even with no live
// sessions (unmanaged sessions to report).
func (d *Daemon) tmuxExpected() bool {
	d.tmuxState.mu.Lock()
	defer d.tmuxState.mu.Unlock()
	return len(d.tmuxState.unmanaged) > 0
}

func (d *Daemon) rememberListing(l listing, all []herd.Session) {
	known := map[string]bool{}
	for _, s := range all {
		known[s.Name] = true
	}
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.attached = map[string]bool{}
	ts.lastActivity = map[string]time.Time{}
	var unmanaged []tmux.Pane
	for name, p := range l.panes {
		ts.attached[name] = p.Attached > 0
		if !p.WindowActivity.IsZero() {
			ts.lastActivity[name] = p.WindowActivity
		}
		if !known[name] && herd.InNamespace(name) {
			unmanaged = append(unmanaged, p)
		}
	}
	ts.unmanaged = unmanaged
	var fresh []tmux.Pane
	seen := map[string]bool{}
	for _, p := range unmanaged {
		seen[p.Session] = true
		if !ts.reported[p.Session] {
			fresh = append(fresh, p)
		}
	}
	ts.reported = seen
	if len(fresh) > 0 {
		go d.reportUnmanaged(fresh)
	}
}

// reportUnmanaged records one event per herd-named tmux session found with
// no record; such sessions are left for the reaper.
func (d *Daemon) reportUnmanaged(panes []tmux.Pane) {
	err := d.st.Update(d.watchCtx, func(tx store.Tx) error {
		for _, p := range panes {
			s := herd.Session{Name: p.Session}
			e := d.event(s, "", herd.EventProbeUnknown, "unmanaged",
				"herd-named tmux session with no record; left for the reaper", map[string]any{"pid": p.PID, "pane": p.PaneID})
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		d.log.Error("report unmanaged sessions", "err", err)
	}
}

func (d *Daemon) probeTmuxSession(ctx context.Context, s herd.Session, inc herd.Incarnation, l listing) {
	rt := d.runtimeAxis(s.Name, l)
	identified := !inc.Identity.Zero()
	if !identified && rt.Axis == herd.Alive {
		inc = d.findAgent(ctx, s, inc)
		identified = !inc.Identity.Zero()
	}
	process := herd.Unknown
	if identified {
		process = d.proc.Check(inc.Identity, d.bootID)
	}
	v := liveness.Decide(rt, process, identified)
	switch v.Action {
	case liveness.Crash:
		ok, err := d.recordDeath(ctx, death{Session: s.Name, Incarnation: inc.ID, Exit: v.Exit})
		if err != nil {
			d.log.Error("record death", "session", s.Name, "err", err)
		}
		if ok {
			go d.killLeftover(inc)
		}
		return
	case liveness.Reprobe:
		time.AfterFunc(100*time.Millisecond, func() { wake(d.probeKick) })
	}
	switch v.State {
	case herd.StateRunning:
		kind := ""
		if !d.isWatched(inc) {
			kind = herd.EventAdopted
			if s.State == herd.StatePending {
				kind = ""
			}
		}
		d.markAlive(ctx, s, inc, kind)
	case herd.StateUnknown:
		why := "tmux pane and agent process disagree"
		if l.err != nil {
			why = l.err.Error()
		} else if rt.MissingOnce {
			why = "session missing from one tmux listing; re-checking"
		}
		d.markUnknown(ctx, s, inc.ID, why)
	}
}

// runtimeAxis reads one session's runtime axis from a listing. A session
// missing from one good listing is not yet dead; from two in a row it is.
func (d *Daemon) runtimeAxis(name string, l listing) liveness.Runtime {
	if l.err != nil {
		return liveness.Runtime{Axis: herd.Unknown}
	}
	ts := &d.tmuxState
	p, ok := l.panes[name]
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.missing == nil {
		ts.missing = map[string]int{}
	}
	if !ok || l.noServer {
		ts.missing[name]++
		if ts.missing[name] < 2 {
			return liveness.Runtime{Axis: herd.Dead, MissingOnce: true}
		}
		return liveness.Runtime{Axis: herd.Dead}
	}
	delete(ts.missing, name)
	switch {
	case p.Err != nil:
		return liveness.Runtime{Axis: herd.Unknown}
	case p.Dead:
		return liveness.Runtime{Axis: herd.Dead, Status: p.DeadStatus, Signal: p.DeadSignal}
	}
	return liveness.Runtime{Axis: herd.Alive}
}

// decorate adds what the last tmux listing knows to a view.
func (d *Daemon) decorate(v *api.SessionView) {
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	v.Attached = ts.attached[v.Name]
	v.Escalated = d.escalated(v.Name)
}

// unmanagedViews lists herd-named tmux sessions that have no record.
func (d *Daemon) unmanagedViews() []api.SessionView {
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []api.SessionView
	for _, p := range ts.unmanaged {
		out = append(out, api.SessionView{
			Name: p.Session, Host: d.host, RuntimeKind: herd.RuntimeTmux, State: herd.StateUnknown,
			Runtime: herd.Alive, Process: herd.Unknown, Activity: herd.ActivityUnknown,
			PID: p.PID, Attached: p.Attached > 0, Unmanaged: true,
		})
	}
	return out
}

// describe adds what the watchdog knows to `describe session`.
func (d *Daemon) describe(det *api.SessionDetail) { d.describeActivity(det) }
