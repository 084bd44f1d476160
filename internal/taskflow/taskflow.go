// Package taskflow decides what happens next to a task: pure functions
// of the task and what is observed of its replica, tested by tables. The
// tasks component (internal/tasks) observes and carries the decisions
// out.
package taskflow

import (
	"fmt"
	"time"

	"herd"
	"herd/internal/errs"
)

// Replica is what is observed of the session holding a task (or of one
// that could take one).
type Replica struct {
	Name     string
	State    herd.State
	Activity herd.Activity
	// Incarnation is the session's current incarnation; Conversation
	// its agent's conversation id ("" when unknown).
	Incarnation  string
	Conversation string
	// TurnEnded: an idle activity event of Incarnation follows the
	// task's DeliveredAfter cursor.
	TurnEnded bool
	// Since is when the replica entered State.
	Since time.Time
	// Exec: a replica of an exec role. Its agent runs one turn per
	// launch, given the turn's text as its last argument, and the turn
	// ends when it exits 0 (succeeded); with no task it runs nothing
	// (parked, succeeded).
	Exec bool
}

// StoppedGrace is how long a replica holding a task may be stopped before
// the task needs a person: a restart (a relaunch in the task's worktree,
// a daemon killed between the stop and the launch, the reconciler about
// to relaunch the slot) passes through stopped.
const StoppedGrace = time.Minute

// Ready reports whether the replica can take its task's prompt now: a
// tmux agent up and idle (a prompt typed now is read); an exec replica
// that runs nothing (a launch now is given it).
func (r Replica) Ready() bool {
	if r.Exec {
		return r.State == herd.StateSucceeded
	}
	return r.State == herd.StateRunning && r.Activity == herd.ActivityIdle
}

// Observed is what the tasks component saw of a task's world.
type Observed struct {
	// Replica is the session holding the task; nil when it no longer
	// exists.
	Replica *Replica
	// Commits the task's branch has past its base; -1 when unknown (the
	// branch or the base is gone).
	Commits int
	// Now is when it was observed.
	Now time.Time
}

// Do is what to do next with a task.
type Do int

// What a task's next step can be.
const (
	// Wait: nothing to do until something changes.
	Wait Do = iota
	// Relaunch the replica into the task's worktree with a fresh
	// conversation (the task was just assigned; Task.Incarnation is
	// then set to the new incarnation).
	Relaunch
	// Deliver the prompt to the replica's agent: working.
	Deliver
	// Adopt the replica's new incarnation: it resumed the conversation
	// the prompt went to (a crash relaunch), nothing is sent again.
	Adopt
	// Check: the agent's turn ended with commits: run the check.
	Check
	// NeedsYou: the agent stopped and a person is needed (Step.Reason).
	NeedsYou
	// Resume: the agent works again after it needed a person.
	Resume
	// Fail the task (Step.Reason).
	Fail
	// Nudge the stalled agent (the agent_stuck reaction's send).
	Nudge
	// Clear the reaction the task waits on: the agent answered it.
	Clear
)

var doNames = [...]string{"wait", "relaunch", "deliver", "adopt", "check", "needs_you", "resume", "fail", "nudge", "clear"}

func (d Do) String() string {
	if int(d) < len(doNames) {
		return doNames[d]
	}
	return fmt.Sprintf("do(%d)", int(d))
}

// Step is a decision and its reason.
type Step struct {
	Do     Do
	Reason string
}

// Reasons of NeedsYou and Fail.
const (
	ReasonNoCommit      = "no_commit"      // the turn ended without a commit past the base
	ReasonWaiting       = "waiting"        // the agent waits on a dialog
	ReasonAgentStuck    = "agent_stuck"    // its replica stalled, failed or is blocked
	ReasonReplicaGone   = "replica_gone"   // its replica no longer exists
	ReasonBranchGone    = "branch_gone"    // its branch or base no longer exists
	ReasonCheckFailed   = "check_failed"   // the check failed past its retries
	ReasonWorktreeError = "worktree_error" // its worktree could not be made
	ReasonEscalated     = "escalated"      // what a reaction typed into the agent went unanswered past its escalate_after
)

