package prober

import (
	"context"
	"fmt"
	"slices"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/proc"
	"herd/internal/status"
)

// LauncherGrace is how long after its launch a launcher (an interpreter
// running the agent's script) with no agent child is waited for before it
// is taken for the agent itself: npm's node shims start their child
// within a second on an idle machine, but Gemini CLI's took 8 to 13 s on
// a loaded one (it loads its bundle first); Gemini CLI run with
// GEMINI_CLI_NO_RELAUNCH never does. A launcher taken for the agent is
// provisional: its child, once it appears, is followed.
const LauncherGrace = 15 * time.Second

// relaunchWait bounds how long a launcher that lives on after its agent
// exited gets to start the agent again (Gemini CLI relaunches its child
// after the trust dialog, exit 199) before the exit is the agent's death.
const relaunchWait = 5 * time.Second

// exitWait bounds the wait for the kernel's report of a non-child's exit:
// it is sent just after the exit wakes the pidfd.
const exitWait = 250 * time.Millisecond

// ExitLog tells how a process that is not the daemon's child ended
// (proc.Exits, fed by the kernel's proc connector).
type ExitLog interface {
	// Lookup returns how pid ended, if its exit was reported at or after
	// since, waiting up to wait for the report.
	Lookup(ctx context.Context, pid int, since time.Time, wait time.Duration) (proc.Exit, bool)
}

var _ ExitLog = (*proc.Exits)(nil)

// Found is what FindAgent found under an incarnation's root.
type Found int

const (
	// NotFound: no process of the tree is the agent (yet).
	NotFound Found = iota
	// LauncherOnly: the agent's launcher runs, its agent child not yet.
	LauncherOnly
	// FoundAgent: the agent's identity is known.
	FoundAgent
	// FoundLauncher: a launcher with no agent child after LauncherGrace,
	// taken for the agent provisionally (its child is followed once it
	// appears).
	FoundLauncher
)

// FindAgent returns the identity of inc's agent process: the root itself
// for a role with no agent name, else the process agents.Pick chooses in
// the root's tree (the real agent under a launcher or a wrapper),
// carrying inc's marker. A launcher whose child has not started is
// LauncherOnly until LauncherGrace after the launch, then the agent.
func FindAgent(fs proc.FS, boot string, names []string, inc herd.Incarnation) (herd.Identity, Found) {
	id, found := pickAgent(fs, boot, names, inc)
	if found == LauncherOnly && time.Since(inc.StartedAt) >= LauncherGrace {
		found = FoundLauncher
	}
	if found != FoundAgent && found != FoundLauncher {
		return herd.Identity{}, found
	}
	return id, found
}

// Found reports whether f names an identity to record.
func (f Found) Found() bool { return f == FoundAgent || f == FoundLauncher }

// pickAgent is FindAgent without the grace: a launcher with no agent
// child is LauncherOnly, with its identity.
func pickAgent(fs proc.FS, boot string, names []string, inc herd.Incarnation) (herd.Identity, Found) {
	if inc.Root.Zero() {
		return herd.Identity{}, NotFound
	}
	root, err := fs.Identify(inc.Root.PID, boot)
	if err != nil || root.StartTime != inc.Root.StartTime {
		return herd.Identity{}, NotFound
	}
	if len(names) == 0 {
		if root.Marker != inc.ID {
			return herd.Identity{}, NotFound
		}
		return root, FoundAgent
	}
	tree, err := readTree(fs, root.PID)
	if err != nil {
		return herd.Identity{}, NotFound
	}
	i, settled := agents.Pick(names, tree)
	if i < 0 {
		// No process is named the agent: when the command launched is
		// the agent itself (not a wrapper around it), the root carrying
		// the marker is it under whatever name it now has (a stand-in or
		// a script that exec'd into another program).
		if launchedIsAgent(names, inc.Argv) && root.Marker == inc.ID && !beforeExec(tree, root.PID, inc.Argv) {
			return root, FoundAgent
		}
		return herd.Identity{}, NotFound
	}
	id, err := fs.Identify(tree[i].PID, boot)
	if err != nil || id.Marker != inc.ID {
		return herd.Identity{}, NotFound
	}
	if !settled {
		return id, LauncherOnly
	}
	return id, FoundAgent
}

// launchedIsAgent reports whether argv, the command an incarnation
// launched, runs the agent names name itself (claude, .../bin/codex,
// node .../gemini.js) rather than a wrapper that starts it (a script of
// the user's, timeout, tmux): only then is the launched process the
// agent when no process of its tree is named so.
func launchedIsAgent(names, argv []string) bool {
	return len(argv) > 0 && agents.Matches(names, agents.Proc{Argv: argv})
}

