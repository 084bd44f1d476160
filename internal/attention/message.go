package attention

import (
	"fmt"
	"strings"
	"time"

	"herd"
)

// Message is one notification: which session, what it needs, and the
// command that acts on it.
type Message struct {
	Session     string `json:"session"`
	Role        string `json:"role"`
	Host        string `json:"host"`
	Incarnation string `json:"incarnation"`
	Need        Rule   `json:"need"`
	// Reason is the need's cause in one machine word: permission_prompt,
	// startup_prompt, rate_limited, api_error, stalled, or the exit's
	// reason.
	Reason string `json:"reason"`
	// Title is one line: "worker-0 needs permission".
	Title string `json:"title"`
	// Body says what it needs, in a few lines.
	Body string `json:"body"`
	// Action is the command to act: herd attach|restart NAME.
	Action string `json:"action"`
	// ResetAt is when a rate limit resets, when named.
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Since is when the need began.
	Since time.Time `json:"since"`
}

// Escalation returns the message and data of the escalated event an
// episode of rule r fires at now.
func Escalation(r Rule, ep Episode, threshold time.Duration, now time.Time) (string, map[string]any) {
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

// Cause is what the event log says about a need: the session's last
// activity event (waiting, blocked) or stalled event.
type Cause struct {
	// Reason and Message of the event; Data its data.
	Reason  string
	Message string
	Data    map[string]any
}

// Compose writes the notification of need for session s; cause is the
// event that explains it (zero when none is found).
func Compose(s herd.Session, need Rule, cause Cause, since time.Time) Message {
	m := Message{
		Session: s.Name, Role: s.Role, Host: s.Host, Incarnation: s.Incarnation,
		Need: need, Since: since.UTC(),
	}
	attach := "herd attach " + s.Name
	if s.RuntimeKind == herd.RuntimeExec {
		attach = "herd logs " + s.Name // an exec agent has no pane to attach to
	}
	switch need {
	case RuleWaiting:
		m.Action = attach
		if cause.Reason == "startup_prompt" || str(cause.Data, "reason") == "startup_prompt" {
			m.Reason = "startup_prompt"
			m.Title = s.Name + " waits at a startup prompt"
			m.Body = "The agent shows a startup dialog (trust, login or onboarding) and waits for an answer."
			break
		}
		m.Reason = "permission_prompt"
		m.Title = s.Name + " needs permission"
		m.Body = "The agent asks for permission"
		if tool := str(cause.Data, "tool"); tool != "" {
			m.Body += " to use " + tool
		}
		m.Body += " and waits for an answer."
	case RuleBlocked:
		m.Action = attach
		m.Reason = cause.Reason
		if m.Reason == "" || m.Reason == "hook" {
			m.Reason = "api_error"
		}
		if m.Reason == "rate_limited" {
			m.Title = s.Name + " is rate limited"
		} else {
			m.Title = s.Name + " is blocked by an API error"
		}
		m.Body = "The agent's turn ended"
		if e := str(cause.Data, "error"); e != "" {
			m.Body += ": " + clip(e, 300)
		}
		m.Body += "."
		if t, err := time.Parse(time.RFC3339, str(cause.Data, "reset_at")); err == nil {
			t = t.UTC()
			m.ResetAt = &t
			m.Body += " The limit resets at " + t.Format("15:04 MST") + "."
		}
	case RuleStalled:
		m.Action = "herd restart " + s.Name
		m.Reason = "stalled"
		m.Title = s.Name + " is stalled"
		m.Body = "The agent is alive but silent in a turn"
		if cause.Message != "" {
			m.Body += ": " + clip(cause.Message, 300)
		}
		m.Body += ". Look with: " + attach + "."
	case RuleFailed:
		m.Action = "herd restart " + s.Name
		m.Reason = "failed"
		m.Title = s.Name + " failed"
		m.Body = "The session will not be relaunched (restart budget spent, or the policy forbids it)."
		if s.Exit != nil {
			m.Reason = s.Exit.Reason
			m.Body = "Last exit: " + s.Exit.Brief() + ". " + m.Body
		}
	}
	return m
}

// Text is the message as plain lines: body, then the command to act.
func (m Message) Text() string {
	return m.Body + "\nRun: " + m.Action
}

// Priority is how urgent the message is, 1 (min) to 5 (max), as ntfy
// counts: a person's answer unblocks waiting and failed sessions.
func (m Message) Priority() int {
	switch m.Need {
	case RuleWaiting, RuleFailed:
		return 4
	}
	return 3
}

// str reads a string from event data.
func str(data map[string]any, key string) string {
	s, _ := data[key].(string)
	return s
}

// clip bounds s to n bytes.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
