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
}

// StoppedGrace is how long a replica holding a task may be stopped before
// the task needs a person: a restart (a relaunch in the task's worktree,
// a daemon killed between the stop and the launch, the reconciler about
// to relaunch the slot) passes through stopped.
const StoppedGrace = time.Minute

// Ready reports whether the replica's agent is up and idle: a prompt
// typed now is read.
func (r Replica) Ready() bool {
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
)

var doNames = [...]string{"wait", "relaunch", "deliver", "adopt", "check", "needs_you", "resume", "fail"}

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
	switch r.State {
	case herd.StateFailed, herd.StateSucceeded, herd.StateStopped:
		if t.State == herd.TaskNeedsYou || (r.State == herd.StateStopped && o.Now.Sub(r.Since) < StoppedGrace) {
			return Step{Do: Wait}
		}
		return Step{Do: NeedsYou, Reason: ReasonAgentStuck}
	case herd.StateStalled:
		if t.State == herd.TaskNeedsYou {
			return Step{Do: Wait}
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
			if t.State == herd.TaskNeedsYou {
				return Step{Do: Resume}
			}
		}
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
