// Package waitfor is herd wait: until the sessions a request names reach a
// state or an activity, or a timeout. The judgement (Goal, Evaluate) is
// pure; Wait looks again whenever its Changes says something may have
// changed. The API serves it; it never writes anything.
package waitfor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/targets"
)

// Goal is what a wait waits for: a state, or an activity of a live
// session. Exactly one is set.
type Goal struct {
	State    herd.State
	Activity herd.Activity
}

var (
	states     = []herd.State{herd.StatePending, herd.StateRunning, herd.StateStalled, herd.StateUnknown, herd.StateBackoff, herd.StateCrashed, herd.StateFailed, herd.StateSucceeded, herd.StateStopped}
	activities = []herd.Activity{herd.ActivityWorking, herd.ActivityWaiting, herd.ActivityIdle, herd.ActivityBlocked, herd.ActivityUnknown}
)

// ParseGoal reads --for: a state, an activity, or state=X / activity=X
// (plain "unknown" is the state).
func ParseGoal(s string) (Goal, error) {
	kind, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		kind, v = "", kind
	}
	if (kind == "" || kind == "state") && slices.Contains(states, herd.State(v)) {
		return Goal{State: herd.State(v)}, nil
	}
	if (kind == "" || kind == "activity") && slices.Contains(activities, herd.Activity(v)) {
		return Goal{Activity: herd.Activity(v)}, nil
	}
	all := make([]string, 0, len(states)+len(activities))
	for _, st := range states {
		all = append(all, string(st))
	}
	for _, a := range activities {
		if a != herd.ActivityUnknown {
			all = append(all, string(a))
		}
	}
	return Goal{}, fmt.Errorf("--for %q: want a state or an activity: %s (activity=unknown for the activity)", s, strings.Join(all, ", "))
}

// String is the goal as --for spells it.
func (g Goal) String() string {
	if g.State != "" {
		return string(g.State)
	}
	if g.Activity == herd.ActivityUnknown {
		return "activity=unknown"
	}
	return string(g.Activity)
}

// Reached reports whether v is at the goal. An activity counts only on a
// live session: a stopped agent's last activity is history.
func (g Goal) Reached(v api.SessionView) bool {
	if g.State != "" {
		return v.State == g.State
	}
	return v.State.Live() && v.Activity == g.Activity
}

// keep is which sessions of a role or selector a wait watches: those
// holding a replica, and any already at the goal (a wait for stopped
// watches stopped ones too).
func (g Goal) keep(v api.SessionView) bool {
	return v.State.CountsTowardReplicas() || g.Reached(v)
}

// Evaluate judges views against the goal for the named sessions: each
// target's state and whether it is there, and the names lagging. from
// holds the targets as first seen (updated with any new ones); a named
// session absent from views is gone, and lagging.
func Evaluate(views []api.SessionView, names []string, g Goal, from map[string]api.WaitTarget) (out []api.WaitTarget, lagging []string) {
	byName := make(map[string]api.SessionView, len(views))
	for _, v := range views {
		byName[v.Name] = v
	}
	for _, n := range names {
		t := api.WaitTarget{Session: n}
		if v, ok := byName[n]; ok {
			t.State, t.Activity, t.Reached = string(v.State), string(v.Activity), g.Reached(v)
		} else {
			t.Gone = true
		}
		first, seen := from[n]
		if !seen {
			first = t
			if from != nil {
				from[n] = t
			}
		}
		t.FromState, t.FromActivity = first.State, first.Activity
		if !t.Reached {
			lagging = append(lagging, n)
		}
		out = append(out, t)
	}
	return out, lagging
}

// Source reads the sessions a wait judges.
type Source interface {
	Sessions(ctx context.Context) ([]api.SessionView, error)
}

// SourceFunc is a Source in a function.
type SourceFunc func(ctx context.Context) ([]api.SessionView, error)

// Sessions calls f.
func (f SourceFunc) Sessions(ctx context.Context) ([]api.SessionView, error) { return f(ctx) }

// Changes tells a wait when to look again.
type Changes interface {
	// Next returns when the sessions may have changed, or ctx ends.
	Next(ctx context.Context) error
}

