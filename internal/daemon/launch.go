package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"herd"
	"herd/internal/execrt"
	"herd/internal/reconcile"
	"herd/internal/store"
)

// launched is what a runtime reports after starting an agent.
type launched struct {
	// RootPID is the process herd started (the pane's process for tmux).
	RootPID int
	// Wait reaps the process and returns its exit; nil when the process is
	// not this daemon's child (tmux panes, adopted agents).
	Wait func() herd.Exit
}

// launchRequest is one launch of a slot.
type launchRequest struct {
	Role  herd.Role
	Name  string
	Index int
	// Kind is the event recorded: spawned, restarted or resumed.
	Kind string
	// Argv overrides the role's command (resume).
	Argv []string
	// Check re-validates the slot under its lock; launch skips when it errs.
	Check func(s *herd.Session, exists bool) error
}

// errSkip means a launch was no longer needed when its slot was locked.
var errSkip = errors.New("launch not needed")

// launch starts the next incarnation of a slot and records it. A launch
// that fails is a crash of that incarnation and goes through crash
// accounting, so a bad command backs off instead of looping.
func (d *Daemon) launch(ctx context.Context, req launchRequest) error {
	unlock := d.locks.Lock(req.Name)
	defer unlock()
	return d.launchLocked(ctx, req)
}

// launchLocked is launch for a caller that holds the slot's lock.
func (d *Daemon) launchLocked(ctx context.Context, req launchRequest) error {
	if !d.ops.begin() {
		return errShuttingDown
	}
	defer d.ops.end()
	var prior herd.Session
	exists := false
	prevRoot := 0
	err := d.st.View(ctx, func(tx store.Tx) error {
		s, err := tx.Session(req.Name)
		if err == nil {
			prior, exists = s, true
			if inc, err := tx.Incarnation(s.Incarnation); err == nil {
				prevRoot = inc.Root.PID
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if req.Check != nil {
			return req.Check(&prior, exists)
		}
		return nil
	})
	if errors.Is(err, errSkip) {
		return nil
	}
	if err != nil {
		return err
	}

	role := req.Role
	argv := role.Command
	if len(req.Argv) > 0 {
		argv = req.Argv
	}
	inc := herd.Incarnation{
		ID: newID(), Session: req.Name, Host: d.host, RuntimeKind: role.Runtime,
		Argv: argv, Workdir: role.Workdir, StartedAt: time.Now().UTC(),
	}
	env := map[string]string{}
	for k, v := range role.Env {
		env[k] = v
	}
	env[herd.EnvSession] = req.Name
	env[herd.EnvIncarnation] = inc.ID
	env[herd.EnvSocket] = SocketPath(d.stateDir)
	spec := execrt.Spec{Session: req.Name, Incarnation: inc.ID, Argv: argv, Workdir: role.Workdir, Env: env}

	l, startErr := d.start(ctx, role, spec, prevRoot)

	s := prior
	if !exists {
		s = herd.Session{Name: req.Name, Role: role.Name, Index: req.Index}
	}
	s.Host = d.host
	s.RuntimeKind = role.Runtime
	s.Incarnation = inc.ID
	s.Activity = herd.ActivityUnknown
	s.Archived = false
	s.Snapshot = nil
	s.LastActivityAt = nil

	if startErr != nil {
		d.log.Warn("launch failed", "session", req.Name, "err", startErr)
		return d.st.Update(ctx, func(tx store.Tx) error {
			s.State = herd.StatePending
			if err := tx.PutSession(s); err != nil {
				return err
			}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			return d.crashTx(tx, &s, &inc, herd.Exit{Reason: herd.ReasonLaunchFailed}, startErr.Error(), nil, time.Now().UTC())
		})
	}

	inc.Root = d.identifyLaunched(l.RootPID, inc.ID)
	names, wrapped := agentNames(role, argv)
	if !wrapped {
		inc.Identity = inc.Root
	} else if pid, ok, _ := d.proc.FindAgent(l.RootPID, names); ok {
		if id, err := d.proc.Identify(pid, d.bootID); err == nil {
			inc.Identity = id
		}
	}

	now := time.Now().UTC()
	s.StartedAt = &now
	s.StateSince = now
	s.Runtime = herd.Alive
	s.Exit = nil
	s.BackoffUntil = nil
	if inc.Identity.Zero() {
		s.State, s.Process = herd.StatePending, herd.Unknown
	} else {
		s.State, s.Process = herd.StateRunning, herd.Alive
	}
	// The agent runs now: its record must be written even if ctx ends (a
	// daemon stopping), or the next daemon would launch a second copy.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = d.st.Update(recCtx, func(tx store.Tx) error {
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		if err := tx.PutSession(s); err != nil {
			return err
		}
		msg := fmt.Sprintf("%s pid %d: %s", role.Runtime, l.RootPID, argvString(argv))
		return tx.AppendEvent(d.event(s, inc.ID, req.Kind, "", msg, map[string]any{"pid": l.RootPID, "argv": argv, "restarts": s.Restarts}))
	})
	if err != nil {
		// Unrecorded, the agent would be invisible: take it down again.
		d.log.Error("launch: record failed; stopping the new agent", "session", s.Name, "err", err)
		if terr := d.terminate(recCtx, inc); terr != nil {
			d.log.Error("launch: stop unrecorded agent", "session", s.Name, "err", terr)
		}
		return err
	}
	d.watch(s.Name, inc, l.Wait)
	return nil
}