// Next decides a task's next step from what was observed. Only the
// states the agent drives are decided here: queued tasks are assigned
// by Assign; checking, review and landing are driven by the check's
// result and by people.
func Next(t herd.Task, o Observed) Step {
	if !t.State.Holds() || t.State == herd.TaskChecking || t.State == herd.TaskReview {
		return Step{Do: Wait}
	}
	r := o.Replica
	if r == nil {
		if t.State == herd.TaskNeedsYou {
			return Step{Do: Wait}
		}
		return Step{Do: NeedsYou, Reason: ReasonReplicaGone}
	}
	if r.Exec {
		return nextExec(t, r, o)
	}
	switch r.State {
	case herd.StateFailed, herd.StateSucceeded, herd.StateStopped:
		if t.State == herd.TaskNeedsYou || (r.State == herd.StateStopped && o.Now.Sub(r.Since) < StoppedGrace) {
			return Step{Do: Wait}
		}
		return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
	case herd.StateStalled:
		if t.State == herd.TaskNeedsYou || t.Reacted == herd.ReactionAgentStuck {
			return Step{Do: Wait} // before a person, or nudged: Escalate decides
		}
		return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
	}
	switch t.State {
	case herd.TaskAssigned:
		// Incarnation is the one the replica was relaunched as, into the
		// task's worktree; "" until then. A crash before the delivery
		// relaunches it there again: deliver to whichever runs.
		switch {
		case !r.Ready():
			return Step{Do: Wait}
		case t.Incarnation == "":
			return Step{Do: Relaunch}
		}
		return Step{Do: Deliver}
	case herd.TaskWorking, herd.TaskChanges, herd.TaskNeedsYou:
		if r.Incarnation != t.Incarnation {
			// Relaunched while it held the task (a crash): wait for
			// its agent, then go on in the conversation it resumed or
			// send the work again.
			if !r.Ready() {
				return Step{Do: Wait}
			}
			if t.Conversation != "" && r.Conversation == t.Conversation {
				return Step{Do: Adopt}
			}
			return Step{Do: Deliver}
		}
		if r.TurnEnded {
			switch {
			case o.Commits < 0:
				return Step{Do: Fail, Reason: ReasonBranchGone}
			case o.Commits > 0:
				return Step{Do: Check}
			case t.State != herd.TaskNeedsYou:
				return Step{Do: NeedsYou, Reason: ReasonNoCommit}
			}
			return Step{Do: Wait}
		}
		switch r.Activity {
		case herd.ActivityWaiting:
			if t.State != herd.TaskNeedsYou {
				return Step{Do: NeedsYou, Reason: ReasonWaiting}
			}
		case herd.ActivityBlocked:
			if t.State != herd.TaskNeedsYou {
				return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
			}
		case herd.ActivityWorking:
			// An escalation stays before a person while the agent works
			// on: it was told because the agent took too long.
			if t.State == herd.TaskNeedsYou && t.Reason != ReasonEscalated {
				return Step{Do: Resume}
			}
		}
	}
	return Step{Do: Wait}
}

// Stuck says what a stuck replica's task does (Next said NeedsYou,
// ReasonAgentStuck): a stalled agent (alive and silent; a failed or
// stopped one cannot read, a rate-limited one waits for its reset, an
// exec one reads nothing but its launch's argument) of a
// task it works on is nudged while fewer than retries nudges went to it
// and the agent_stuck reaction sends; else a person is needed.
func Stuck(t herd.Task, r *Replica, send bool, retries int) Step {
	if send && r != nil && !r.Exec && r.State == herd.StateStalled && t.Nudges < retries &&
		(t.State == herd.TaskWorking || t.State == herd.TaskChanges) {
		return Step{Do: Nudge}
	}
	return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
}

// EscalateAt is when the reaction typed into t's agent goes to a person
// if the agent has not answered it: after (its escalate_after) past
// ReactedAt; the zero time when nothing waits or after is 0 (never).
func EscalateAt(t herd.Task, after time.Duration) time.Time {
	if t.Reacted == "" || t.ReactedAt == nil || after <= 0 || (t.State != herd.TaskWorking && t.State != herd.TaskChanges) {
		return time.Time{}
	}
	return t.ReactedAt.Add(after)
}

// Escalate decides, at now, what becomes of the reaction typed into t's
// agent (t.Reacted) that Next left waiting: r is its replica, after and
// retries the reaction's escalate_after and retries. A nudge is answered
// once the agent is no longer stalled (Clear); past after, a stalled
// agent is nudged again while retries allow, and anything else unanswered
// needs a person (ReasonEscalated). An answer is a turn that ended: Next
// sees it and the task leaves working, which clears Reacted.
func Escalate(t herd.Task, r *Replica, after time.Duration, retries int, now time.Time) Step {
	at := EscalateAt(t, after)
	stuck := t.Reacted == herd.ReactionAgentStuck
	switch {
	case t.Reacted == "" || (t.State != herd.TaskWorking && t.State != herd.TaskChanges):
		return Step{Do: Wait}
	case stuck && (r == nil || r.State != herd.StateStalled):
		return Step{Do: Clear}
	case at.IsZero() || now.Before(at):
		return Step{Do: Wait}
	case stuck && t.Nudges < retries:
		return Step{Do: Nudge}
	case stuck:
		return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
	}
	return Step{Do: NeedsYou, Reason: ReasonEscalated}
}

