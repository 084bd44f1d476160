package tmux

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/runtime"
)

// Runtime runs agents in tmux sessions of one server (one -L socket).
type Runtime struct {
	client *Client
	// callTimeout bounds a listing started by Observe: it may outlive the
	// tick that started it, never this bound.
	callTimeout time.Duration

	mu sync.Mutex // guards the fields below
	// inflight is true while an Observe listing runs: a hung tmux never
	// gets a second call piled on top of the first.
	inflight bool
	// serverPID is the server that answered the last good listing with
	// rows, 0 when it found no server.
	serverPID int
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns the tmux runtime of c; each Observe listing is bounded by
// c's per-call timeout.
func New(c *Client) *Runtime {
	return &Runtime{client: c, callTimeout: c.timeout()}
}

// Client is the runtime's tmux client.
func (r *Runtime) Client() *Client { return r.client }

// Start launches spec's argv in a new detached tmux session (no shell in
// between). A session of the same name is removed first only when it is
// this slot's leftover: it holds the pane of the slot's previous
// incarnation (prevRoot), or nothing but dead panes. Anything else — an
// unmanaged session, someone's own, a session whose rows cannot all be
// read — is never touched, and the launch fails.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec, prevRoot int) (runtime.Started, error) {
	c := r.client
	if err := r.socketLost(ctx); err != nil {
		// new-session would start a second server on the socket path,
		// and every session of the first would then read gone.
		return runtime.Started{}, err
	}
	pid, err := c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	if err == nil || !strings.Contains(err.Error(), "duplicate session") {
		return runtime.Started{RootPID: pid}, err
	}
	// The name is taken: look before removing anything.
	snap := r.List(ctx)
	if snap.Err != nil {
		return runtime.Started{}, fmt.Errorf("tmux: list before launch: %w", snap.Err)
	}
	if err := Leftover(snap, spec.Session, prevRoot); err != nil {
		return runtime.Started{}, err
	}
	if _, listed := snap.Panes[spec.Session]; listed {
		// No session or no server: the leftover went meanwhile (its
		// own kill won the race), which is what was wanted.
		if err := c.KillSession(ctx, spec.Session); err != nil && !errors.Is(err, ErrNoSession) && !errors.Is(err, ErrNoServer) {
			return runtime.Started{}, fmt.Errorf("tmux: clear old session: %w", err)
		}
	}
	if err := r.socketLost(ctx); err != nil {
		return runtime.Started{}, err
	}
	pid, err = c.NewSession(ctx, spec.Session, spec.Workdir, spec.Env, spec.Argv)
	return runtime.Started{RootPID: pid}, err
}

// socketLost returns an error when the tmux server herd last listed still
// runs but tmux says its socket file is gone (a /tmp cleaner): nothing can
// reach that server, and a new-session would start a second one beside
// it. tmux itself is asked, since only it knows the path it uses
// ($TMUX_TMPDIR, or /tmp when that is unusable).
func (r *Runtime) socketLost(ctx context.Context) error {
	pid := r.lastServer()
	if pid == 0 || !ServerRuns(pid) {
		return nil
	}
	if r.client.Connected() {
		// The launch goes over the control connection, which reaches
		// the server whatever became of its socket and never starts
		// one: no tmux process per launch to ask.
		return nil
	}
	if err := r.client.Reach(ctx); !errors.Is(err, ErrNoSocket) {
		return nil
	}
	return fmt.Errorf("tmux: the server (pid %d) runs but its socket is gone; not starting a second server beside it (kill -USR1 %d makes tmux recreate the socket)", pid, pid)
}

// Leftover returns nil when the listed session name may be cleared for a
// relaunch of its slot — it is this slot's leftover (the pane of prevRoot,
// or only dead panes), or it is not listed at all — and the reason not to
// touch it otherwise. A session missing from a listing that has a row with
// no session name may be that row: it is not cleared, and not assumed gone.
func Leftover(snap runtime.Snapshot, name string, prevRoot int) error {
	rows := snap.Panes[name]
	if len(rows) == 0 {
		if snap.Unattributed != nil {
			return fmt.Errorf("tmux: a session named %s exists and cannot be found in the listing (a row has no session name); not touching it", name)
		}
		return nil // gone meanwhile: the launch is retried
	}
	for _, p := range rows {
		if p.Err != nil {
			return fmt.Errorf("tmux: a session named %s exists and its listing cannot be read (%v); not touching it", name, p.Err)
		}
	}
	if _, ok := snap.Own(name, prevRoot); ok {
		return nil
	}
	for _, p := range rows {
		if !p.Dead {
			return fmt.Errorf("tmux: a session named %s already exists and is not this slot's leftover (pane pid %d); not touching it", name, p.PID)
		}
	}
	return nil
}

