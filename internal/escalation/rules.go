// Package escalation decides when a session needs a person and tells one: rules, episodes and notifiers.
package escalation

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/config"
)

// Rule names one escalation condition. It is also the reason of the
// escalated event.
type Rule string

// Rules.
const (
	// RuleWaiting: the agent has waited for input longer than waiting_after.
	RuleWaiting Rule = "waiting"
	// RuleStalled: the session has been stalled longer than liveness_timeout.
	RuleStalled Rule = "stalled"
	// RuleUnknown: the session has been unknown longer than unknown_after.
	RuleUnknown Rule = "unknown"
	// RuleFailed: the session failed; escalates at once.
	RuleFailed Rule = "failed"
)

// Rules lists every rule, in evaluation order.
var Rules = []Rule{RuleWaiting, RuleStalled, RuleUnknown, RuleFailed}

// Thresholds are how long each condition must hold before it escalates.
type Thresholds struct {
	WaitingAfter    time.Duration // [escalation] waiting_after
	LivenessTimeout time.Duration // [watchdog] liveness_timeout
	UnknownAfter    time.Duration // [escalation] unknown_after
}

// ThresholdsOf reads the thresholds of a config.
func ThresholdsOf(c *config.Config) Thresholds {
	return Thresholds{
		WaitingAfter:    c.Escalation.WaitingAfter,
		LivenessTimeout: c.Watchdog.LivenessTimeout,
		UnknownAfter:    c.Escalation.UnknownAfter,
	}
}

// For returns rule r's threshold; failed (and any unknown rule) is 0.
func (t Thresholds) For(r Rule) time.Duration {
	switch r {
	case RuleWaiting:
		return t.WaitingAfter
	case RuleStalled:
		return t.LivenessTimeout
	case RuleUnknown:
		return t.UnknownAfter
	}
	return 0
}

// Condition is what one rule sees of one session at one moment.
type Condition struct {
	// Active: the rule's condition holds now.
	Active bool
	// Incarnation the condition belongs to; a new incarnation is a new
	// episode.
	Incarnation string
	// Since is when the condition began as far as the session record
	// tells; zero when it does not.
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

// Observe returns what rule r sees of session s. The waiting rule measures
// from LastActivityAt when set, a hint the caller may bound with NotBefore.
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

// Episode is the persisted state of one rule for one session: the current
// episode (a stretch of time during which the condition holds) and the
// delivery of the last escalation it fired. The zero Episode is "no
// episode, nothing owed".
type Episode struct {
	// Open: the condition holds (as of the last evaluation).
	Open bool `json:"open"`
	// Incarnation of the session the episode belongs to.
	Incarnation string `json:"incarnation"`
	// Since is when the condition began.
	Since time.Time `json:"since"`
	// FiredAt is when this episode escalated; nil until it does.
	FiredAt *time.Time `json:"fired_at"`

	// EventID is the escalated event to deliver; 0 when none.
	EventID int64 `json:"event_id"`
	// Delivered: every configured notifier is done with EventID.
	Delivered bool `json:"delivered"`
	// Attempts counts delivery rounds of EventID.
	Attempts int `json:"attempts"`
	// NextAttempt is when an undelivered escalation is retried.
	NextAttempt *time.Time `json:"next_attempt"`
	// LastError is the last delivery failure ("" after a success).
	LastError string `json:"last_error"`
	// CommandDone: the notifier command ran (it runs once per escalation).
	CommandDone bool `json:"command_done,omitempty"`
	// CommandExit is the command's exit status (-1 when killed).
	CommandExit *int `json:"command_exit,omitempty"`
	// WebhookDone: the webhook answered 2xx.
	WebhookDone bool `json:"webhook_done,omitempty"`
}

// Fired reports whether the episode is open and has escalated: the session
// shows as escalated.
func (e Episode) Fired() bool { return e.Open && e.FiredAt != nil }

// Owed reports whether an escalation still waits for delivery.
func (e Episode) Owed() bool { return e.EventID != 0 && !e.Delivered }

// Keep reports whether the episode must stay stored; otherwise its row is
// deleted (the rule is re-armed and nothing is owed).
func (e Episode) Keep() bool { return e.Open || e.Owed() }

// Evaluate is the rule decision: given what the rule sees now, the
// persisted episode and the rule's threshold, it reports whether to
// escalate now and returns the episode to persist. Thresholds are
// inclusive; an episode fires at most once; the rule re-arms when the
// condition clears. On fire the delivery fields start over (an older
// escalation still undelivered is superseded); the caller sets EventID.
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
	next.Delivered = false
	next.Attempts = 0
	next.NextAttempt = nil
	next.LastError = ""
	next.CommandDone = false
	next.CommandExit = nil
	next.WebhookDone = false
	return true, next
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

// Describe returns the message and data of the escalated event an episode
// fires at now.
func Describe(r Rule, ep Episode, threshold time.Duration, now time.Time) (string, map[string]any) {
	held := elapsed(ep.Since, now)
	var msg string
	switch r {
	case RuleWaiting:
		msg = fmt.Sprintf("agent waiting for input for %s (waiting_after %s)", round(held), threshold)
	case RuleStalled:
		msg = fmt.Sprintf("session stalled for %s (liveness_timeout %s)", round(held), threshold)
	case RuleUnknown:
		msg = fmt.Sprintf("session unknown for %s (unknown_after %s)", round(held), threshold)
	case RuleFailed:
		msg = "session failed: restart budget spent or policy forbids restart"
	default:
		msg = fmt.Sprintf("rule %s held for %s", r, round(held))
	}
	data := map[string]any{
		"rule":              string(r),
		"threshold":         threshold.String(),
		"threshold_seconds": threshold.Seconds(),
		"for":               round(held).String(),
		"for_seconds":       held.Seconds(),
		"since":             ep.Since.UTC().Format(time.RFC3339Nano),
	}
	return msg, data
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// keyPrefix starts every episode key.
const keyPrefix = "escalation/"

// Key is the kv key of rule r's episode of a session.
func Key(session string, r Rule) string { return keyPrefix + session + "/" + string(r) }

// ParseKey splits an episode key; ok is false for anything else.
func ParseKey(key string) (session string, r Rule, ok bool) {
	rest, found := strings.CutPrefix(key, keyPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], Rule(rest[i+1:]), true
}

// IndexKey is the kv key listing every stored episode key of a host, so
// episodes of sessions since deleted are still closed and delivered.
func IndexKey(host string) string { return "escalation-index/" + host }

// Encode renders an episode for the store. It fails only on a time
// outside years 0-9999.
func (e Episode) Encode() (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("escalation: encode episode: %w", err)
	}
	return string(b), nil
}

// Decode parses a stored episode.
func Decode(s string) (Episode, error) {
	var e Episode
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return Episode{}, fmt.Errorf("escalation: decode episode: %w", err)
	}
	return e, nil
}

// DecodeIndex parses a stored index; an empty value is an empty index.
func DecodeIndex(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var keys []string
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return nil, fmt.Errorf("escalation: decode index: %w", err)
	}
	return keys, nil
}

// EncodeIndex renders an index for the store.
func EncodeIndex(keys []string) string {
	b, _ := json.Marshal(keys)
	return string(b)
}
