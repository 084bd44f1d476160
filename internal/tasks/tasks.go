// Package tasks is the task component: the one writer of tasks. It
// queues work for roles, gives each queued task to a free replica of its
// role, relaunches that replica in the task's worktree and types the
// prompt into its agent, notices when the agent's turn ended, runs the
// check, sends a failed check back to the agent, and lands an approved
// task on its base. What happens next to a task is decided by taskflow;
// this package observes and carries it out.
//
// A task is never lost and never run twice: the task table is in the
// store, one task per replica is held by the store (an index, checked in
// the assigning transaction), and every step is written after its effect
// and re-done when a daemon died between the two (a prompt may then reach
// the same agent twice, never two agents).
package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/config"
	"herd/internal/errs"
	"herd/internal/loop"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/taskflow"
	"herd/internal/verbs"
	"herd/internal/worktree"
)

// safetyTick bounds how long a task waits when no change woke the loop
// (a change missed is seen then).
const safetyTick = 30 * time.Second

// Relauncher gives a session a fresh incarnation (slots.Slots).
type Relauncher interface {
	Restart(ctx context.Context, req slots.RestartRequest) (string, error)
}

// Injector types text into a session's agent (verbs.Verbs).
type Injector interface {
	Inject(ctx context.Context, req verbs.InjectRequest) (verbs.Result, error)
}

// Options wire the component.
type Options struct {
	Status    *status.Manager
	Slots     Relauncher
	Inject    Injector
	Worktrees *worktree.Manager
	// Contain runs checks inside a cgroup of their own where the host
	// allows; nil runs them in their own process group only.
	Contain *cgroup.Containment
	// Dir keeps the checks' output (<state-dir>/tasks).
	Dir string
	// Reactions says what each reaction does ([reactions], as reloaded);
	// nil is config.Default's.
	Reactions func() config.Reactions
	// Notify tells a person that a task needs them (attention's
	// Announce: the [notify] channels); nil tells no one. It may block
	// until delivered: it runs beside the component.
	Notify func(ctx context.Context, t herd.Task, reason, msg string)
	// Reconcile wakes the reconciler (slots.Slots.Kick): the queue's
	// demand changed.
	Reconcile func()
	Log       *slog.Logger
}

// Manager is the task component.
type Manager struct {
	o    Options
	st   store.Store
	host string
	log  *slog.Logger
	kick chan struct{}

	mu sync.Mutex
	// busy are the tasks whose check or landing runs now, and the
	// replicas ("session NAME") relaunched after their task landed.
	busy map[string]bool
	// want is the replicas the queue asks of each task role with
	// max_replicas, held until wantUntil (scale_down_after) once the
	// queue asks for fewer; keep the replicas that hold a task.
	want      map[string]int
	wantUntil map[string]time.Time
	keep      map[string]bool
	known     bool // a round has read the queue
	// ctx is Run's: the checks, landings and notifications beside the
	// loop end with it (a daemon stopping does not wait for them; the
	// next one runs them again).
	ctx context.Context
	// landing is the landing turn of each repository (lockRepo).
	landing map[string]chan struct{}
	// taskRoles are the task roles of the last round (a deleted one's
	// tasks end).
	taskRoles map[string]bool
	// failures counts the deliveries that failed in a row, per task.
	failures map[string]int
	// escalateAt is when the earliest reaction typed into an agent goes
	// to a person unanswered (zero: none waits): a round then.
	escalateAt time.Time
	group      loop.Group
}

// New returns the component; Run starts it.
func New(o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Reactions == nil {
		def := config.Default().Reactions
		o.Reactions = func() config.Reactions { return def }
	}
	return &Manager{o: o, st: o.Status.Store(), host: o.Status.Host(), log: o.Log, kick: make(chan struct{}, 1),
		busy: map[string]bool{}, failures: map[string]int{}, group: loop.Group{Log: o.Log},
		want: map[string]int{}, wantUntil: map[string]time.Time{}, keep: map[string]bool{}}
}

// Kick runs a round soon.
func (m *Manager) Kick() { loop.Wake(m.kick) }

// Run moves the tasks along until ctx is done: a round on every change
// of a session, every task written, and at least every safetyTick.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	changes, cancel := m.o.Status.Subscribe()
	defer cancel()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-changes:
				if !ok {
					return
				}
				m.Kick()
			}
		}
	}()
	loop.Loop{Name: "tasks", Log: m.log, Every: safetyTick, Trigger: m.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		if err := m.round(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("tasks: round", "err", err)
			return 2 * time.Second
		}
		return m.nextWake(time.Now())
	})
	m.group.Wait()
}

