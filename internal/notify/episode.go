// Package notify tells a person at once that a session needs them: one notification per episode of waiting, blocked, failed or stalled, after a debounce, to the desktop, ntfy, Slack or Discord, a command and a webhook.
package notify

import (
	"time"

	"herd"
)

// Need is what a session needs of a person; it is also the reason of the
// notified event.
type Need string

// Needs.
const (
	// NeedWaiting: the agent waits for an answer (a permission or a
	// startup prompt).
	NeedWaiting Need = "waiting"
	// NeedBlocked: a turn ended on a rate limit or an API error.
	NeedBlocked Need = "blocked"
	// NeedFailed: the restart budget is spent, or the policy forbids a
	// restart.
	NeedFailed Need = "failed"
	// NeedStalled: the agent is alive but silent in a turn.
	NeedStalled Need = "stalled"
)

// NeedOf returns what session s needs now; "" when nothing.
func NeedOf(s herd.Session) Need {
	switch {
	case s.State == herd.StateFailed:
		return NeedFailed
	case s.State == herd.StateStalled:
		return NeedStalled
	case s.State.Live() && s.Activity == herd.ActivityWaiting:
		return NeedWaiting
	case s.State.Live() && s.Activity == herd.ActivityBlocked:
		return NeedBlocked
	}
	return ""
}

// Delivery is one channel's part of a notification.
type Delivery struct {
	// Done: the channel took the notification.
	Done bool `json:"done,omitempty"`
	// Attempts counts the tries so far.
	Attempts int `json:"attempts,omitempty"`
	// Next is when a failed channel is tried again.
	Next time.Time `json:"next,omitzero"`
	// LastError is the last failure.
	LastError string `json:"last_error,omitempty"`
}

// Episode is one stretch of time during which a session needs the same
// thing of a person, and the notification it sent. It is persisted so a
// restarted daemon neither notifies twice nor forgets what is owed.
type Episode struct {
	// Incarnation and Need identify the episode: a new incarnation or a
	// new need is a new episode.
	Incarnation string `json:"incarnation"`
	Need        Need   `json:"need"`
	// Since is when the need was first seen.
	Since time.Time `json:"since"`
	// FiredAt is when the notification was composed; nil while the
	// debounce runs.
	FiredAt *time.Time `json:"fired_at,omitempty"`
	// Message is what is sent, composed once when the episode fires.
	Message *Message `json:"message,omitempty"`
	// Channels holds, by channel name, the delivery of Message.
	Channels map[string]*Delivery `json:"channels,omitempty"`
}

// Fired reports whether the episode's notification was composed: the
// session shows `!`.
func (e *Episode) Fired() bool { return e != nil && e.FiredAt != nil }

// Evaluate is the episode decision for one session at now: need is what
// the session needs ("" when nothing), inc its incarnation, ep the
// current episode (nil when none), after the debounce. It returns the
// episode to keep (nil: none, the need is gone, and so is anything still
// owed of it) and whether it fires now. An episode fires once.
func Evaluate(need Need, inc string, ep *Episode, now time.Time, after time.Duration) (next *Episode, fire bool) {
	if need == "" {
		return nil, false
	}
	if ep == nil || ep.Incarnation != inc || ep.Need != need {
		ep = &Episode{Incarnation: inc, Need: need, Since: now}
	}
	if ep.FiredAt != nil || now.Sub(ep.Since) < after {
		return ep, false
	}
	return ep, true
}

// Due returns when the episode's next delivery attempt is due, and
// whether one is owed.
func (e *Episode) Due() (time.Time, bool) {
	if !e.Fired() {
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
