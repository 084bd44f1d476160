package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/execrt"
	"herd/internal/liveness"
	"herd/internal/proc"
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
	// panes holds every row of the last good listing, by session: the
	// watchdog finds an agent's own pane there.
	panes map[string][]tmux.Pane
	// serverPID is the tmux server that answered the last good listing
	// with rows, 0 when it found no server.
	serverPID int
	// unattributed: the last good listing had a row with no session name
	// (logged when it starts).
	unattributed bool
	// behind holds, by incarnation, when the pane's own process was first
	// seen gone while tmux still showed the pane running.
	behind map[string]time.Time
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
// this slot's leftover: it holds the pane of the slot's previous
// incarnation (prevRoot), or nothing but dead panes. Anything else — an
// unmanaged session, someone's own, a session whose rows cannot all be
// read — is never touched, and the launch fails.
func (d *Daemon) startTmux(ctx context.Context, spec execrt.Spec, prevRoot int) (launched, error) {
	c := d.tmuxClient()
	if err := d.tmuxSocketLost(ctx, c); err != nil {
		// new-session would start a second server on the socket path,
		// and every session of the first would then read gone.
		return launched{}, err
	}
	d.tmuxState.mu.Lock()
	delete(d.tmuxState.missing, spec.Session)
	d.tmuxState.mu.Unlock()
	pid, err := c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	if err == nil || !strings.Contains(err.Error(), "duplicate session") {
		return launched{RootPID: pid}, err
	}
	// The name is taken: look before removing anything.
	panes, err := c.ListPanes(ctx)
	if errors.Is(err, tmux.ErrNoSocket) {
		if lost := d.tmuxSocketLost(ctx, c); lost != nil {
			return launched{}, lost
		}
	}
	if err != nil && !errors.Is(err, tmux.ErrNoServer) {
		return launched{}, fmt.Errorf("tmux: list before launch: %w", err)
	}
	if err := leftover(panes, spec.Session, prevRoot); err != nil {
		return launched{}, err
	}
	if sessionListed(panes, spec.Session) {
		// No session or no server: the leftover went meanwhile (its
		// own kill won the race), which is what was wanted.
		if err := c.KillSession(ctx, spec.Session); err != nil && !errors.Is(err, tmux.ErrNoSession) && !errors.Is(err, tmux.ErrNoServer) {
			return launched{}, fmt.Errorf("tmux: clear old session: %w", err)
		}
	}
	if err := d.tmuxSocketLost(ctx, c); err != nil {
		return launched{}, err
	}
	pid, err = c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	return launched{RootPID: pid}, err
}

// tmuxSocketLost returns an error when the tmux server herd last listed
// still runs but tmux says its socket file is gone (a /tmp cleaner):
// nothing can reach that server, and a new-session would start a second
// one beside it. tmux itself is asked, since only it knows the path it
// uses ($TMUX_TMPDIR, or /tmp when that is unusable).
func (d *Daemon) tmuxSocketLost(ctx context.Context, c *tmux.Client) error {
	ts := &d.tmuxState
	ts.mu.Lock()
	pid := ts.serverPID
	ts.mu.Unlock()
	if pid == 0 || !tmuxServerRuns(pid) {
		return nil
	}
	if err := c.Reach(ctx); !errors.Is(err, tmux.ErrNoSocket) {
		return nil
	}
	return fmt.Errorf("tmux: the server (pid %d) runs but its socket is gone; not starting a second server beside it (kill -USR1 %d makes tmux recreate the socket)", pid, pid)
}

