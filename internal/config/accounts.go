package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"herd"
)

// AutoContinue is the [auto_continue] table: how the sessions of an
// account blocked by one rate limit are continued when it resets.
type AutoContinue struct {
	// Spacing separates the sessions of one account continued after one
	// reset: the first at the reset, the next Spacing later, and so on,
	// so they do not all hit the fresh window at once.
	Spacing time.Duration
	// Jitter adds up to this much to each session's turn (0: none).
	Jitter time.Duration
}

// DefaultAutoContinue is [auto_continue] when absent.
var DefaultAutoContinue = AutoContinue{Spacing: 10 * time.Second, Jitter: 2 * time.Second}

type fileAutoCont struct {
	Spacing *string `toml:"spacing"`
	Jitter  *string `toml:"jitter"`
}

// autoContinue overlays the [auto_continue] keys of f on c.AutoContinue.
func (b *builder) autoContinue(c *Config, f fileAutoCont) {
	b.nonNegative(&c.AutoContinue.Spacing, f.Spacing, "auto_continue.spacing")
	b.nonNegative(&c.AutoContinue.Jitter, f.Jitter, "auto_continue.jitter")
}

// roleSpend decodes a role's account and budget keys into r.
func roleSpend(r *herd.Role, f fileRole) {
	set(&r.Account, f.Account)
	r.Account = strings.TrimSpace(r.Account)
	set(&r.DailyBudgetUSD, f.DailyBudgetUSD)
	set(&r.BudgetHard, f.BudgetHard)
}

// spendProblems checks a role's account and budget keys.
func spendProblems(r herd.Role) []problem {
	var probs []problem
	if b := r.DailyBudgetUSD; b < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
		probs = append(probs, problem{[]string{"daily_budget_usd"}, fmt.Sprintf("must be 0 (no budget) or a positive amount, got %v", b)})
	}
	if len(r.Account) > 200 || strings.ContainsAny(r.Account, "\x00\n") {
		probs = append(probs, problem{[]string{"account"}, fmt.Sprintf("%q must be one line of at most 200 bytes", r.Account)})
	}
	return probs
}
