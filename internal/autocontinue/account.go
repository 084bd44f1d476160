package autocontinue

import (
	"context"
	"sort"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/config"
	"herd/internal/status"
)

// sourceAccount is the source of the activity event that blocks a session
// for a limit another session of its account met (the event's reason is
// rate_limited, as for a limit of its own).
const sourceAccount = "account"

// accountKey is an account as a limit sees it: its name and agent kind.
type accountKey struct{ account, kind string }

func keyOf(r herd.Role) accountKey { return accountKey{accounts.Of(r), r.Agent} }

// spreadLimits has each rate limit a session met of its own block the
// other live sessions of its account (accounts.Shares) until the reset,
// once per limit, and holds the account's launches until then. A session
// waiting for a person is left as it is: its prompt is what it needs first.
// A limit whose reset has passed at now is not spread.
func (c *Continuer) spreadLimits(ctx context.Context, plans []due, others []peer, now time.Time) {
	for _, p := range plans {
		if c.o.Holds != nil {
			c.o.Holds.Block(p.role, p.resetAt)
		}
		if p.marked || !p.resetAt.After(now) {
			continue // a limit already reset (met before a restart) blocks no one
		}
		c.mu.Lock()
		done := c.spread[p.eventID]
		c.spread[p.eventID] = true
		c.mu.Unlock()
		if done {
			continue
		}
		acct := accounts.Of(p.role)
		reset := p.resetAt.UTC().Format(time.RFC3339)
		for _, q := range others {
			if q.s.Name == p.s.Name || q.s.Activity == herd.ActivityWaiting || !accounts.Shares(p.role, q.role) {
				continue
			}
			prior := q.s.Activity
			if prior == "" {
				prior = herd.ActivityUnknown
			}
			_, err := c.o.Status.Activity(ctx, status.Seen{
				Session: q.s.Name, Incarnation: q.s.Incarnation, Activity: herd.ActivityBlocked, Only: q.s.Activity,
				Source: sourceAccount, What: "rate limit of account " + acct + " met by " + p.s.Name, Reason: reasonRateLimited,
				Data: map[string]any{"reset_at": reset, "account": acct, "limited_by": p.s.Name, "prior": string(prior), "error": p.limitErr},
			})
			if err != nil {
				c.o.Log.Warn("auto-continue: block a session of a limited account", "session", q.s.Name, "account", acct, "err", err)
				continue
			}
			c.o.Log.Info("blocked by its account's rate limit", "session", q.s.Name, "account", acct, "limited_by", p.s.Name, "reset_at", reset)
		}
	}
}

// schedule gives each planned session without one its turn — the reset,
// spaced after the turn its account gave last, plus its jitter — in the
// order of their resets, then names; plans is returned in that order.
func (c *Continuer) schedule(plans []due) []due {
	sort.SliceStable(plans, func(i, j int) bool {
		if !plans[i].resetAt.Equal(plans[j].resetAt) {
			return plans[i].resetAt.Before(plans[j].resetAt)
		}
		return plans[i].s.Name < plans[j].s.Name
	})
	var st config.AutoContinue
	if c.o.Stagger != nil {
		st = c.o.Stagger()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range plans {
		if _, ok := c.turns[p.eventID]; ok {
			continue
		}
		k := keyOf(p.role)
		base, at := accounts.Turn(p.resetAt, c.lastTurn[k], st.Spacing, st.Jitter, accounts.Seed(p.eventID))
		c.lastTurn[k] = base
		c.turns[p.eventID] = at
	}
	return plans
}

// release lifts, at its turn, the mark of a session blocked by another
// session's limit: it goes back to what it was doing, unless a hook said
// otherwise meanwhile. Nothing is typed: its own turn never ended on a
// limit (an agent that retries a limit on its own, as Claude Code does,
// carries on by itself), so a "continue" would be one too many.
func (c *Continuer) release(ctx context.Context, p due) {
	back := p.prior
	if back == "" || back == herd.ActivityBlocked {
		back = herd.ActivityUnknown
	}
	late := time.Since(p.resetAt).Round(time.Millisecond)
	applied, err := c.o.Status.Activity(ctx, status.Seen{
		Session: p.s.Name, Incarnation: p.inc.ID, Activity: back, Only: herd.ActivityBlocked,
		Source: Reason, What: "rate limit reset", Reason: Reason,
		Data: map[string]any{"reset_at": p.resetAt.UTC().Format(time.RFC3339), "blocked_event": p.eventID, "late_ms": late.Milliseconds(), "released": true},
	})
	if err != nil {
		c.o.Log.Error("auto-continue: release", "session", p.s.Name, "err", err)
		return
	}
	if applied {
		c.o.Log.Info("released after its account's rate limit reset", "session", p.s.Name, "to", back, "reset_at", p.resetAt)
	}
}