// leftover returns nil when the listed session name may be cleared for a
// relaunch of its slot — it is this slot's leftover (the pane of prevRoot,
// or only dead panes), or it is not listed at all — and the reason not to
// touch it otherwise. A session missing from a listing that has a row with
// no session name may be that row: it is not cleared, and not assumed gone.
func leftover(panes []tmux.Pane, name string, prevRoot int) error {
	var rows []tmux.Pane
	unattributed := false
	for _, p := range panes {
		switch p.Session {
		case name:
			rows = append(rows, p)
		case "":
			unattributed = true
		}
	}
	if len(rows) == 0 {
		if unattributed {
			return fmt.Errorf("tmux: a session named %s exists and cannot be found in the listing (a row has no session name); not touching it", name)
		}
		return nil // gone meanwhile: the launch is retried
	}
	for _, p := range rows {
		if p.Err != nil {
			return fmt.Errorf("tmux: a session named %s exists and its listing cannot be read (%v); not touching it", name, p.Err)
		}
	}
	if _, ok := tmux.FindPane(rows, name, prevRoot); ok {
		return nil
	}
	for _, p := range rows {
		if !p.Dead {
			return fmt.Errorf("tmux: a session named %s already exists and is not this slot's leftover (pane pid %d); not touching it", name, p.PID)
		}
	}
	return nil
}

// sessionListed reports whether a listing has a row of session name.
func sessionListed(panes []tmux.Pane, name string) bool {
	for _, p := range panes {
		if p.Session == name {
			return true
		}
	}
	return false
}

// killPane removes an incarnation's tmux session, only if it still holds
// the pane herd launched for it (same pane pid): a replacement launched
// meanwhile under the same name is never killed. A session that cannot be
// read in the listing is left, with an error.
func (d *Daemon) killPane(ctx context.Context, inc herd.Incarnation) error {
	c := d.tmuxClient()
	panes, err := c.ListPanes(ctx)
	if errors.Is(err, tmux.ErrNoSocket) {
		if lost := d.tmuxSocketLost(ctx, c); lost != nil {
			return lost
		}
	}
	if errors.Is(err, tmux.ErrNoServer) {
		return nil
	}
	if err != nil {
		return err
	}
	pane, ok := tmux.FindPane(panes, inc.Session, inc.Root.PID)
	if !ok {
		for _, p := range panes {
			if p.Err != nil && (p.Session == inc.Session || p.Session == "") {
				return fmt.Errorf("tmux: session %s: its pane cannot be identified in the listing (%v); left in place", inc.Session, p.Err)
			}
		}
		return nil // not this incarnation's pane, or gone
	}
	// The pane pid is checked again by the server itself, in the same
	// command as the kill: a relaunch between the listing and the kill
	// (it replaces this very session) is never killed.
	err = c.KillSessionOfPane(ctx, pane.PaneID, inc.Root.PID)
	if err == nil || errors.Is(err, tmux.ErrNoPane) || errors.Is(err, tmux.ErrNoSession) || errors.Is(err, tmux.ErrNoServer) {
		return nil
	}
	return err
}