// Notified is Changes from a subscription (the status writer's): look
// again at each notification, at each Hint, or after Backstop without
// either — for what neither carries.
type Notified[T any] struct {
	C <-chan T
	// Hint, when set, returns a channel closed at the next broadcast that
	// something may have changed elsewhere (the store's notification that
	// another host committed events). It is asked again after each look.
	Hint     func() <-chan struct{}
	Backstop time.Duration

	hint <-chan struct{} // the current Hint's channel
}

// Next returns at the next notification (the ones already queued are
// taken with it: one look serves them all), at the hint, or after
// Backstop.
func (n *Notified[T]) Next(ctx context.Context) error {
	if n.Hint != nil && n.hint == nil {
		n.hint = n.Hint()
	}
	// Asked again before the caller looks, whatever ends this wait: a
	// broadcast during that look ends the next wait at once.
	defer func() {
		if n.Hint != nil {
			n.hint = n.Hint()
		}
	}()
	t := time.NewTimer(n.Backstop)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-n.hint:
		return nil
	case _, ok := <-n.C:
		if !ok {
			n.C = nil // the subscription ended: the backstop alone from now on
			return nil
		}
		for {
			select {
			case _, ok := <-n.C:
				if !ok {
					n.C = nil
					return nil
				}
			default:
				return nil
			}
		}
	}
}

// Poll is Changes on a clock: look again every d.
type Poll time.Duration

// Next waits d.
func (p Poll) Next(ctx context.Context) error {
	t := time.NewTimer(time.Duration(p))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DefaultPoll is how often a polling wait looks: half the wake-up goal.
const DefaultPoll = 50 * time.Millisecond

// MaxTimeout bounds one wait.
const MaxTimeout = 24 * time.Hour

// ErrMissing is wrapped by the error of a wait naming a session that does
// not exist.
var ErrMissing = errors.New("not found")

// Wait judges src against the goal until every target reached it or
// timeout passes; a timeout is a result (Reached false, the laggards
// named), not an error. Targets are resolved again at each look (a role
// scaled meanwhile); named sessions missing at the start are an error.
func Wait(ctx context.Context, src Source, changes Changes, t api.Targets, g Goal, timeout time.Duration) (api.WaitResult, error) {
	if _, err := targets.Check(t); err != nil {
		return api.WaitResult{}, err
	}
	start := time.Now()
	deadline := start.Add(timeout)
	res := api.WaitResult{For: g.String()}
	from := map[string]api.WaitTarget{}
	var names []string
	for first := true; ; first = false {
		views, err := src.Sessions(ctx)
		if err != nil {
			return api.WaitResult{}, err
		}
		resolved, missing, err := targets.Resolve(views, t, g.keep)
		if err != nil {
			return api.WaitResult{}, err
		}
		if first && len(missing) > 0 {
			return api.WaitResult{}, fmt.Errorf("session %s %w", strings.Join(missing, ", "), ErrMissing)
		}
		// A named session gone since is still watched (and lags).
		names = union(names, resolved)
		if len(t.Names) == 0 {
			names = resolved
		}
		res.Sessions, res.Lagging = Evaluate(views, names, g, from)
		res.WaitedMS = time.Since(start).Milliseconds()
		if len(names) > 0 && len(res.Lagging) == 0 {
			res.Reached = true
			res.Message = fmt.Sprintf("%s: %d session(s) %s", targets.Describe(t), len(names), g)
			return res, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			res.Message = timeoutMessage(t, g, timeout, res.Lagging)
			return res, nil
		}
		wctx, cancel := context.WithTimeout(ctx, left)
		err = changes.Next(wctx)
		cancel()
		if err != nil && ctx.Err() != nil {
			return api.WaitResult{}, ctx.Err()
		}
	}
}

func timeoutMessage(t api.Targets, g Goal, timeout time.Duration, lagging []string) string {
	if len(lagging) == 0 {
		return fmt.Sprintf("timed out after %s: %s names no session", timeout, targets.Describe(t))
	}
	return fmt.Sprintf("timed out after %s: not %s: %s", timeout, g, strings.Join(lagging, ", "))
}

func union(a, b []string) []string {
	for _, n := range b {
		if !slices.Contains(a, n) {
			a = append(a, n)
		}
	}
	slices.Sort(a)
	return a
}
