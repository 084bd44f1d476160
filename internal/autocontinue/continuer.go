// Package autocontinue types "continue" into a session blocked by a rate
// limit once the limit resets (role key auto_continue), blocks the other
// sessions of the limited account meanwhile, and continues them in turns
// spaced over the account ([auto_continue] spacing, jitter). It writes
// sessions only through internal/status and types only through the inject
// path; the decisions are internal/accounts'.
package autocontinue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/agents"
	"herd/internal/config"
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
	// Holds, when set, learns each account's rate limit: the launches of
	// its sessions wait for the reset.
	Holds *accounts.Holds
	// Stagger gives the spacing and jitter of an account's turns
	// ([auto_continue]), read at each look so a reload applies; nil
	// continues every session at the reset itself.
	Stagger func() config.AutoContinue
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
	// spread holds the blocked events of limits already spread to the
	// rest of their account: a session that left the mark since is not
	// marked again by the same limit.
	spread map[int64]bool
	// turns holds, by blocked event, when its session is continued: fixed
	// once given, so a session continued before does not move the others'.
	turns map[int64]time.Time
	// lastTurn holds, by account, the base of the last turn given.
	lastTurn map[accountKey]time.Time
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
	return &Continuer{o: o, kick: make(chan struct{}, 1), tried: map[int64]bool{}, spread: map[int64]bool{},
		turns: map[int64]time.Time{}, lastTurn: map[accountKey]time.Time{}}
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
	role    herd.Role
	inc     herd.Incarnation
	eventID int64
	resetAt time.Time
	// marked: the session was blocked by another session's limit on its
	// account (not its own), and prior is what it was doing then.
	marked bool
	prior  herd.Activity
	// limitErr is the limit's error, as its event says it.
	limitErr string
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

// Tick is one look at now: a session blocked by its own rate limit blocks
// the other sessions of its account (once per limit), and each blocked
// session whose turn has come (the reset, staggered over the account's
// sessions) is continued. It returns how soon the next turn comes (0:
// none; a change of a session kicks the loop).
func (c *Continuer) Tick(ctx context.Context, now time.Time) (time.Duration, error) {
	// The live set first (memory, no query): almost always nothing is
	// blocked, and then the store is not read at all.
	_, live, err := c.o.Status.AppendListing(ctx, nil, nil) // the live sessions only, not the stopped ones
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(live, func(l status.Live) bool { return l.S.Activity == herd.ActivityBlocked }) {
		c.mu.Lock()
		clear(c.tried) // every episode is over
		clear(c.spread)
		clear(c.turns)
		clear(c.lastTurn)
		c.mu.Unlock()
		return 0, nil
	}
	plans, others, err := c.read(ctx)
	if err != nil {
		return 0, err
	}
	c.spreadLimits(ctx, plans, others, now)
	c.forget(plans)
	var next time.Duration
	for _, p := range c.schedule(plans) {
		c.mu.Lock()
		done, at := c.tried[p.eventID], c.turns[p.eventID]
		c.mu.Unlock()
		if done {
			continue
		}
		if wait := at.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		c.mu.Lock()
		c.tried[p.eventID] = true
		c.mu.Unlock()
		switch {
		case p.marked:
			c.release(ctx, p)
		case p.role.ContinuesAfterReset():
			c.continueSession(ctx, p)
		}
	}
	return next, nil
}

// peer is a live session of this host that is not blocked, with its role:
// one a limit on its account blocks.
type peer struct {
	s    herd.Session
	role herd.Role
}

// read returns this host's blocked sessions that have a turn to come
// (plans), and its other live sessions.
func (c *Continuer) read(ctx context.Context) (plans []due, others []peer, err error) {
	host := c.o.Status.Host()
	err = c.o.Status.Store().View(ctx, func(tx store.Tx) error {
		plans, others = plans[:0], others[:0]
		sessions, err := tx.SessionsOnHost(host)
		if err != nil {
			return err
		}
		roles := map[string]*herd.Role{}
		roleOf := func(name string) (*herd.Role, error) {
			if r, ok := roles[name]; ok {
				return r, nil
			}
			r, err := tx.Role(name)
			if errors.Is(err, store.ErrNotFound) {
				roles[name] = nil
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			roles[name] = &r
			return &r, nil
		}
		for _, s := range sessions {
			if s.Host != host || !s.State.Live() {
				continue
			}
			role, err := roleOf(s.Role)
			if err != nil {
				return err
			}
			if role == nil {
				continue
			}
			if s.Activity != herd.ActivityBlocked {
				others = append(others, peer{s, *role})
				continue
			}
			// Only blocked sessions cost more reads.
			evs, err := tx.Events(store.EventFilter{Session: s.Name, Kind: herd.EventActivity, Limit: 1})
			if err != nil {
				return err
			}
			if len(evs) != 1 {
				continue
			}
			// A limit is spread, and a mark lifted, whatever the role
			// says of typing "continue" (checked at the turn).
			always := *role
			always.AutoContinue = nil
			at, ok := Plan(s, always, evs[0])
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
			p := due{s: s, role: *role, inc: inc, eventID: evs[0].ID, resetAt: at}
			p.limitErr, _ = evs[0].Data["error"].(string)
			if src, _ := evs[0].Data["source"].(string); src == sourceAccount {
				p.marked = true
				prior, _ := evs[0].Data["prior"].(string)
				p.prior = herd.Activity(prior)
			}
			plans = append(plans, p)
		}
		return nil
	})
	return plans, others, err
}

// forget drops what is remembered of the episodes over: the blocked
// events no longer planned.
func (c *Continuer) forget(plans []due) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := make(map[int64]bool, len(plans))
	for _, p := range plans {
		keep[p.eventID] = true
	}
	maps.DeleteFunc(c.tried, func(id int64, _ bool) bool { return !keep[id] })
	maps.DeleteFunc(c.turns, func(id int64, _ time.Time) bool { return !keep[id] })
	maps.DeleteFunc(c.spread, func(id int64, _ bool) bool { return !keep[id] })
}

// typeLine types Text, waits until the pane shows it, then presses
// Enter: Claude Code takes keys that follow each other at once for a
// paste, and drops an Enter that comes with the text; Gemini CLI reads
// an Enter within its fast-return window of a key as a newline, so the
// Enter waits agents.SubmitSettle after the text shows. A pane that does
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
	if d := agents.SubmitSettle(agents.Infer(inc.Argv, "")); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
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