// Remove removes an incarnation's tmux session, only if it still holds the
// pane herd launched for it (same pane pid): a replacement launched
// meanwhile under the same name is never killed. The server checks the
// pane pid itself first, so a garbled, truncated or empty listing cannot
// leave the session behind; the listing is read only for a pane that is
// not the session's active one (a user split the window). A session that
// cannot be read in the listing, and may still be there, is left with an
// error, for the caller to retry.
func (r *Runtime) Remove(ctx context.Context, inc herd.Incarnation) error {
	if inc.Root.PID > 0 {
		err := r.client.KillSessionIfPanePID(ctx, inc.Session, inc.Root.PID)
		if errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoServer) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	snap := r.List(ctx)
	if snap.NoServer {
		return nil
	}
	if snap.Err != nil {
		return r.leftUnlessGone(ctx, inc.Session, snap.Err)
	}
	pane, ok := snap.Own(inc.Session, inc.Root.PID)
	if !ok {
		if snap.Unattributed != nil {
			return r.leftUnlessGone(ctx, inc.Session, snap.Unattributed)
		}
		for _, p := range snap.Panes[inc.Session] {
			if p.Err != nil {
				return r.leftUnlessGone(ctx, inc.Session, p.Err)
			}
		}
		return nil // not this incarnation's pane, or gone
	}
	// The pane pid is checked again by the server itself, in the same
	// command as the kill: a relaunch between the listing and the kill
	// (it replaces this very session) is never killed.
	err := r.client.KillSessionOfPane(ctx, pane.ID, inc.Root.PID)
	if err == nil || errors.Is(err, ErrNoPane) || errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoServer) {
		return nil
	}
	return err
}

// leftUnlessGone returns nil when no session called name exists (what
// the unreadable listing hid is gone), else an error saying it was left
// in place because of why.
func (r *Runtime) leftUnlessGone(ctx context.Context, name string, why error) error {
	if has, err := r.client.HasSession(ctx, name); err == nil && !has {
		return nil
	}
	return fmt.Errorf("tmux: session %s: its pane cannot be identified in the listing (%v); left in place", name, why)
}

// KillUnmanaged kills a herd-named session that has no record, by its
// exact name; runtime.ErrGone when it was gone already.
func (r *Runtime) KillUnmanaged(ctx context.Context, name string) error {
	err := r.client.KillSession(ctx, name)
	if errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoServer) {
		return fmt.Errorf("tmux: session %s: %w", name, runtime.ErrGone)
	}
	return err
}

// Capture returns the screen (plus lines of history) of the pane herd
// launched for inc.
func (r *Runtime) Capture(ctx context.Context, inc herd.Incarnation, lines int) ([]byte, error) {
	pane, err := r.agentPane(ctx, inc)
	if err != nil {
		return nil, err
	}
	if lines <= 0 {
		lines = -1 // all of the history, not just the visible screen
	}
	return r.client.CapturePane(ctx, pane, lines)
}

// CaptureEscapes is Capture with the pane's colours and attributes kept
// as escape sequences, for a reader that renders them (the console).
func (r *Runtime) CaptureEscapes(ctx context.Context, inc herd.Incarnation, lines int) ([]byte, error) {
	pane, err := r.agentPane(ctx, inc)
	if err != nil {
		return nil, err
	}
	if lines <= 0 {
		lines = -1
	}
	return r.client.CapturePaneEscapes(ctx, pane, lines)
}

// CapturePane returns the visible content of one pane by id.
func (r *Runtime) CapturePane(ctx context.Context, paneID string) ([]byte, error) {
	return r.client.CapturePane(ctx, paneID, 0)
}

// agentPane resolves, from a fresh listing, the id (%N) of the pane herd
// launched for inc: the one whose pane pid is inc's root. The id is
// resolved just before use because a new server reuses ids.
func (r *Runtime) agentPane(ctx context.Context, inc herd.Incarnation) (string, error) {
	snap := r.List(ctx)
	if snap.Err != nil {
		return "", snap.Err
	}
	if snap.NoServer {
		return "", fmt.Errorf("tmux: session %s: %w", inc.Session, ErrNoServer)
	}
	if p, ok := snap.Own(inc.Session, inc.Root.PID); ok {
		return p.ID, nil
	}
	return "", fmt.Errorf("tmux: session %s: the agent's pane (pane pid %d) is not in the listing", inc.Session, inc.Root.PID)
}

