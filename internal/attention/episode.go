package attention

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"herd"
)

// Track is one way of telling a person: escalations ([escalation]: an
// escalated event, then its command and webhook) and notifications
// ([notify]: a message on every channel, a notified event per delivery).
// Both tracks share the episode, the evaluation, the channels, the backoff
// and the delivery path; they differ only in the rules they watch, their
// thresholds, and what a closed episode keeps.
type Track string

// Tracks. Each is also the prefix of its episodes' kv keys.
const (
	TrackEscalation Track = "escalation"
	TrackNotify     Track = "notify"
)

// Rule names one condition a session can be in that needs a person. It is
// also the reason of the escalated or notified event.
type Rule string

// Rules.
const (
	// RuleWaiting: the agent waits for input (a permission or a startup
	// prompt).
	RuleWaiting Rule = "waiting"
	// RuleStalled: the agent is alive but silent in a turn.
	RuleStalled Rule = "stalled"
	// RuleUnknown: the probes are inconclusive (escalations only).
	RuleUnknown Rule = "unknown"
	// RuleFailed: the restart budget is spent, or the policy forbids a
	// restart.
	RuleFailed Rule = "failed"
	// RuleBlocked: a turn ended on a rate limit or an API error
	// (notifications only).
	RuleBlocked Rule = "blocked"
)

// EscalationRules lists the escalation track's rules, in evaluation order.
var EscalationRules = []Rule{RuleWaiting, RuleStalled, RuleUnknown, RuleFailed}

// NotifyRules lists the notify track's rules: at most one holds at a time
// (NeedOf).
var NotifyRules = []Rule{RuleWaiting, RuleBlocked, RuleFailed, RuleStalled}

// Condition is what one rule sees of one session at one moment.
type Condition struct {
	// Active: the rule's condition holds now.
	Active bool
	// Incarnation the condition belongs to; a new incarnation is a new
	// episode.
	Incarnation string
	// Since is when the condition began as far as the session record
	// tells; zero when it does not (the episode then begins when first
	// seen).
	Since time.Time
	// Exact means Since is authoritative (a state's StateSince): a later
	// Since than the episode's means the condition cleared and came back
	// between two looks. Otherwise Since is only a hint used when an
	// episode opens.
	Exact bool
	// NotBefore bounds a hint from below: the condition was seen clear
	// then, so it cannot have begun earlier. Zero when never seen clear.
	NotBefore time.Time
}

// Observe returns what escalation rule r sees of session s. The waiting
// rule measures from LastActivityAt when set, a hint the caller may bound
// with NotBefore; the others from the state's StateSince.
func Observe(s herd.Session, r Rule) Condition {
	c := Condition{Incarnation: s.Incarnation}
	switch r {
	case RuleWaiting:
		c.Active = s.State.Live() && s.Activity == herd.ActivityWaiting
		if s.LastActivityAt != nil {
			c.Since = *s.LastActivityAt
		}
		return c
	case RuleStalled:
		c.Active = s.State == herd.StateStalled
	case RuleUnknown:
		c.Active = s.State == herd.StateUnknown
	case RuleFailed:
		c.Active = s.State == herd.StateFailed
	}
	c.Since, c.Exact = s.StateSince, true
	return c
}

// NeedOf returns the one thing session s needs of a person now, as the
// notify track sees it; "" when nothing.
func NeedOf(s herd.Session) Rule {
	switch {
	case s.State == herd.StateFailed:
		return RuleFailed
	case s.State == herd.StateStalled:
		return RuleStalled
	case s.State.Live() && s.Activity == herd.ActivityWaiting:
		return RuleWaiting
	case s.State.Live() && s.Activity == herd.ActivityBlocked:
		return RuleBlocked
	}
	return ""
}

// ObserveNeed returns what notify rule r sees of session s: active while
// it is s's need; an episode begins when the need is first seen.
func ObserveNeed(s herd.Session, r Rule) Condition {
	return Condition{Active: NeedOf(s) == r, Incarnation: s.Incarnation}
}

// Delivery is one channel's part of a fired episode.
type Delivery struct {
	// Done: the channel took the episode (or, for a channel tried once,
	// was tried).
	Done bool `json:"done,omitempty"`
	// Attempts counts the tries so far.
	Attempts int `json:"attempts,omitempty"`
	// Next is when a failed channel is tried again.
	Next time.Time `json:"next,omitzero"`
	// LastError is the last failure ("" after a success).
	LastError string `json:"last_error,omitempty"`
}

// Episode is one stretch of time during which one rule holds for one
// session, and the telling of it. It is persisted, so a restarted daemon
// neither tells twice nor forgets what is owed. The zero Episode is "no
// episode, nothing owed".
type Episode struct {
	// Track, Session and Rule name the episode; they are its kv key, not
	// stored in its row.
	Track   Track  `json:"-"`
	Session string `json:"-"`
	Rule    Rule   `json:"-"`

	// Open: the condition holds (as of the last evaluation).
	Open bool `json:"open"`
	// Incarnation of the session the episode belongs to.
	Incarnation string `json:"incarnation"`
	// Since is when the condition began.
	Since time.Time `json:"since"`
	// FiredAt is when this episode fired; nil until it does. It also
	// names the firing: a delivery of an older firing is not recorded.
	FiredAt *time.Time `json:"fired_at,omitempty"`
	// EventID is the escalated event the firing appended (escalations).
	EventID int64 `json:"event_id,omitempty"`
	// Message is what the channels send, composed once when the episode
	// fires (notifications).
	Message *Message `json:"message,omitempty"`
	// Channels holds, by channel name, the delivery of the firing: the
	// channels configured when it fired.
	Channels map[string]*Delivery `json:"channels,omitempty"`
}

