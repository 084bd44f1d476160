package accounts

import (
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"herd"
)

// Holds are the accounts blocked by a rate limit until its reset: no
// session of theirs launches before it, and after it their launches go one
// spacing apart (the ramp ends once a spacing passes with none). Safe for
// concurrent use.
type Holds struct {
	// Spacing gives the spacing of the launches after a reset ([auto_continue]
	// spacing, read at each ask); nil launches them together.
	Spacing func() time.Duration

	mu sync.Mutex // guards the fields below
	// until is, per account and agent kind, when its limit resets.
	until map[key]time.Time
	// next is, per account and agent kind past its reset, when its next
	// launch may go.
	next map[key]time.Time
}

// key is an account as a limit sees it: its name and the agent kind.
type key struct{ account, kind string }

// NewHolds returns an empty set of holds whose launches after a reset go
// spacing apart.
func NewHolds(spacing func() time.Duration) *Holds {
	return &Holds{Spacing: spacing, until: map[key]time.Time{}, next: map[key]time.Time{}}
}

// Block holds the launches of role r's account until until; a later hold
// already there stays.
func (h *Holds) Block(r herd.Role, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key{Of(r), r.Agent}
	if until.After(h.until[k]) {
		h.until[k] = until
		delete(h.next, k)
	}
}

// LaunchHeld reports until when a launch of role r waits at now: its
// account's limit resets then, or, past the reset, the account's last
// launch was less than a spacing ago. Zero: it goes now (and, in the ramp
// after a reset, takes its turn). Holds past are forgotten.
func (h *Holds) LaunchHeld(r herd.Role, now time.Time) (until time.Time, why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := key{Of(r), r.Agent}
	t, ok := h.until[k]
	if !ok {
		return time.Time{}, ""
	}
	if now.Before(t) {
		return t, "account " + k.account + " is rate limited until " + t.UTC().Format(time.RFC3339)
	}
	var spacing time.Duration
	if h.Spacing != nil {
		spacing = h.Spacing()
	}
	n, ramping := h.next[k]
	switch {
	case spacing <= 0, ramping && !now.Before(n.Add(spacing)):
		// No ramp, or a spacing passed with no launch: the ramp is over.
		delete(h.until, k)
		delete(h.next, k)
		return time.Time{}, ""
	case ramping && now.Before(n):
		return n, "account " + k.account + " launches one every " + spacing.String() + " after its rate limit reset"
	}
	h.next[k] = now.Add(spacing)
	return time.Time{}, ""
}

// Turn is when one blocked session of an account is continued, given its
// limit's reset, the base of the account's turn before it (zero: none),
// the spacing between turns and the jitter; seed picks the jitter, so a
// session's turn is the same at every look. base is the turn without its
// jitter, the next session's last.
func Turn(reset, last time.Time, spacing, jitter time.Duration, seed string) (base, at time.Time) {
	base = reset
	if !last.IsZero() && last.Add(spacing).After(base) {
		base = last.Add(spacing)
	}
	return base, base.Add(Jitter(jitter, seed))
}

// Jitter returns a duration in [0, max) fixed by seed; 0 when max is not
// positive.
func Jitter(max time.Duration, seed string) time.Duration {
	if max <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	return time.Duration(h.Sum64() % uint64(max))
}

// Seed is the seed of the jitter of the blocked event id.
func Seed(eventID int64) string { return strconv.FormatInt(eventID, 10) }