// identifyLaunched records the identity of a process herd just started.
// A tmux pane's process may not have exec'd yet when tmux answers (it still
// shows the server's environment), so the marker is awaited briefly; if it
// never shows, the identity is kept without a marker (pid, start time and
// boot id still pin it down).
func (d *Daemon) identifyLaunched(pid int, marker string) herd.Identity {
	deadline := time.Now().Add(time.Second)
	for {
		id, err := d.proc.Identify(pid, d.bootID)
		if err != nil {
			// Already gone: its watcher or the prober reports how.
			st, serr := d.proc.Stat(pid)
			if serr != nil {
				return herd.Identity{BootID: d.bootID, PID: pid}
			}
			return herd.Identity{BootID: d.bootID, PID: pid, StartTime: st.StartTime}
		}
		if id.Marker == marker {
			return id
		}
		if time.Now().After(deadline) {
			id.Marker = ""
			return id
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start hands a launch to the role's runtime.
func (d *Daemon) start(ctx context.Context, role herd.Role, spec execrt.Spec, prevRoot int) (launched, error) {
	switch role.Runtime {
	case herd.RuntimeExec:
		p, err := d.exec.Launch(ctx, spec)
		if err != nil {
			return launched{}, err
		}
		return launched{RootPID: p.PID, Wait: p.Wait}, nil
	case herd.RuntimeTmux:
		return d.startTmux(ctx, spec, prevRoot)
	}
	return launched{}, fmt.Errorf("unknown runtime %q", role.Runtime)
}

// agentNames returns the names that pick the agent process out of the
// launched tree, and whether the launched process is a wrapper around it.
func agentNames(r herd.Role, argv []string) (names []string, wrapped bool) {
	base := ""
	if len(argv) > 0 {
		base = filepath.Base(argv[0])
	}
	want := r.AgentProcess
	if want == "" {
		switch r.Agent {
		case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
			want = r.Agent
		}
	}
	if want == "" || want == base {
		return nil, false
	}
	return []string{want}, true
}

// reconcileLaunch turns a plan step into a launch request.
func (d *Daemon) reconcileLaunch(role herd.Role, a reconcile.Action) launchRequest {
	req := launchRequest{Role: role, Name: a.Session, Index: a.Index, Kind: herd.EventSpawned}
	now := time.Now()
	switch a.Kind {
	case reconcile.Launch:
		req.Check = func(s *herd.Session, exists bool) error {
			if exists && reconcile.Holds(*s) {
				return errSkip
			}
			return nil
		}
	case reconcile.Relaunch:
		req.Kind = herd.EventRestarted
		req.Check = func(s *herd.Session, exists bool) error {
			if !exists || (s.State != herd.StateBackoff && s.State != herd.StateCrashed) {
				return errSkip
			}
			if s.BackoffUntil != nil && now.Before(*s.BackoffUntil) {
				return errSkip
			}
			return nil
		}
	}
	return req
}

func argvString(argv []string) string {
	out := ""
	for i, a := range argv {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%q", a)
	}
	return out
}

// envNames lists the names (not values) of a role's environment, for snapshots.
func envNames(env map[string]string) []string {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
