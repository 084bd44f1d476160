// Package usage reads what agents record of their own token use (Claude
// Code transcripts and stream-json results, Codex rollouts and exec
// events, Gemini CLI chat files and stream-json results), prices it, and keeps the
// ledger: per incarnation, read incrementally, rolled up on demand. The
// daemon runs the Ledger; the parsers and the price table are pure. It
// never touches a session or an incarnation: it only adds usage rows and
// reading cursors to the store.
package usage

import (
	"strings"
	"time"
)

// Tokens is a count of tokens by kind. Input excludes what was read from
// or written to the prompt cache, which CacheRead and CacheWrite count.
type Tokens struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_tokens"`
	CacheWrite int64 `json:"cache_write_tokens"`
}

// Add returns t plus o.
func (t Tokens) Add(o Tokens) Tokens {
	return Tokens{t.Input + o.Input, t.Output + o.Output, t.CacheRead + o.CacheRead, t.CacheWrite + o.CacheWrite}
}

// Zero reports whether t counts nothing.
func (t Tokens) Zero() bool { return t == Tokens{} }

// sub returns t minus o, each count at least 0.
func (t Tokens) sub(o Tokens) Tokens {
	d := func(a, b int64) int64 { return max(a-b, 0) }
	return Tokens{d(t.Input, o.Input), d(t.Output, o.Output), d(t.CacheRead, o.CacheRead), d(t.CacheWrite, o.CacheWrite)}
}

// Record is usage read from an agent's file: tokens of one model and,
// when the agent reported it, what they cost.
type Record struct {
	Model  string
	Tokens Tokens
	// Cost is the agent's own figure in USD, valid when HasCost.
	Cost    float64
	HasCost bool
	// At is when the agent recorded it; zero when the line has no time.
	At time.Time
}

// Totals is usage summed: the JSON `usage` object of a session.
type Totals struct {
	Tokens
	CostUSD float64 `json:"cost_usd"`
}

// Add returns t plus o.
func (t Totals) Add(o Totals) Totals {
	return Totals{Tokens: t.Tokens.Add(o.Tokens), CostUSD: t.CostUSD + o.CostUSD}
}

// NormalModel is the name a model is recorded and priced under: the
// agent's name without decorations such as Claude Code's context-window
// suffix ("claude-opus-4-8[1m]" -> "claude-opus-4-8"); "unknown" when
// the agent did not say.
func NormalModel(m string) string {
	m = strings.TrimSpace(m)
	if i := strings.IndexByte(m, '['); i > 0 {
		m = m[:i]
	}
	if i := strings.LastIndexByte(m, '/'); i >= 0 { // "models/gemini-2.5-pro", "openai/gpt-5"
		m = m[i+1:]
	}
	if m == "" {
		return UnknownModel
	}
	return strings.ToLower(m)
}

// UnknownModel is the model of usage whose agent did not name it.
const UnknownModel = "unknown"