// Fired reports whether the episode is open and has fired: the session
// shows `!`.
func (e Episode) Fired() bool { return e.Open && e.FiredAt != nil }

// Owed reports whether a channel still has to take the firing.
func (e Episode) Owed() bool {
	if e.FiredAt == nil {
		return false
	}
	for _, d := range e.Channels {
		if !d.Done {
			return true
		}
	}
	return false
}

// Keep reports whether the episode must stay stored; otherwise its row is
// deleted (the rule is re-armed). keepOwed: a closed episode stays while
// something is owed (escalations); otherwise what is owed goes with the
// condition (notifications).
func (e Episode) Keep(keepOwed bool) bool { return e.Open || (keepOwed && e.Owed()) }

// Evaluate is the episode decision: given what the rule sees now, the
// persisted episode and the rule's threshold, it reports whether to fire
// now and returns the episode to persist. Thresholds are inclusive; an
// episode fires at most once; the rule re-arms when the condition clears.
// On fire the firing's fields start over (an older firing still owed is
// superseded); the caller fills them (Fire).
func Evaluate(c Condition, ep Episode, now time.Time, threshold time.Duration) (fire bool, next Episode) {
	next = ep
	if !c.Active {
		next.Open = false
		return false, next
	}
	fresh := !ep.Open || ep.Incarnation != c.Incarnation ||
		(c.Exact && c.Since.After(ep.Since))
	if fresh {
		next.Open = true
		next.Incarnation = c.Incarnation
		next.Since = start(c, now)
		next.FiredAt = nil
	}
	if next.FiredAt != nil || elapsed(next.Since, now) < threshold {
		return false, next
	}
	at := now
	next.FiredAt = &at
	next.EventID = 0
	next.Message = nil
	next.Channels = nil
	return true, next
}

// Fire fills a firing's deliveries: one pending delivery, due at once,
// per channel named. With none, nothing is owed.
func Fire(ep Episode, channels []string) Episode {
	ep.Channels = nil
	if len(channels) > 0 {
		ep.Channels = make(map[string]*Delivery, len(channels))
		for _, name := range channels {
			ep.Channels[name] = &Delivery{}
		}
	}
	return ep
}

// start is when an episode opening now began.
func start(c Condition, now time.Time) time.Time {
	if c.Exact && !c.Since.IsZero() {
		return c.Since // kept as is, so a later Since is recognizable
	}
	since := c.Since
	if since.IsZero() || since.After(now) {
		since = now
	}
	if since.Before(c.NotBefore) && !c.NotBefore.After(now) {
		since = c.NotBefore
	}
	return since
}

// elapsed is how long since t, never negative.
func elapsed(t, now time.Time) time.Duration {
	if d := now.Sub(t); d > 0 {
		return d
	}
	return 0
}

// Record returns d after one attempt at now that failed with err (nil: a
// success). A channel tried once is done after any attempt; another is
// tried again after Backoff(attempts, lo, hi) until it succeeds.
func Record(d Delivery, err error, once bool, now time.Time, lo, hi time.Duration) Delivery {
	d.Attempts++
	d.Next = time.Time{}
	d.LastError = ""
	if err != nil {
		d.LastError = clip(err.Error(), 512)
	}
	if err == nil || once {
		d.Done = true
		return d
	}
	d.Next = now.Add(Backoff(d.Attempts, lo, hi))
	return d
}

// Due returns when the episode's next delivery attempt is due, and
// whether one is owed.
func (e Episode) Due() (time.Time, bool) {
	if e.FiredAt == nil {
		return time.Time{}, false
	}
	var at time.Time
	owed := false
	for _, d := range e.Channels {
		if d.Done {
			continue
		}
		if !owed || d.Next.Before(at) {
			at = d.Next
		}
		owed = true
	}
	return at, owed
}

// Key is the kv key of an episode: <track>/<session>/<rule>.
func Key(tr Track, session string, r Rule) string {
	return string(tr) + "/" + session + "/" + string(r)
}

// ParseKey splits an episode key; ok is false for anything else.
func ParseKey(key string) (tr Track, session string, r Rule, ok bool) {
	for _, t := range []Track{TrackEscalation, TrackNotify} {
		rest, found := strings.CutPrefix(key, string(t)+"/")
		if !found {
			continue
		}
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 || i == len(rest)-1 {
			return "", "", "", false
		}
		return t, rest[:i], Rule(rest[i+1:]), true
	}
	return "", "", "", false
}

// IndexKey is the kv key listing every stored episode key of a host, so
// episodes of sessions since deleted are still closed and delivered, and
// a quiet host reads one row per tick.
func IndexKey(host string) string { return "escalation-index/" + host }

// Encode renders an episode for the store. It fails only on a time
// outside years 0-9999.
func (e Episode) Encode() (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("attention: encode episode: %w", err)
	}
	return string(b), nil
}

// Decode parses a stored episode (a row of the former escalation layout
// too).
func Decode(s string) (Episode, error) {
	var e Episode
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return Episode{}, fmt.Errorf("attention: decode episode: %w", err)
	}
	return upgrade(e, []byte(s)), nil
}

// DecodeIndex parses a stored index; an empty value is an empty index.
func DecodeIndex(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var keys []string
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return nil, fmt.Errorf("attention: decode index: %w", err)
	}
	return keys, nil
}

// EncodeIndex renders an index for the store.
func EncodeIndex(keys []string) string {
	b, _ := json.Marshal(keys)
	return string(b)
}
