package slots

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/agents/mcplaunch"
	"herd/internal/cmdpath"
	"herd/internal/conversation"
	"herd/internal/prober"
	"herd/internal/reconcile"
	"herd/internal/rollout"
	"herd/internal/runtime"
	"herd/internal/status"
	"herd/internal/store"
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
	// Generation is the slot's placement generation the launch was
	// planned on (0: any); a failover slot launches only while it holds.
	Generation int64
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

// launchLocked is launch for a caller that holds the slot's lock: read the
// slot, prepare the incarnation (its template, workdir and conversation),
// write it ahead, start it in its runtime, prove its identity and record
// it running.
func (s *Slots) launchLocked(ctx context.Context, req LaunchRequest) error {
	if !s.ops.Begin() {
		return errShuttingDown
	}
	if req.Role.Tasks && req.Role.Runtime == herd.RuntimeExec && len(req.Argv) > 0 {
		// An exec task role's argv ends in its turn, given again at each
		// launch: a resume runs the role's command continuing the
		// conversation, not a snapshot that holds the last turn.
		req.Argv, req.Continue = nil, true
	}
	defer s.ops.End()
	if s.fenced(req.Role) {
		gen, err := s.fenceCheck(ctx, req)
		if errors.Is(err, errFenced) {
			if req.Kind == herd.EventResumed || req.Reason == herd.ReasonUser {
				// A person asked: say why nothing started.
				return fmt.Errorf("launch %s: %w", req.Name, err)
			}
			s.o.Log.Debug("launch fenced", "session", req.Name, "generation", req.Generation)
			return nil
		}
		if err != nil {
			return err
		}
		if gen != 0 {
			req.Data = maps.Clone(req.Data)
			if req.Data == nil {
				req.Data = map[string]any{}
			}
			req.Data["generation"] = gen
		}
	}
	prior, err := s.readSlot(ctx, req)
	if errors.Is(err, errSkip) {
		return nil
	}
	if err != nil {
		return err
	}
	if prior.endedIncarnation != "" && prior.agentID != "" && s.checkRefusedResume(ctx, prior.endedIncarnation) {
		// The prior launch resumed this id and the agent refused it: the
		// check on its death may not have run yet (the reconciler can be
		// first); this launch starts fresh either way.
		prior.agentID = ""
	}
	if req.Kind == herd.EventSpawned && PausedForBudget(prior.session) {
		// The day's budget stopped it, resumable: the next day's launch
		// continues its conversation.
		req.Kind, req.Continue = herd.EventResumed, true
	}
	l := s.prepareLaunch(req)
	startErr := s.prepareWorkdir(ctx, l)
	if startErr == nil && len(req.Argv) == 0 {
		l.pickConversation(prior.agentID)
	}
	if startErr == nil && l.role.Tasks && l.role.Runtime == herd.RuntimeExec {
		if l.task == nil {
			// An exec task role's agent runs one task's turn a launch:
			// with none, nothing runs.
			return s.st.Parked(ctx, l.record(prior))
		}
		l.giveTurn()
	}
	if startErr == nil {
		s.withHooks(l)
	}
	if startErr == nil && l.role.MCP {
		startErr = mcplaunch.With(s.o.MCPCommand, s.o.Socket, l.role, req.Name, &l.spec, l.data)
		l.argv, l.inc.Argv = l.spec.Argv, l.spec.Argv
	}
	rec := l.record(prior)
	var started runtime.Started
	if startErr == nil {
		// Write-ahead: the incarnation is on record before its process
		// exists, so a daemon killed during the launch leaves a record
		// the next daemon resolves (adopts the process carrying its
		// marker, or ends the launch) instead of a second agent.
		if err := s.st.LaunchWritten(ctx, rec); err != nil {
			return err
		}
		started, startErr = s.startContained(ctx, l, prior.root)
	}
	if startErr != nil {
		s.o.Log.Warn("launch failed", "session", req.Name, "err", startErr)
		return s.st.LaunchFailed(ctx, rec, startErr.Error())
	}
	s.identifyAgent(l, started.RootPID)
	if err := s.recordLaunched(ctx, l, rec, started.RootPID); err != nil {
		return err
	}
	if s.fenced(req.Role) {
		s.noteFenceable(l.inc)
	}
	s.o.Prober.Watch(req.Name, l.inc, started.Wait)
	if req.Kind == herd.EventRestarted {
		s.st.Metrics.Restart(l.role.Name)
	}
	return nil
}