// beforeExec reports whether the root of tree still runs what starts the
// command launched (herd's cgexec, whose argv ends with it) rather than
// the command itself: it is not the agent yet, whatever its name.
func beforeExec(tree []agents.Proc, root int, argv []string) bool {
	for _, p := range tree {
		if p.PID == root {
			return len(p.Argv) > len(argv) && slices.Equal(p.Argv[len(p.Argv)-len(argv):], argv)
		}
	}
	return true // not read: look again
}

// readTree reads the process tree under root for agents.Pick.
func readTree(fs proc.FS, root int) ([]agents.Proc, error) {
	nodes, err := fs.Tree(root)
	if err != nil {
		return nil, err
	}
	tree := make([]agents.Proc, len(nodes))
	for i, n := range nodes {
		tree[i] = agents.Proc{PID: n.PID, PPID: n.PPID, Comm: n.Comm, Argv: n.Argv, Exe: n.Exe}
	}
	return tree, nil
}

// launcherLives reports whether the tree under root holds a launcher of
// the agent names name (it may start the agent again).
func launcherLives(fs proc.FS, root int, names []string) bool {
	tree, err := readTree(fs, root)
	if err != nil {
		return false
	}
	for _, p := range tree {
		if agents.IsLauncher(p) && agents.Matches(names, p) {
			return true
		}
	}
	return false
}

// launcherChild reports whether pid is, in the tree under root, the child
// of a launcher (an interpreter running the agent's script).
func launcherChild(fs proc.FS, root, pid int) bool {
	tree, err := readTree(fs, root)
	if err != nil {
		return false
	}
	for _, p := range tree {
		if p.PID != pid {
			continue
		}
		for _, q := range tree {
			if q.PID == p.PPID {
				return agents.IsLauncher(q)
			}
		}
	}
	return false
}

// agentNames returns the names that pick session s's agent out of its
// tree; ok is false when its role cannot be read.
func (p *Prober) agentNames(ctx context.Context, s herd.Session) ([]string, bool) {
	role, err := p.st.Role(ctx, s.Role)
	if err != nil {
		return nil, false
	}
	return agents.Names(role.Agent, role.AgentProcess), true
}