// round assigns what is queued and moves every task held one step.
func (m *Manager) round(ctx context.Context) error {
	m.mu.Lock()
	m.escalateAt = time.Time{} // found again below, if any task still waits
	m.mu.Unlock()
	if _, away := m.o.Status.StoreAway(); away {
		// Tasks live in the shared store only: they wait for it (the
		// agents go on; their turn ends are in the event log after).
		return nil
	}
	w, err := m.read(ctx)
	if err != nil {
		return err
	}
	for _, t := range w.gone {
		if err := m.fail(ctx, t, "role_deleted", fmt.Sprintf("task %s: its role %s was deleted; its branch %s is kept", t.ID, t.Role, t.Branch)); err != nil && !errors.Is(err, errStale) {
			m.log.Warn("tasks: end a task of a deleted role", "task", t.ID, "err", err)
		}
	}
	m.scale(w, time.Now())
	if len(w.tasks) == 0 {
		return nil
	}
	m.assign(ctx, w)
	var held []herd.Task
	var escalate time.Time // the earliest reaction that may go unanswered
	for _, t := range w.tasks {
		if t.State.Holds() && !m.isBusy(t.ID) {
			held = append(held, t)
		}
		if at := taskflow.EscalateAt(t, m.o.Reactions().Of(t.Reacted).EscalateAfter); !at.IsZero() && (escalate.IsZero() || at.Before(escalate)) {
			escalate = at
		}
	}
	m.mu.Lock()
	m.escalateAt = escalate
	m.mu.Unlock()
	// Each task's step touches its task and its replica only: side by
	// side, so that one slow relaunch or typing holds no other task up.
	loop.Each(stepsAtOnce, held, func(t herd.Task) {
		if err := m.step(ctx, w, t); err != nil && ctx.Err() == nil && !errors.Is(err, errStale) {
			m.log.Warn("tasks: step", "task", t.ID, "session", t.Session, "state", t.State, "err", err)
		}
	})
	return nil
}

// stepsAtOnce bounds the task steps a round runs side by side.
const stepsAtOnce = 8

func (m *Manager) isBusy(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.busy[id]
}

// replica is what taskflow sees of session name.
func (w world) replica(name string) *taskflow.Replica {
	s, ok := w.sessions[name]
	if !ok {
		return nil
	}
	return &taskflow.Replica{Name: s.Name, State: s.State, Activity: s.Activity, Incarnation: s.Incarnation,
		Conversation: w.incs[name].AgentSessionID, Since: s.StateSince, Exec: w.roles[s.Role].Runtime == herd.RuntimeExec}
}

// assign gives queued tasks to free replicas, each in a transaction that
// finds the task still queued and the replica holding none.
func (m *Manager) assign(ctx context.Context, w world) {
	var queued []herd.Task
	held := map[string]bool{}
	for _, t := range w.tasks {
		if t.State == herd.TaskQueued {
			queued = append(queued, t)
		} else if t.State.Holds() {
			held[t.Session] = true
		}
	}
	if len(queued) == 0 {
		return
	}
	var cands []taskflow.Candidate
	names := make([]string, 0, len(w.sessions))
	for name := range w.sessions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := w.sessions[name]
		// A replica being relaunched after its last task is not free yet.
		busy := m.isBusy("session " + name)
		cands = append(cands, taskflow.Candidate{Replica: *w.replica(name), Role: s.Role, Holds: held[name] || busy})
	}
	for _, p := range taskflow.Assign(queued, cands) {
		// Kept from a scale-down from now on (the demand's next round
		// counts it too).
		m.mu.Lock()
		m.keep[p.Session] = true
		m.mu.Unlock()
		err := m.write(ctx, p.Task, []herd.TaskState{herd.TaskQueued}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Session, t.Reason = herd.TaskAssigned, p.Session, ""
			t.Branch, t.Incarnation, t.Conversation = herd.TaskBranch(t.ID), "", ""
			return []*herd.Event{m.event(*t, herd.EventTaskAssigned, "", fmt.Sprintf("task %s assigned to %s", t.ID, p.Session), nil)}, nil
		})
		if err != nil && errs.KindOf(err) != errs.Conflict && !errors.Is(err, errStale) {
			m.log.Warn("tasks: assign", "task", p.Task, "session", p.Session, "err", err)
		}
	}
	m.Kick() // the assigned go on at the next round
}