// PausedForBudget reports whether session s was last stopped because its
// role's budget for the day was spent.
func PausedForBudget(s herd.Session) bool {
	return s.State == herd.StateStopped && s.Exit != nil && s.Exit.Reason == herd.ReasonBudget
}

// priorSlot is what a launch reads of its slot first.
type priorSlot struct {
	session herd.Session
	exists  bool
	// root is the prior incarnation's root pid on this host (0: none).
	root int
	// agentID is the prior incarnation's agent session id.
	agentID string
	// endedIncarnation is the prior incarnation when it has ended on
	// this host ("" otherwise): was it a resume the agent refused?
	endedIncarnation string
}

// readSlot reads the slot's session and its prior incarnation, and has
// req.Check re-validate the slot (errSkip: no launch needed).
func (s *Slots) readSlot(ctx context.Context, req LaunchRequest) (*priorSlot, error) {
	p := &priorSlot{}
	err := s.st.Store().View(ctx, func(tx store.Tx) error {
		cur, err := tx.Session(req.Name)
		if err == nil {
			p.session, p.exists = cur, true
			// A pid recorded on another host (a slot moved here) means
			// nothing on this one.
			if inc, err := tx.Incarnation(cur.Incarnation); err == nil && inc.Host == s.st.Host() {
				p.root = inc.Root.PID
				p.agentID = inc.AgentSessionID
				if inc.Exit != nil {
					p.endedIncarnation = inc.ID
				}
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if req.Check != nil {
			return req.Check(&p.session, p.exists)
		}
		return nil
	})
	return p, err
}

// slotLaunch is one launch on its way: what it runs and where, and what
// its events say.
type slotLaunch struct {
	req  LaunchRequest
	role herd.Role
	argv []string
	inc  herd.Incarnation
	spec runtime.Spec
	// data is added to the launch's events.
	data map[string]any
	// resumedConv is the conversation the launch continues ("": none).
	resumedConv string
	// task is the task the slot holds, nil when none (task roles).
	task *herd.Task
	// turn: argv ends in the task's turn text (exec task roles).
	turn bool
}

// prepareLaunch fills the incarnation and the runtime's spec from the
// role's template (or the request's argv) and the agent's environment.
func (s *Slots) prepareLaunch(req LaunchRequest) *slotLaunch {
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
	return &slotLaunch{req: req, role: role, argv: argv, inc: inc, spec: spec, data: data}
}

// prepareWorkdir makes (or finds again) the session's worktree when its
// role asks for one, and checks that the command resolves there: a
// command that cannot start says so in one line, whatever the runtime (a
// tmux pane would only show an exit code).
func (s *Slots) prepareWorkdir(ctx context.Context, l *slotLaunch) error {
	wt, task, err := s.worktree(ctx, l.role, l.req.Name)
	if err != nil {
		return err
	}
	l.task = task
	if wt != nil {
		l.spec.Workdir, l.inc.Workdir = wt.Dir, wt.Dir
		l.data["worktree"], l.data["branch"] = wt.Path, wt.Branch
		if wt.Created {
			l.data["worktree_created"] = true
		}
		if wt.Output != "" {
			l.data["setup_output"] = clip(wt.Output, 4096)
		}
	}
	_, err = cmdpath.Resolve(l.argv[0], l.spec.Workdir, l.role.Env, os.Getenv("PATH"))
	return err
}

// pickConversation starts the agent's conversation for a launch from the
// role's command: Claude gets a session id of herd's choosing (recorded at
// once, so a crash before its first hook is resumable), and a crash
// relaunch continues the prior one (resume_on_crash).
func (l *slotLaunch) pickConversation(priorID string) {
	out, id, how := conversation.Pick(l.role.Agent, l.argv, agents.Resolve(l.argv[0], l.spec.Workdir), priorID, l.req.Continue,
		conversation.ClaudeTranscriptExists(l.spec.Workdir, l.role.Env), nil)
	l.argv, l.spec.Argv, l.inc.Argv, l.inc.AgentSessionID = out, out, out, id
	if id != "" {
		l.data["agent_session_id"] = id
	}
	if how != conversation.New {
		l.data["resumed_conversation"], l.data["resumed_because"] = true, how
		l.resumedConv = id
	}
}

// record is the launch's record for the writer.
func (l *slotLaunch) record(prior *priorSlot) *status.Launch {
	rec := &status.Launch{Name: l.req.Name, Role: l.role.Name, Index: l.req.Index, Inc: l.inc, Kind: l.req.Kind, Reason: l.req.Reason, Data: l.data}
	if prior.exists {
		rec.Prior = &prior.session
	}
	return rec
}

// startContained hands the launch to its runtime, inside the incarnation's
// cgroup when it gets one.
func (s *Slots) startContained(ctx context.Context, l *slotLaunch, prevRoot int) (runtime.Started, error) {
	cg := s.containLaunch(l.role, &l.spec, l.data)
	started, err := s.start(ctx, l.role, l.spec, prevRoot)
	s.launchStarted(ctx, cg, l.inc.ID, err)
	return started, err
}

// identifyAgent sets the incarnation's root (the process the runtime
// started, proven by its marker) and its agent process: the root, or the
// real agent under it (a launcher's child, what a wrapper runs; see
// prober.FindAgent). A launcher's child starts within moments: it is
// waited for briefly, and found by the prober when it takes longer.
func (s *Slots) identifyAgent(l *slotLaunch, pid int) {
	root, verified := s.identifyLaunched(pid, l.inc.ID)
	l.inc.Root = root
	if !verified {
		// The runtime named a process that does not carry this launch's
		// marker: nothing is ever signalled on its word. The prober
		// adopts the agent once a process proves to be it.
		s.o.Log.Warn("launch: the started process does not carry its marker; not trusted", "session", l.req.Name, "pid", pid)
		l.data["unverified_pid"] = true
		return
	}
	names := agents.Names(l.role.Agent, l.role.AgentProcess)
	deadline := time.Now().Add(launcherWait)
	wait := time.Millisecond
	for {
		id, found := prober.FindAgent(s.o.Proc, s.o.BootID, names, l.inc)
		if found.Found() {
			l.inc.Identity = id
			return
		}
		if found != prober.LauncherOnly || time.Now().After(deadline) {
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// launcherWait bounds the wait, during a launch, for the agent a launcher
// starts (npm's node shims start it within a few hundred milliseconds).
const launcherWait = 2 * time.Second

// recordLaunched records the agent running. It runs now: its record must
// be written even if ctx ends (a daemon stopping), or the next daemon
// would launch a second copy; unrecorded, it would be invisible, so a
// failed record takes it down again.
func (s *Slots) recordLaunched(ctx context.Context, l *slotLaunch, rec *status.Launch, pid int) error {
	recCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec.Inc = l.inc
	rec.Message = fmt.Sprintf("%s pid %d: %s", l.role.Runtime, pid, argvString(l.shownArgv()))
	if l.resumedConv != "" {
		rec.Message += "; conversation " + l.resumedConv + " resumed"
	}
	l.data["pid"], l.data["argv"] = pid, l.shownArgv()
	if err := s.st.Launched(recCtx, rec); err != nil {
		s.o.Log.Error("launch: record failed; stopping the new agent", "session", l.req.Name, "err", err)
		if terr := s.terminate(recCtx, l.inc); terr != nil {
			s.o.Log.Error("launch: stop unrecorded agent", "session", l.req.Name, "err", terr)
		}
		return err
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

// clip bounds s to n bytes, keeping its end (where an error is).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
