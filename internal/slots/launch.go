package slots

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/cmdpath"
	"herd/internal/reconcile"
	"herd/internal/rollout"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/worktree"
)

// LaunchRequest is one launch of a slot.
type LaunchRequest struct {
	Role  herd.Role
	Name  string
	Index int
	// Kind is the event recorded: spawned, restarted or resumed.
	Kind string
	// Reason is the event's reason ("" for a launch the reconciler
	// planned; user for herd restart, rollout for a rollout).
	Reason string
	// Data is added to the event.
	Data map[string]any
	// Argv overrides the role's command (resume).
	Argv []string
	// AgentSessionID is the conversation Argv continues (resume), kept
	// on the new incarnation at once.
	AgentSessionID string
	// Continue: a crash relaunch of a role with resume_on_crash; the
	// prior incarnation's conversation is continued when its id is known.
	Continue bool
	// Check re-validates the slot under its lock; launch skips when it errs.
	Check func(s *herd.Session, exists bool) error
}

// errSkip means a launch was no longer needed when its slot was locked.
var errSkip = errors.New("launch not needed")

// launch starts the next incarnation of a slot and records it. A launch
// that fails is a crash of that incarnation and goes through crash
// accounting, so a bad command backs off instead of looping.
func (s *Slots) launch(ctx context.Context, req LaunchRequest) error {
	unlock := s.st.Lock(req.Name)
	defer unlock()
	return s.launchLocked(ctx, req)
}

