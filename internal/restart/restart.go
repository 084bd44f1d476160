// Package restart decides what happens to a session after its incarnation dies.
//
// It is the pure half of herd's single crash-accounting function: every path
// that notices a death (process exit, pane gone, process gone, stall kill)
// ends up in Decide, so no path can skip the backoff.
package restart

import (
	"time"

	"herd"
)

// Decision is what to do with a slot whose incarnation ended.
type Decision string

// Decisions.
const (
	// Relaunch after Delay (backoff).
	Relaunch Decision = "relaunch"
	// Fail: the restart budget is spent or the policy forbids a restart.
	Fail Decision = "fail"
	// Succeed: the agent exited 0 and the policy does not restart it.
	Succeed Decision = "succeed"
)

// User-facing reasons attached to a decision.
const (
	ReasonBudgetSpent   = "restart budget spent"
	ReasonPolicyNever   = "policy never restarts"
	ReasonExitedCleanly = "exited cleanly"
	ReasonBackoff       = "crash-loop backoff"
)

// Ending describes one incarnation's end.
type Ending struct {
	// Success is true when the agent exited with code 0 by itself.
	Success bool
	// RanFor is how long the incarnation ran.
	RanFor time.Duration
}

// Tracker is a slot's persisted crash bookkeeping.
type Tracker struct {
	// Restarts is the number of relaunches after crashes in the current streak.
	Restarts int
}

// Outcome is the result of Decide.
type Outcome struct {
	Decision Decision
	// Delay before the relaunch (Relaunch only).
	Delay time.Duration
	// Restarts is the new value of the slot's restart count.
	Restarts int
	// Reason explains the decision to a person.
	Reason string
}

// Decide applies policy p to a slot with crash bookkeeping t whose incarnation
// ended as e.
//
// A run of at least p.ResetAfter resets the streak first. With max_restarts N,
// N relaunches are allowed; the crash after the last one fails the slot (N+1
// launches in all); N = 0 means unlimited. The k-th relaunch of a streak waits
// InitialBackoff·2^(k-1), capped at MaxBackoff.
func Decide(p herd.RestartPolicy, t Tracker, e Ending) Outcome {
	restarts := t.Restarts
	if p.ResetAfter > 0 && e.RanFor >= p.ResetAfter {
		restarts = 0
	}
	switch {
	case p.Policy == herd.PolicyNever && e.Success:
		return Outcome{Decision: Succeed, Restarts: restarts, Reason: ReasonExitedCleanly}
	case p.Policy == herd.PolicyNever:
		return Outcome{Decision: Fail, Restarts: restarts, Reason: ReasonPolicyNever}
	case p.Policy == herd.PolicyOnFailure && e.Success:
		return Outcome{Decision: Succeed, Restarts: restarts, Reason: ReasonExitedCleanly}
	}
	if p.MaxRestarts > 0 && restarts >= p.MaxRestarts {
		return Outcome{Decision: Fail, Restarts: restarts, Reason: ReasonBudgetSpent}
	}
	restarts++
	return Outcome{Decision: Relaunch, Delay: Backoff(p, restarts), Restarts: restarts, Reason: ReasonBackoff}
}

// Backoff is the delay before the n-th relaunch of a streak (n >= 1).
func Backoff(p herd.RestartPolicy, n int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < n; i++ {
		if d >= p.MaxBackoff || d > p.MaxBackoff/2 {
			return p.MaxBackoff
		}
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		return p.MaxBackoff
	}
	return d
}
