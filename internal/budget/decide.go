// Package budget holds each role to its daily_budget_usd: when a role's
// spend today (the usage ledger's, through Spending) reaches it, a person
// is told, the role launches nothing more until the next local midnight,
// and each of its running sessions is stopped (reason budget, resumable)
// at its next idle moment — at once with budget_hard. The daemon runs one
// Budgets; slots asks it before a launch (a slots.Gate). It stops sessions
// only through the one stop path and writes nothing itself.
package budget

import (
	"time"

	"herd"
)

// Spending is what the usage ledger tells of a role's spend.
type Spending interface {
	// RoleCostSince returns what role's sessions cost, in US dollars,
	// since since.
	RoleCostSince(role string, since time.Time) float64
}

// Action is what a budget asks of one session.
type Action string

// Actions.
const (
	// None: the budget leaves the session alone.
	None Action = "none"
	// Wait: the budget is spent but the session is in a turn; it is
	// stopped at its next idle moment.
	Wait Action = "wait"
	// Stop: stop the session now.
	Stop Action = "stop"
)

// Over reports whether spent reaches a budget (0: none).
func Over(spent, budget float64) bool { return budget > 0 && spent >= budget }

// Decide returns what a role's budget asks of a session at activity act
// (of a live session): nothing while the budget holds; once spent, a stop
// now when hard, or when the session is between turns (idle, or its turn
// ended on an error: blocked); else a wait. A turn is never cut off, and
// an activity not known is not taken for idle.
func Decide(spent, budget float64, hard bool, act herd.Activity) Action {
	if !Over(spent, budget) {
		return None
	}
	if hard {
		return Stop
	}
	switch act {
	case herd.ActivityIdle, herd.ActivityBlocked:
		return Stop
	}
	return Wait
}

// Between reports whether a session at act may be stopped by a budget
// that is not hard: between turns.
func Between(act herd.Activity) bool { return Decide(1, 1, false, act) == Stop }

// DayStart is the start of now's day, local midnight in now's location:
// what "today" counts from.
func DayStart(now time.Time) time.Time {
	y, m, d := now.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, now.Location())
}

// NextDay is the next local midnight after now: when a spent budget is
// new again.
func NextDay(now time.Time) time.Time {
	y, m, d := now.Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, now.Location())
}