// step carries out a held task's next step.
func (m *Manager) step(ctx context.Context, w world, t herd.Task) error {
	if t.State == herd.TaskChecking {
		m.startCheck(t, w.roles[t.Role])
		return nil
	}
	if t.State == herd.TaskReview {
		if t.ApprovedBy != "" {
			m.startLanding(t, w.roles[t.Role])
		}
		return nil
	}
	obs := taskflow.Observed{Replica: w.replica(t.Session), Now: time.Now()}
	if r := obs.Replica; r != nil && r.Incarnation == t.Incarnation && t.State != herd.TaskAssigned {
		// An exec agent's turn ended when it exited 0; a tmux agent's
		// when it went idle after the delivery.
		ended := r.Exec && r.State == herd.StateSucceeded
		if !r.Exec {
			var err error
			if ended, err = m.turnEnded(ctx, t, r.Incarnation); err != nil {
				return err
			}
		}
		r.TurnEnded = ended
		if ended {
			n, err := m.o.Worktrees.Commits(ctx, t.Repo, t.Base, t.Branch)
			if errors.Is(err, worktree.ErrNoBranch) || errors.Is(err, worktree.ErrNotRepo) {
				n, err = -1, nil // deleted by hand: the task fails with its reason
			}
			if err != nil {
				return err
			}
			obs.Commits = n
		}
	}
	st := taskflow.Next(t, obs)
	if st.Do == taskflow.Wait && t.Reacted != "" {
		rx := m.o.Reactions().Of(t.Reacted)
		st = taskflow.Escalate(t, obs.Replica, rx.EscalateAfter, rx.Retries, obs.Now)
	}
	if st.Do == taskflow.NeedsYou && st.Reason == taskflow.ReasonAgentStuck {
		stuck := m.o.Reactions().AgentStuck
		st = taskflow.Stuck(t, obs.Replica, stuck.Action == config.ReactionSend, stuck.Retries)
	}
	switch st.Do {
	case taskflow.Relaunch:
		return m.relaunch(ctx, w.roles[t.Role], t)
	case taskflow.Deliver:
		return m.deliver(ctx, t, w, "")
	case taskflow.Adopt:
		inc := obs.Replica.Incarnation
		return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.Incarnation = inc
			return nil, nil
		})
	case taskflow.Check:
		if w.roles[t.Role].Placed() {
			m.publish(ctx, t)
		}
		return m.toChecking(ctx, t, obs.Commits)
	case taskflow.NeedsYou:
		return m.needsYou(ctx, t, st.Reason, needsYouMessage(st.Reason, t, obs.Replica))
	case taskflow.Nudge:
		return m.nudge(ctx, t)
	case taskflow.Clear:
		return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.Reacted, t.ReactedAt = "", nil
			return nil, nil
		})
	case taskflow.Resume:
		return m.write(ctx, t.ID, []herd.TaskState{herd.TaskNeedsYou}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reason = herd.TaskWorking, ""
			return []*herd.Event{m.event(*t, herd.EventTaskDelivered, "resumed", "the agent works on the task again", nil)}, nil
		})
	case taskflow.Fail:
		return m.fail(ctx, t, st.Reason, failMessage(st.Reason, t))
	}
	return nil
}

// turnEnded reports whether an idle activity event of inc follows the
// task's delivery cursor.
func (m *Manager) turnEnded(ctx context.Context, t herd.Task, inc string) (bool, error) {
	var evs []herd.Event
	err := m.st.View(ctx, func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: t.Session, Kind: herd.EventActivity, AfterID: t.DeliveredAfter})
		return err
	})
	if err != nil {
		return false, err
	}
	for _, ev := range evs {
		if to, _ := ev.Data["to"].(string); ev.Incarnation == inc && to == string(herd.ActivityIdle) {
			return true, nil
		}
	}
	return false, nil
}

func (m *Manager) toChecking(ctx context.Context, t herd.Task, commits int) error {
	return m.write(ctx, t.ID, []herd.TaskState{t.State}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		t.State, t.Reason, t.Commits = herd.TaskChecking, "", commits
		return nil, nil
	})
}

// publish pushes a placed role's task branch to its repository's remote
// at a turn's end, so that another host can go on with it if this one is
// lost. A failure is logged: the work is in the branch here still.
func (m *Manager) publish(ctx context.Context, t herd.Task) {
	if ok, err := m.o.Worktrees.Publish(ctx, t.Repo, t.Branch); err != nil {
		m.log.Warn("tasks: publish the branch for the fleet", "task", t.ID, "branch", t.Branch, "err", err)
	} else if ok {
		m.log.Debug("tasks: branch published", "task", t.ID, "branch", t.Branch, "remote", worktree.Remote)
	}
}
