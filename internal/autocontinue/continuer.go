// Package autocontinue types "continue" into a session blocked by a rate limit once the limit resets (role key auto_continue).
package autocontinue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/loop"
	"herd/internal/status"
	"herd/internal/store"
)

// Text is what is typed into the agent, followed by Enter.
const Text = "continue"

// Reason is the reason of the activity event that records it.
const Reason = "auto_continue"

// reasonRateLimited is the reason of the activity event of a turn ended
// by a rate limit (agents.ReasonRateLimited).
const reasonRateLimited = "rate_limited"

// Injector types text into a live session's agent (the inject path)
// and shows what its pane shows.
type Injector interface {
	Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error
	Capture(ctx context.Context, inc herd.Incarnation, lines int) ([]byte, error)
}

// Options configure a Continuer.
type Options struct {
	Status *status.Manager
	// Runtimes inject by runtime kind; a kind missing has no inject.
	Runtimes map[string]Injector
	Log      *slog.Logger
	// Tick spaces the looks: Kick runs one at once, at most one per Tick.
	Tick time.Duration
	// Idle is the loop's period (at least Tick): a session changing
	// (the writer's subscription) kicks the loop and a named reset time wakes it,
	// so an idle fleet is not looked at every Tick; Idle is the backstop.
	Idle time.Duration
	// Timeout bounds one inject.
	Timeout time.Duration
}

// Continuer continues sessions blocked by a rate limit when it resets:
// once per episode (the blocked activity event), only while the session
// is still blocked in the same incarnation, through the inject path, and
// recorded as an activity event with reason auto_continue.
type Continuer struct {
	o    Options
	kick chan struct{}

	mu sync.Mutex // guards the fields below
	// tried holds the blocked events already acted on (or given up on),
	// so a failed inject is not retried in a loop.
	tried map[int64]bool
}

// New returns a Continuer; Run starts it.
func New(o Options) *Continuer {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Idle < o.Tick {
		o.Idle = o.Tick
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return &Continuer{o: o, kick: make(chan struct{}, 1), tried: map[int64]bool{}}
}

// Kick asks for a look now, without blocking.
func (c *Continuer) Kick() { loop.Wake(c.kick) }

// Run looks at each kick (at most once per Tick), when a reset time
// comes, and every Idle, until ctx is done.
func (c *Continuer) Run(ctx context.Context) {
	// A session's activity changing (blocked, no longer blocked) wakes
	// the loop: an idle fleet is not looked at every Tick.
	changes, cancel := c.o.Status.Subscribe()
	followed := make(chan struct{})
	defer func() { cancel(); <-followed }()
	go func() {
		defer close(followed)
		for ch := range changes { // closed by cancel
			if ch.What&(status.ChangeActivity|status.ChangeEnded) != 0 || ch.Activity == herd.ActivityBlocked {
				c.Kick()
			}
		}
	}()
	var last time.Time
	loop.Loop{Name: "auto-continue", Log: c.o.Log, Every: c.o.Idle, Trigger: c.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		if since := time.Since(last); since < c.o.Tick {
			return c.o.Tick - since // a burst of kicks: one look for all of them
		}
		last = time.Now()
		wait, err := c.Tick(ctx, last)
		if err != nil && ctx.Err() == nil {
			c.o.Log.Error("auto-continue: look", "err", err)
			return c.o.Tick
		}
		return wait
	})
}

// due is one blocked session with a named reset time.
type due struct {
	s       herd.Session
	inc     herd.Incarnation
	eventID int64
	resetAt time.Time
}