// nextExec is Next for a task held by an exec replica: assigned, it is
// launched with the prompt once it runs nothing (the launch is the
// delivery); each launch is given the turn's text, so a crash relaunch
// (a new incarnation) goes on with it (Adopt); the turn ends when the
// agent exits 0, with commits or without.
func nextExec(t herd.Task, r *Replica, o Observed) Step {
	switch {
	case t.State == herd.TaskAssigned:
		if r.Ready() {
			return Step{Do: Relaunch}
		}
	case t.State == herd.TaskNeedsYou:
		// Its agent runs no turn of its own: a person's comment (a
		// launch) or retry moves it on; the turn that put it here (its
		// exit, its commits) does not count again.
	case r.Incarnation != t.Incarnation:
		return Step{Do: Adopt}
	case r.State == herd.StateSucceeded:
		switch {
		case o.Commits < 0:
			return Step{Do: Fail, Reason: ReasonBranchGone}
		case o.Commits > 0:
			return Step{Do: Check}
		}
		return Step{Do: NeedsYou, Reason: ReasonNoCommit}
	case r.State == herd.StateFailed, r.State == herd.StateStalled,
		r.State == herd.StateStopped && o.Now.Sub(r.Since) >= StoppedGrace:
		return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
	case r.State == herd.StateRunning && r.Activity == herd.ActivityWaiting:
		return Step{Do: NeedsYou, Reason: ReasonWaiting}
	}
	return Step{Do: Wait}
}

// Verbs a person (or an agent through MCP) applies to a task.
const (
	VerbCancel  = "cancel"
	VerbRetry   = "retry"
	VerbApprove = "approve"
	VerbComment = "comment"
	VerbDone    = "done"    // the task's agent says it finished (MCP task_done)
	VerbBlocked = "blocked" // the task's agent asks a question (MCP task_blocked)
)

// Allowed says whether verb applies to a task in state s, and why not.
func Allowed(verb string, s herd.TaskState) error {
	ok := false
	switch verb {
	case VerbCancel:
		ok = !s.Ended()
	case VerbRetry:
		ok = s == herd.TaskFailed || s == herd.TaskCancelled || s == herd.TaskNeedsYou
	case VerbApprove:
		ok = s == herd.TaskReview
	case VerbComment:
		ok = s == herd.TaskReview || s == herd.TaskNeedsYou || s == herd.TaskWorking || s == herd.TaskChanges
	case VerbDone, VerbBlocked:
		ok = s == herd.TaskWorking || s == herd.TaskChanges || s == herd.TaskNeedsYou
	default:
		return errs.Badf("%q is not a task verb", verb)
	}
	if !ok {
		return errs.New(errs.Conflict, fmt.Sprintf("cannot %s a task that is %s", verb, s))
	}
	return nil
}

// AfterCheck is the step after a check: passed → review; failed → the
// check_failed reaction sends the failure to the agent while attempts
// (those already sent) are fewer than retries, else a person is needed.
func AfterCheck(passed bool, attempts, retries int) (herd.TaskState, bool) {
	switch {
	case passed:
		return herd.TaskReview, false
	case attempts < retries:
		return herd.TaskWorking, true
	}
	return herd.TaskNeedsYou, false
}

// Candidate is a replica that may take a task.
type Candidate struct {
	Replica
	Role string
	// Holds: the replica holds a task already.
	Holds bool
}

// Pair is a queued task given to a replica.
type Pair struct {
	Task    string
	Session string
}

// Assign gives the queued tasks, oldest first, to the free replicas of
// their role: running, idle and holding no task, each at most once, in
// name order. queued must be oldest first.
func Assign(queued []herd.Task, replicas []Candidate) []Pair {
	taken := map[string]bool{}
	var out []Pair
	for _, t := range queued {
		if t.State != herd.TaskQueued {
			continue
		}
		for _, r := range replicas {
			if r.Role != t.Role || r.Holds || taken[r.Name] || !r.Ready() {
				continue
			}
			taken[r.Name] = true
			out = append(out, Pair{Task: t.ID, Session: r.Name})
			break
		}
	}
	return out
}