// capturePane returns the screen (plus lines of history) of the pane herd
// launched for session name's current incarnation.
func (d *Daemon) capturePane(ctx context.Context, name string, lines int) ([]byte, error) {
	var inc herd.Incarnation
	err := d.st.View(ctx, func(tx store.Tx) error {
		s, err := tx.Session(name)
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil {
		return nil, err
	}
	pane, err := d.agentPane(ctx, inc)
	if err != nil {
		return nil, err
	}
	return d.tmuxClient().CapturePane(ctx, pane, lines)
}

// agentPane resolves, from a fresh listing, the id (%N) of the pane herd
// launched for inc: the one whose pane pid is inc's root. Input and captures
// address it by id, never the session's active pane, which is whatever a
// user attached to the session selected last (a split of the window, say).
// The id is resolved just before use because a new server reuses ids.
func (d *Daemon) agentPane(ctx context.Context, inc herd.Incarnation) (string, error) {
	panes, err := d.tmuxClient().ListPanes(ctx)
	if err != nil {
		return "", err
	}
	if p, ok := tmux.FindPane(panes, inc.Session, inc.Root.PID); ok {
		return p.PaneID, nil
	}
	return "", fmt.Errorf("tmux: session %s: the agent's pane (pane pid %d) is not in the listing", inc.Session, inc.Root.PID)
}

// listedAgentPane returns the id of the pane with pane pid rootPID in
// session name, as the last good listing saw it.
func (d *Daemon) listedAgentPane(name string, rootPID int) (string, bool) {
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	p, ok := tmux.FindPane(ts.panes[name], name, rootPID)
	return p.PaneID, ok
}

// listing is the outcome of one tmux listing.
type listing struct {
	// panes holds each session's rows in listing order, garbled ones
	// included when their session name could be read.
	panes map[string][]tmux.Pane
	// err: the listing failed; every session is unknown.
	err error
	// noServer: tmux said no server runs: every session is missing.
	noServer bool
	// unattributed: a row had no session name. A session missing from the
	// listing may be that row: it is unknown, never missing.
	unattributed bool
	// serverPID is the server that answered, from its rows; 0 if none says.
	serverPID int
}

// pane returns the row that speaks for the agent of session name: its own
// pane (pane pid rootPID); failing that a garbled row of the session, which
// may be it; failing that the session's first pane.
func (l listing) pane(name string, rootPID int) (tmux.Pane, bool) {
	rows := l.panes[name]
	if p, ok := tmux.FindPane(rows, name, rootPID); ok {
		return p, true
	}
	for _, p := range rows {
		if p.Err != nil {
			return p, true
		}
	}
	if len(rows) > 0 {
		return rows[0], true
	}
	return tmux.Pane{}, false
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
	lastServer := ts.serverPID
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
		done <- newListing(panes, err, lastServer)
	}()
	select {
	case l := <-done:
		return l
	case <-ctx.Done():
		return listing{err: fmt.Errorf("tmux: listing did not answer within the tick: %w", ctx.Err())}
	}
}

// newListing reads one ListPanes outcome. lastServer is the server that
// answered the previous good listing: a missing socket while it still runs
// is not "no server" — a /tmp cleaner deleted its socket, and its sessions
// may all be alive — so the sessions are unknown. A server that exited
// (even killed) leaves its socket behind, and reads as no server.
func newListing(panes []tmux.Pane, err error, lastServer int) listing {
	l := listing{panes: map[string][]tmux.Pane{}}
	switch {
	case errors.Is(err, tmux.ErrNoSocket) && tmuxServerRuns(lastServer):
		l.err = fmt.Errorf("tmux: the server's socket is gone while the server (pid %d) still runs; kill -USR1 %d makes tmux recreate it: %w", lastServer, lastServer, err)
		return l
	case errors.Is(err, tmux.ErrNoServer):
		l.noServer = true
	case err != nil:
		l.err = err
	}
	for _, p := range panes {
		if p.Session == "" {
			l.unattributed = true
			continue
		}
		if p.Err == nil && l.serverPID == 0 {
			l.serverPID = p.ServerPID
		}
		l.panes[p.Session] = append(l.panes[p.Session], p)
	}
	return l
}

// tmuxServerRuns reports whether pid is a live process named like a tmux
// server. A reused pid that is some other tmux keeps sessions unknown, the
// safe side.
func tmuxServerRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := proc.Real().Stat(pid)
	return err == nil && strings.HasPrefix(st.Comm, "tmux") && !st.Zombie()
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
	if l.unattributed && !ts.unattributed {
		d.log.Warn("tmux listing has a row with no session name; sessions missing from it read unknown")
	}
	ts.unattributed = l.unattributed
	switch {
	case l.noServer:
		ts.serverPID = 0
	case l.serverPID != 0:
		ts.serverPID = l.serverPID
	}
	ts.panes = l.panes
	ts.attached = map[string]bool{}
	ts.lastActivity = map[string]time.Time{}
	var unmanaged []tmux.Pane
	for name, rows := range l.panes {
		p := rows[0]
		for _, r := range rows {
			if r.Err == nil {
				p = r
				break
			}
		}
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
	rt, why := d.runtimeAxis(s.Name, inc.Root.PID, l)
	identified := !inc.Identity.Zero()
	if !identified && rt.Axis == herd.Alive {
		inc = d.findAgent(ctx, s, inc)
		identified = !inc.Identity.Zero()
	}
	process := herd.Unknown
	if identified {
		process = d.proc.Check(inc.Identity, d.bootID)
	}
	if rt.Axis == herd.Alive && process == herd.Dead && inc.Identity.PID == inc.Root.PID {
		rt.Behind = d.paneBehind(inc.ID)
	}
	v := liveness.Decide(rt, process, identified)
	switch v.Action {
	case liveness.Crash:
		d.forgetBehind(inc.ID)
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
		if s.Process == herd.Alive && s.State != herd.StatePending && s.State != herd.StateUnknown && d.isWatched(inc) {
			return // already recorded alive and watched: no write on every tick
		}
		kind := ""
		if !d.isWatched(inc) {
			kind = herd.EventAdopted
			if s.State == herd.StatePending {
				kind = ""
			}
		}
		d.markAlive(ctx, s, inc, kind)
	case herd.StatePending:
		if s.State == herd.StateUnknown {
			d.markPending(ctx, s, inc.ID)
		}
	case herd.StateUnknown:
		if why == "" {
			why = "tmux pane and agent process disagree"
			if rt.MissingOnce {
				why = "session missing from one tmux listing; re-checking"
			}
		}
		d.markUnknown(ctx, s, inc.ID, why)
	}
}

// tmuxCatchUp is how long tmux gets to report the pane of an agent that
// died as dead, with its exit status, before the death is taken as it is
// (process_gone). It is usually there within milliseconds.
const tmuxCatchUp = 2 * time.Second

// paneBehind reports whether the pane of incarnation inc, whose own
// process is gone while tmux still shows it running, is within
// tmuxCatchUp of that first sighting. The first sighting also nudges the
// server with SIGCHLD, which tmux 3.3a sometimes misses.
func (d *Daemon) paneBehind(inc string) bool {
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.behind == nil {
		ts.behind = map[string]time.Time{}
	}
	first, seen := ts.behind[inc]
	if !seen {
		for other, at := range ts.behind {
			if time.Since(at) > time.Minute {
				delete(ts.behind, other) // decided elsewhere (a stop)
			}
		}
		ts.behind[inc] = time.Now()
		if tmuxServerRuns(ts.serverPID) {
			_ = syscall.Kill(ts.serverPID, syscall.SIGCHLD)
		}
		return true
	}
	return time.Since(first) < tmuxCatchUp
}

// forgetBehind drops inc's catch-up record once its death is decided.
func (d *Daemon) forgetBehind(inc string) {
	ts := &d.tmuxState
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.behind, inc)
}