// Plan decides, from a blocked session's last activity event, whether and
// when it is continued: a rate limit with a named reset time, in the
// session's current incarnation, of a role that allows it. ok is false
// otherwise.
func Plan(s herd.Session, role herd.Role, last herd.Event) (at time.Time, ok bool) {
	if !s.State.Live() || s.Activity != herd.ActivityBlocked || !role.ContinuesAfterReset() {
		return time.Time{}, false
	}
	if last.Kind != herd.EventActivity || last.Incarnation != s.Incarnation || last.Reason != reasonRateLimited {
		return time.Time{}, false
	}
	raw, _ := last.Data["reset_at"].(string)
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Tick is one look at now: each blocked session whose reset time has
// come is continued. It returns how soon the next reset comes (0: none;
// a change of a session kicks the loop).
func (c *Continuer) Tick(ctx context.Context, now time.Time) (time.Duration, error) {
	host := c.o.Status.Host()
	// The live set first (memory, no query): almost always nothing is
	// blocked, and then the store is not read at all.
	_, live, err := c.o.Status.AppendListing(ctx, nil, nil) // the live sessions only, not the stopped ones
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(live, func(l status.Live) bool { return l.S.Activity == herd.ActivityBlocked }) {
		c.mu.Lock()
		clear(c.tried) // every episode is over
		c.mu.Unlock()
		return 0, nil
	}
	var next time.Duration
	var plans []due
	err = c.o.Status.Store().View(ctx, func(tx store.Tx) error {
		sessions, err := tx.SessionsOnHost(host)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			// Only blocked sessions cost more reads.
			if s.Host != host || !s.State.Live() || s.Activity != herd.ActivityBlocked {
				continue
			}
			role, err := tx.Role(s.Role)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			evs, err := tx.Events(store.EventFilter{Session: s.Name, Kind: herd.EventActivity, Limit: 1})
			if err != nil {
				return err
			}
			if len(evs) != 1 {
				continue
			}
			at, ok := Plan(s, role, evs[0])
			if !ok {
				continue
			}
			inc, err := tx.Incarnation(s.Incarnation)
			if errors.Is(err, store.ErrNotFound) || (err == nil && inc.EndedAt != nil) {
				continue
			}
			if err != nil {
				return err
			}
			plans = append(plans, due{s, inc, evs[0].ID, at})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	keep := map[int64]bool{}
	for _, p := range plans {
		if c.tried[p.eventID] {
			keep[p.eventID] = true
		}
	}
	c.tried = keep // episodes over are forgotten
	c.mu.Unlock()
	for _, p := range plans {
		c.mu.Lock()
		done := c.tried[p.eventID]
		c.mu.Unlock()
		if done {
			continue
		}
		if wait := p.resetAt.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		c.mu.Lock()
		c.tried[p.eventID] = true
		c.mu.Unlock()
		c.continueSession(ctx, p)
	}
	return next, nil
}

// typeLine types Text, waits until the pane shows it, then presses
// Enter: Claude Code takes keys that follow each other at once for a
// paste, and drops an Enter that comes with the text. A pane that does
// not show the text within ctx gets its Enter anyway.
func typeLine(ctx context.Context, inj Injector, inc herd.Incarnation) error {
	if err := inj.Inject(ctx, inc, Text, false); err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	wait, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		if out, err := inj.Capture(wait, inc, 10); err == nil && bytes.Contains(out, []byte(Text)) {
			break
		}
		select {
		case <-wait.Done():
		case <-tick.C:
			continue
		}
		break
	}
	return inj.Inject(ctx, inc, "", true)
}

// continueSession types Text into p's agent, if it is still blocked in the
// same incarnation, and records it.
func (c *Continuer) continueSession(ctx context.Context, p due) {
	cur, err := c.o.Status.Session(ctx, p.s.Name)
	if err != nil || cur.Incarnation != p.inc.ID || cur.Activity != herd.ActivityBlocked || !cur.State.Live() {
		return // it moved on by itself: nothing to continue
	}
	inj := c.o.Runtimes[p.s.RuntimeKind]
	if inj == nil {
		c.o.Log.Warn("auto-continue: the runtime has no inject; not continued", "session", p.s.Name, "runtime", p.s.RuntimeKind)
		return
	}
	ictx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	err = typeLine(ictx, inj, p.inc)
	cancel()
	if err != nil {
		c.o.Log.Warn("auto-continue: inject failed", "session", p.s.Name, "err", err)
		return
	}
	late := time.Since(p.resetAt).Round(time.Millisecond)
	msg := fmt.Sprintf("rate limit reset at %s: %q typed in", p.resetAt.UTC().Format(time.RFC3339), Text)
	_, err = c.o.Status.Continued(ctx, p.s.Name, p.inc.ID, Reason, msg, map[string]any{
		"reset_at": p.resetAt.UTC().Format(time.RFC3339), "text": Text, "blocked_event": p.eventID, "late_ms": late.Milliseconds(),
	})
	if err != nil {
		c.o.Log.Error("auto-continue: record", "session", p.s.Name, "err", err)
		return
	}
	c.o.Log.Info("auto-continued after a rate limit reset", "session", p.s.Name, "reset_at", p.resetAt)
}