// launchLocked is launch for a caller that holds the slot's lock.
func (s *Slots) launchLocked(ctx context.Context, req LaunchRequest) error {
	if !s.ops.Begin() {
		return errShuttingDown
	}
	defer s.ops.End()
	var prior herd.Session
	exists := false
	prevRoot := 0
	priorID := "" // the prior incarnation's agent session id
	err := s.st.Store().View(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(req.Name)
		if err == nil {
			prior, exists = cur, true
			// A pid recorded on another host (a slot moved here) means
			// nothing on this one.
			if inc, err := tx.Incarnation(cur.Incarnation); err == nil && inc.Host == s.st.Host() {
				prevRoot = inc.Root.PID
				priorID = inc.AgentSessionID
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
		ID: status.NewID(), Session: req.Name, Host: s.st.Host(), RuntimeKind: role.Runtime,
		Argv: argv, Workdir: role.Workdir, StartedAt: time.Now().UTC(),
		Template: rollout.Fingerprint(role), AgentSessionID: req.AgentSessionID,
	}
	env := map[string]string{}
	for k, v := range role.Env {
		env[k] = v
	}
	env[herd.EnvSession] = req.Name
	env[herd.EnvIncarnation] = inc.ID
	env[herd.EnvSocket] = s.o.Socket
	spec := runtime.Spec{Session: req.Name, Incarnation: inc.ID, Argv: argv, Workdir: role.Workdir, Env: env}

	data := map[string]any{}
	for k, v := range req.Data {
		data[k] = v
	}
	wt, startErr := s.worktree(ctx, role, req.Name)
	if startErr == nil && wt != nil {
		spec.Workdir, inc.Workdir = wt.Dir, wt.Dir
		data["worktree"], data["branch"] = wt.Path, wt.Branch
		if wt.Created {
			data["worktree_created"] = true
		}
		if wt.Output != "" {
			data["setup_output"] = clip(wt.Output, 4096)
		}
	}
	if startErr == nil {
		// A command that cannot start says so in one line, whatever the
		// runtime (a tmux pane would only show an exit code).
		if _, err := cmdpath.Resolve(argv[0], spec.Workdir, role.Env, os.Getenv("PATH")); err != nil {
			startErr = err
		}
	}
	resumedConv := ""
	if startErr == nil && len(req.Argv) == 0 {
		// A launch from the role's command: Claude gets a session id of
		// herd's choosing (recorded at once, so a crash before its first
		// hook is resumable), and a crash relaunch continues the
		// conversation (resume_on_crash).
		out, id, how := conversation(role.Agent, argv, agents.Resolve(argv[0], spec.Workdir), priorID, req.Continue,
			claudeTranscriptExists(spec.Workdir, role.Env), nil)
		argv, spec.Argv, inc.Argv, inc.AgentSessionID = out, out, out, id
		if id != "" {
			data["agent_session_id"] = id
		}
		if how != convNew {
			data["resumed_conversation"], data["resumed_because"] = true, how
			resumedConv = id
		}
	}
	rec := &status.Launch{Name: req.Name, Role: role.Name, Index: req.Index, Inc: inc, Kind: req.Kind, Reason: req.Reason, Data: data}
	if exists {
		rec.Prior = &prior
	}

	var l runtime.Started
	if startErr == nil {
		// Write-ahead: the incarnation is on record before its process
		// exists, so a daemon killed during the launch leaves a record
		// the next daemon resolves (adopts the process carrying its
		// marker, or ends the launch) instead of a second agent.
		if err := s.st.LaunchWritten(ctx, rec); err != nil {
			return err
		}
		cg := s.containLaunch(role, &spec, data)
		l, startErr = s.start(ctx, role, spec, prevRoot)
		s.launchStarted(ctx, cg, inc.ID, startErr)
	}

	if startErr != nil {
		s.o.Log.Warn("launch failed", "session", req.Name, "err", startErr)
		return s.st.LaunchFailed(ctx, rec, startErr.Error())
	}

	root, verified := s.identifyLaunched(l.RootPID, inc.ID)
	inc.Root = root
	names, wrapped := agents.ProcessNames(role, argv)
	switch {
	case !verified:
		// The runtime named a process that does not carry this launch's
		// marker: nothing is ever signalled on its word. The prober
		// adopts the agent once a process proves to be it.
		s.o.Log.Warn("launch: the started process does not carry its marker; not trusted", "session", req.Name, "pid", l.RootPID)
		data["unverified_pid"] = true
	case !wrapped:
		inc.Identity = inc.Root
	default:
		if pid, ok, _ := s.o.Proc.FindAgent(l.RootPID, names); ok {
			if id, err := s.o.Proc.Identify(pid, s.o.BootID); err == nil && id.Marker == inc.ID {
				inc.Identity = id
			}
		}
	}

	// The agent runs now: its record must be written even if ctx ends (a
	// daemon stopping), or the next daemon would launch a second copy.
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec.Inc = inc
	rec.Message = fmt.Sprintf("%s pid %d: %s", role.Runtime, l.RootPID, argvString(argv))
	if resumedConv != "" {
		rec.Message += "; conversation " + resumedConv + " resumed"
	}
	data["pid"], data["argv"] = l.RootPID, argv
	if err := s.st.Launched(recCtx, rec); err != nil {
		// Unrecorded, the agent would be invisible: take it down again.
		s.o.Log.Error("launch: record failed; stopping the new agent", "session", req.Name, "err", err)
		if terr := s.terminate(recCtx, inc); terr != nil {
			s.o.Log.Error("launch: stop unrecorded agent", "session", req.Name, "err", terr)
		}
		return err
	}
	s.o.Prober.Watch(req.Name, inc, l.Wait)
	if req.Kind == herd.EventRestarted {
		s.st.Metrics.Restart(role.Name)
	}
	return nil
}

// identifyLaunched reads the identity of a process a runtime says it just
// started, and whether it is proven to be this launch's: it carries the
// launch's marker. A tmux pane's process may not have exec'd yet when tmux
// answers (it still shows the server's environment), so the marker is
// awaited briefly. A pid already gone keeps what could be read.
func (s *Slots) identifyLaunched(pid int, marker string) (herd.Identity, bool) {
	deadline := time.Now().Add(time.Second)
	wait := 500 * time.Microsecond
	for {
		id, err := s.o.Proc.Identify(pid, s.o.BootID)
		if err != nil {
			// Already gone: its watcher or the prober reports how.
			st, serr := s.o.Proc.Stat(pid)
			if serr != nil {
				return herd.Identity{BootID: s.o.BootID, PID: pid}, false
			}
			return herd.Identity{BootID: s.o.BootID, PID: pid, StartTime: st.StartTime}, false
		}
		if id.Marker == marker {
			return id, true
		}
		if time.Now().After(deadline) {
			id.Marker = ""
			return id, false
		}
		// Most processes have exec'd within a millisecond or two: look
		// again soon, then less often.
		time.Sleep(wait)
		wait = min(2*wait, 8*time.Millisecond)
	}
}

// start hands a launch to the role's runtime.
func (s *Slots) start(ctx context.Context, role herd.Role, spec runtime.Spec, prevRoot int) (runtime.Started, error) {
	rt, err := s.runtime(role.Runtime)
	if err != nil {
		return runtime.Started{}, err
	}
	if role.Runtime == herd.RuntimeTmux {
		s.o.Prober.Launched(spec.Session)
	}
	return rt.Start(ctx, spec, prevRoot)
}

// reconcileLaunch turns a plan step into a launch request.
func reconcileLaunch(role herd.Role, a reconcile.Action) LaunchRequest {
	req := LaunchRequest{Role: role, Name: a.Session, Index: a.Index, Kind: herd.EventSpawned}
	now := time.Now()
	switch a.Kind {
	case reconcile.Launch:
		req.Check = func(s *herd.Session, exists bool) error {
			if exists && s.State.HoldsSlot() {
				return errSkip
			}
			return nil
		}
	case reconcile.Relaunch:
		req.Kind = herd.EventRestarted
		req.Continue = role.ResumesOnCrash()
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

// worktree returns the session's own git worktree when its role asks for
// one, made (or found again: it outlives crashes and restarts) before the
// launch; nil when the role runs in its workdir. A failure fails the
// launch with its reason, the setup command's output included.
func (s *Slots) worktree(ctx context.Context, role herd.Role, session string) (*worktree.Worktree, error) {
	if !role.Worktree {
		return nil, nil
	}
	wt, err := s.o.Worktrees.Ensure(ctx, worktree.OptionsFor(role, session))
	if err != nil {
		return nil, err
	}
	return &wt, nil
}

// clip bounds s to n bytes, keeping its end (where an error is).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