// markPending returns an unknown session to pending: its pane reads alive
// again and the agent under its wrapper has not been seen yet (markAlive
// takes it to running once it is).
func (d *Daemon) markPending(ctx context.Context, s herd.Session, inc string) {
	d.update(ctx, s.Name, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State != herd.StateUnknown {
			return nil, nil
		}
		cur.State = herd.StatePending
		cur.StateSince = time.Now().UTC()
		return []*herd.Event{d.event(*cur, inc, herd.EventRecovered, "", "tmux pane readable again; agent not seen yet", nil)}, nil
	})
}

// runtimeAxis reads one session's runtime axis from a listing, from the
// row of its agent's pane (pane pid rootPID), with why when it is unknown. A
// session missing from one good listing is not yet dead; from two in a row it
// is. Missing from a listing with a row of no session name, it is unknown:
// that row may be it.
func (d *Daemon) runtimeAxis(name string, rootPID int, l listing) (liveness.Runtime, string) {
	if l.err != nil {
		return liveness.Runtime{Axis: herd.Unknown}, l.err.Error()
	}
	ts := &d.tmuxState
	p, ok := l.pane(name, rootPID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.missing == nil {
		ts.missing = map[string]int{}
	}
	if !ok && !l.noServer && l.unattributed {
		return liveness.Runtime{Axis: herd.Unknown}, "session not in a tmux listing that has a row with no session name"
	}
	if !ok || l.noServer {
		ts.missing[name]++
		if ts.missing[name] < 2 {
			return liveness.Runtime{Axis: herd.Dead, MissingOnce: true}, ""
		}
		return liveness.Runtime{Axis: herd.Dead}, ""
	}
	delete(ts.missing, name)
	switch {
	case p.Err != nil:
		return liveness.Runtime{Axis: herd.Unknown}, p.Err.Error()
	case p.Dead:
		return liveness.Runtime{Axis: herd.Dead, Status: p.DeadStatus, Signal: p.DeadSignal}, ""
	}
	return liveness.Runtime{Axis: herd.Alive}, ""
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