// followRelaunch handles the exit of an agent that is not the launched
// root while the root lives on: when its launcher (an interpreter running
// the agent's script) starts the agent again
// within relaunchWait (Gemini CLI after its trust dialog), the new process
// is recorded as the agent and watched, and nothing is accounted; it
// reports whether it followed. A launcher that exits too, or starts
// nothing, leaves the exit to be accounted as the agent's death.
func (p *Prober) followRelaunch(session string, inc herd.Incarnation, who herd.Identity) bool {
	if who == inc.Root || inc.Root.Zero() {
		return false
	}
	ctx := p.ctx
	l, ok, err := p.st.LiveOne(ctx, session)
	if err != nil || !ok || l.Inc.ID != inc.ID {
		return false
	}
	names, ok := p.agentNames(ctx, l.S)
	if !ok || len(names) == 0 {
		return false
	}
	fs, boot := p.o.Proc, p.o.BootID
	if !launcherLives(fs, inc.Root.PID, names) {
		return false // no launcher of the agent's left to start it again
	}
	deadline := time.Now().Add(relaunchWait)
	wait := 2 * time.Millisecond
	for {
		if fs.Check(inc.Root, boot) != herd.Alive {
			return false // the launcher ended with it: a death
		}
		// Only a launcher's new child: a wrapper that runs (or becomes)
		// another process of the agent's name after the agent's death
		// does not make that death a relaunch.
		if id, found := pickAgent(fs, boot, names, l.Inc); found == FoundAgent && id.PID != who.PID && id.PID != inc.Root.PID &&
			id.StartTime >= who.StartTime && launcherChild(fs, inc.Root.PID, id.PID) {
			return p.relaunched(ctx, l.S, l.Inc, who, id)
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return true // the daemon is stopping; the next one adopts
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// relaunched records id as inc's agent in place of old, which its
// launcher replaced, and watches it.
func (p *Prober) relaunched(ctx context.Context, s herd.Session, inc herd.Incarnation, old, id herd.Identity) bool {
	how := "exited"
	if x, ok := p.exitOf(inc.ID, old); ok {
		how = describeExit(x)
	}
	return p.switchAgent(ctx, s, inc, old, id, status.Confirm{Kind: herd.EventAdopted, Reason: ReasonRelaunched,
		Message: fmt.Sprintf("the agent's launcher started it again: pid %d %s; following pid %d", old.PID, how, id.PID)})
}

// followLauncher looks again under a launcher taken for inc's agent
// (FoundLauncher): once its agent child has appeared, the child is the
// agent, recorded and watched in its stead.
func (p *Prober) followLauncher(ctx context.Context, s herd.Session, inc herd.Incarnation) herd.Incarnation {
	names, ok := p.agentNames(ctx, s)
	if !ok {
		return inc
	}
	id, found := pickAgent(p.o.Proc, p.o.BootID, names, inc)
	if found != FoundAgent || id.PID == inc.Identity.PID {
		return inc
	}
	p.o.Log.Info("the launcher taken for the agent started it; following its child", "session", s.Name, "launcher_pid", inc.Identity.PID, "pid", id.PID)
	if p.switchAgent(ctx, s, inc, inc.Identity, id, status.Confirm{}) {
		inc.Identity = id
	}
	return inc
}

// switchAgent records id as inc's agent in place of old (c names the
// event, if any) and watches it instead.
func (p *Prober) switchAgent(ctx context.Context, s herd.Session, inc herd.Incarnation, old, id herd.Identity, c status.Confirm) bool {
	inc.Identity = id
	c.Session, c.Inc = s.Name, inc
	applied, err := p.st.Confirmed(ctx, c, func() {
		p.Watch(s.Name, inc, nil)
		p.dropWatch(inc.ID, old.PID)
		p.setProvisional(inc.ID, false)
	})
	p.logged(ctx, s.Name, "follow the agent", err)
	if applied && err == nil {
		p.o.Log.Info("following the agent's new process", "session", s.Name, "old_pid", old.PID, "pid", id.PID, "why", c.Message)
	}
	return applied && err == nil
}

// ReasonRelaunched is the reason of the adopted event recorded when an
// agent's own launcher starts it again.
const ReasonRelaunched = "relaunched"

// exitOf returns how the agent process id ended, when the kernel's exit
// report or the zombie it left told: the agent under a launcher is not the
// daemon's child, and its launcher tells its death in its own words.
func (p *Prober) exitOf(inc string, id herd.Identity) (proc.Exit, bool) {
	if x, ok := p.zombieExit(inc, id); ok {
		return x, true
	}
	if p.o.Exits == nil {
		return proc.Exit{}, false
	}
	return p.o.Exits.Lookup(p.ctx, id.PID, p.startedAt(id), exitWait)
}

// startedAt is when the process id started, in wall time (the zero time
// when the boot time cannot be read: then any report of its pid counts).
func (p *Prober) startedAt(id herd.Identity) time.Time {
	p.bootOnce.Do(func() { p.bootTime, _ = p.o.Proc.BootTime() })
	if p.bootTime.IsZero() {
		return time.Time{}
	}
	// Start times are in clock ticks: a tick's rounding is allowed for.
	return proc.StartedAt(p.bootTime, id.StartTime).Add(-time.Second)
}

// agentExit is the exit to account for incarnation inc whose agent is
// dead: the agent's own when it is not the launched root and its exit is
// known, else fallback (what the pane or the launcher said).
func (p *Prober) agentExit(inc herd.Incarnation, fallback herd.Exit) (herd.Exit, string) {
	if inc.Identity.Zero() || inc.Identity.PID == inc.Root.PID {
		return fallback, ""
	}
	x, ok := p.exitOf(inc.ID, inc.Identity)
	if !ok {
		return fallback, ""
	}
	return exitOf(x), fmt.Sprintf("agent process %d %s (under its launcher, pid %d)", inc.Identity.PID, describeExit(x), inc.Root.PID)
}

// exitOf converts a wait status into the exit herd records.
func exitOf(x proc.Exit) herd.Exit {
	if x.Signal != 0 {
		sig := x.Signal
		return herd.Exit{Signal: &sig, Reason: herd.ReasonSignal}
	}
	code := x.Code
	return herd.Exit{Code: &code, Reason: herd.ReasonExitCode}
}

// describeExit says how a process ended, for the log.
func describeExit(x proc.Exit) string {
	if x.Signal != 0 {
		return fmt.Sprintf("was killed by signal %d", x.Signal)
	}
	return fmt.Sprintf("exited with code %d", x.Code)
}

// zombieExit is the exit read from the zombie that the agent id of
// incarnation inc left when its watcher fired (before its launcher reaped
// it), if it was read.
func (p *Prober) zombieExit(inc string, id herd.Identity) (proc.Exit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.watched[inc]
	if ws == nil {
		return proc.Exit{}, false
	}
	z, ok := ws.zombies[id.PID]
	return z, ok
}

// noteZombie reads how the agent id of incarnation inc ended from the
// zombie it leaves until its parent reaps it; the caller's watcher has
// just seen it exit.
func (p *Prober) noteZombie(inc string, id herd.Identity) {
	x, ok := p.o.Proc.ExitOfZombie(id.PID, id.StartTime)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ws := p.watched[inc]; ws != nil {
		if ws.zombies == nil {
			ws.zombies = map[int]proc.Exit{}
		}
		ws.zombies[id.PID] = x
	}
}

// setProvisional marks (or clears) incarnation inc's agent as a launcher
// taken for it, whose child is looked for at every round.
func (p *Prober) setProvisional(inc string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.provisional[inc] = true
	} else {
		delete(p.provisional, inc)
	}
}

// isProvisional reports whether incarnation inc's agent is a launcher
// taken for it.
func (p *Prober) isProvisional(inc string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.provisional[inc]
}