// List runs one listing now and parses it.
func (r *Runtime) List(ctx context.Context) runtime.Snapshot {
	last := r.lastServer()
	panes, err := r.client.ListPanes(ctx)
	return r.remember(Parse(panes, err, last))
}

// Observe runs one listing for the prober. If the call does not return
// before ctx ends, Observe returns an unknown snapshot while the call
// finishes in the background, bounded by the client's timeout; no second
// Observe call starts meanwhile.
func (r *Runtime) Observe(ctx context.Context) runtime.Snapshot {
	r.mu.Lock()
	if r.inflight {
		r.mu.Unlock()
		return runtime.Snapshot{Err: errors.New("tmux: previous listing still running"), At: time.Now()}
	}
	r.inflight = true
	r.mu.Unlock()

	done := make(chan runtime.Snapshot, 1)
	go func() {
		defer func() {
			r.mu.Lock()
			r.inflight = false
			r.mu.Unlock()
		}()
		callCtx, cancel := context.WithTimeout(context.Background(), r.callTimeout)
		defer cancel()
		done <- r.List(callCtx)
	}()
	select {
	case s := <-done:
		return s
	case <-ctx.Done():
		return runtime.Snapshot{Err: fmt.Errorf("tmux: listing did not answer within the tick: %w", ctx.Err()), At: time.Now()}
	}
}

// ServerPID is the server that answered the last good listing with rows,
// 0 when none did or it found no server.
func (r *Runtime) ServerPID() int { return r.lastServer() }

func (r *Runtime) lastServer() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serverPID
}

// remember keeps the server that answered a good listing.
func (r *Runtime) remember(s runtime.Snapshot) runtime.Snapshot {
	if s.Err != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case s.NoServer:
		r.serverPID = 0
	case s.ServerPID != 0:
		r.serverPID = s.ServerPID
	}
	return s
}

// Nudge sends SIGCHLD to the server of the last good listing, which tmux
// 3.3a sometimes needs to reap a pane's process and report its exit; only
// once that pid is proven to be the server of this runtime's socket.
func (r *Runtime) Nudge() {
	if pid := r.lastServer(); pid > 0 {
		_ = r.client.NudgeServer(pid)
	}
}

// Parse reads one ListPanes outcome into a snapshot: the one listing
// parser. lastServer is the server that answered the previous good
// listing: a missing socket while it still runs is not "no server" — a
// /tmp cleaner deleted its socket, and its sessions may all be alive — so
// the sessions are unknown. A server that exited (even killed) leaves its
// socket behind, and reads as no server.
func Parse(panes []Pane, err error, lastServer int) runtime.Snapshot {
	s := runtime.Snapshot{Panes: map[string][]runtime.Pane{}, At: time.Now()}
	switch {
	case errors.Is(err, ErrNoSocket) && ServerRuns(lastServer):
		s.Err = fmt.Errorf("tmux: the server's socket is gone while the server (pid %d) still runs; kill -USR1 %d makes tmux recreate it: %w", lastServer, lastServer, err)
		return s
	case errors.Is(err, ErrNoServer):
		s.NoServer = true
	case err != nil:
		s.Err = err
		return s
	}
	for _, p := range panes {
		if p.Session == ControlSession {
			// The control connection's own session: no agent's.
			if p.Err == nil && s.ServerPID == 0 {
				s.ServerPID = p.ServerPID
			}
			continue
		}
		if p.Session == "" {
			if s.Unattributed == nil {
				s.Unattributed = p.Err
				if p.Err == nil {
					s.Unattributed = errors.New("tmux: a row with an empty session name")
				}
			}
			continue
		}
		if p.Err == nil && s.ServerPID == 0 {
			s.ServerPID = p.ServerPID
		}
		s.Panes[p.Session] = append(s.Panes[p.Session], runtime.Pane{
			Session: p.Session, ID: p.PaneID, PID: p.PID, Dead: p.Dead, Status: p.DeadStatus, Signal: p.DeadSignal,
			Attached: p.Attached, Activity: p.WindowActivity, Err: p.Err,
		})
	}
	return s
}

// ServerRuns reports whether pid is a live process named like a tmux
// server. A reused pid that is some other tmux keeps sessions unknown, the
// safe side.
func ServerRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, err := proc.Real().Stat(pid)
	return err == nil && strings.HasPrefix(st.Comm, "tmux") && !st.Zombie()
}
