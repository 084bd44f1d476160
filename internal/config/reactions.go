package config

import (
	"fmt"
	"slices"
	"time"
)

// Reactions is the [reactions] table: what herd does when a task's
// check fails, a person asks for changes or approves, its agent is
// stuck, or its branch no longer merges.
type Reactions struct {
	CheckFailed      Reaction
	ChangesRequested Reaction
	Approved         Reaction
	AgentStuck       Reaction
	Conflict         Reaction
}

// Of returns the reaction of kind (a herd.Reaction* name), the zero
// Reaction for an unknown kind.
func (r Reactions) Of(kind string) Reaction {
	switch kind {
	case "check_failed":
		return r.CheckFailed
	case "changes_requested":
		return r.ChangesRequested
	case "approved":
		return r.Approved
	case "agent_stuck":
		return r.AgentStuck
	case "conflict":
		return r.Conflict
	}
	return Reaction{}
}

// Reaction is one [reactions.KIND] table.
type Reaction struct {
	// Action is ReactionSend (the agent is told, and works on),
	// ReactionNotify (a person is needed at once) or ReactionLand
	// (approved only: the approval lands the task).
	Action string
	// Retries is how many times it is sent before a person is needed
	// (check_failed, agent_stuck).
	Retries int
	// EscalateAfter is how long what was sent may go unanswered (the
	// agent still at it, no turn ended with a commit) before a person is
	// needed; 0 waits as long as the agent works. For agent_stuck it is
	// also the wait between two nudges.
	EscalateAfter time.Duration
}

// Reaction actions.
const (
	ReactionSend   = "send"
	ReactionNotify = "notify"
	ReactionLand   = "land"
)

// DefaultCheckRetries is [reactions.check_failed] retries.
const DefaultCheckRetries = 2

// DefaultStuckWait is [reactions.agent_stuck] escalate_after: the wait
// after a nudge before the next one, or a person.
const DefaultStuckWait = 10 * time.Minute

// defaultReactions are the reactions of a config that names none.
func defaultReactions() Reactions {
	return Reactions{
		CheckFailed:      Reaction{Action: ReactionSend, Retries: DefaultCheckRetries},
		ChangesRequested: Reaction{Action: ReactionSend},
		Approved:         Reaction{Action: ReactionLand},
		AgentStuck:       Reaction{Action: ReactionNotify, Retries: 1, EscalateAfter: DefaultStuckWait},
		Conflict:         Reaction{Action: ReactionSend},
	}
}

// maxRetries bounds a reaction's retries.
const maxRetries = 100

type fileReactions struct {
	CheckFailed      fileReaction `toml:"check_failed"`
	ChangesRequested fileReaction `toml:"changes_requested"`
	Approved         fileReaction `toml:"approved"`
	AgentStuck       fileReaction `toml:"agent_stuck"`
	Conflict         fileReaction `toml:"conflict"`
}

type fileReaction struct {
	Action        *string `toml:"action"`
	Retries       *int    `toml:"retries"`
	EscalateAfter *string `toml:"escalate_after"`
}

// reactions decodes [reactions] over the defaults in c.
func (b *builder) reactions(c *Config, f fileReactions) {
	sendOrNotify := []string{ReactionSend, ReactionNotify}
	for _, r := range []struct {
		key     string
		dst     *Reaction
		src     fileReaction
		actions []string
		retries bool // retries apply
		wait    bool // escalate_after applies
		why     string
	}{
		{"reactions.check_failed", &c.Reactions.CheckFailed, f.CheckFailed, sendOrNotify, true, true, ""},
		{"reactions.changes_requested", &c.Reactions.ChangesRequested, f.ChangesRequested, sendOrNotify, false, true, ""},
		// A person's approval in herd is what lands a task.
		{"reactions.approved", &c.Reactions.Approved, f.Approved, []string{ReactionLand}, false, false,
			" (a person's approval in herd is what lands a task)"},
		{"reactions.agent_stuck", &c.Reactions.AgentStuck, f.AgentStuck, sendOrNotify, true, true, ""},
		{"reactions.conflict", &c.Reactions.Conflict, f.Conflict, sendOrNotify, false, true, ""},
	} {
		if a := r.src.Action; a != nil {
			if !slices.Contains(r.actions, *a) {
				b.fail(r.key+".action", "%s%s", notOneOf(*a, r.actions), r.why)
			} else {
				r.dst.Action = *a
			}
		}
		if n := r.src.Retries; n != nil {
			switch {
			case !r.retries:
				b.fail(r.key+".retries", "applies to check_failed and agent_stuck only")
			case *n < 0 || *n > maxRetries:
				b.fail(r.key+".retries", "%s", fmt.Sprintf("must be 0 to %d, got %d", maxRetries, *n))
			default:
				r.dst.Retries = *n
			}
		}
		if s := r.src.EscalateAfter; s != nil {
			key := r.key + ".escalate_after"
			switch {
			case !r.wait:
				b.fail(key, "applies to the reactions that send to the agent only")
			case r.dst == &c.Reactions.AgentStuck:
				// The wait between two nudges.
				b.positive(&r.dst.EscalateAfter, s, key)
			default:
				var d time.Duration
				if b.duration(&d, s, func(msg string) { b.fail(key, "%s", msg) }) {
					if d < 0 {
						b.fail(key, "must be 0 (never: a person only when the agent stops) or positive, got %q", *s)
					} else {
						r.dst.EscalateAfter = d
					}
				}
			}
		}
	}
}
