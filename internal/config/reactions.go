package config

import "fmt"

// Reactions is the [reactions] table: what herd does when a task's
// check fails or its branch no longer merges.
type Reactions struct {
	CheckFailed Reaction
	Conflict    Reaction
}

// Reaction is one [reactions.KIND] table.
type Reaction struct {
	// Action is ReactionSend (the agent is told, and works on) or
	// ReactionNotify (a person is needed at once).
	Action string
	// Retries is how many times it is sent before a person is needed
	// (check_failed).
	Retries int
}

// Reaction actions.
const (
	ReactionSend   = "send"
	ReactionNotify = "notify"
)

// DefaultCheckRetries is [reactions.check_failed] retries.
const DefaultCheckRetries = 2

// maxRetries bounds a reaction's retries.
const maxRetries = 100

type fileReactions struct {
	CheckFailed fileReaction `toml:"check_failed"`
	Conflict    fileReaction `toml:"conflict"`
}

type fileReaction struct {
	Action  *string `toml:"action"`
	Retries *int    `toml:"retries"`
}

// reactions decodes [reactions] over the defaults in c.
func (b *builder) reactions(c *Config, f fileReactions) {
	for _, r := range []struct {
		key  string
		dst  *Reaction
		src  fileReaction
		more bool // retries apply
	}{
		{"reactions.check_failed", &c.Reactions.CheckFailed, f.CheckFailed, true},
		{"reactions.conflict", &c.Reactions.Conflict, f.Conflict, false},
	} {
		if a := r.src.Action; a != nil {
			if *a != ReactionSend && *a != ReactionNotify {
				b.fail(r.key+".action", "%s", notOneOf(*a, []string{ReactionSend, ReactionNotify}))
			} else {
				r.dst.Action = *a
			}
		}
		if n := r.src.Retries; n != nil {
			switch {
			case !r.more:
				b.fail(r.key+".retries", "applies to check_failed only")
			case *n < 0 || *n > maxRetries:
				b.fail(r.key+".retries", "%s", fmt.Sprintf("must be 0 to %d, got %d", maxRetries, *n))
			default:
				r.dst.Retries = *n
			}
		}
	}
}
