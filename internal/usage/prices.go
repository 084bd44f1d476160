package usage

import (
	"strings"

	"herd/internal/config"
)

// PricesDated is the day the embedded price table was last checked
// against the vendors' published list prices.
const PricesDated = "2026-11-01"

// Price is what a model's tokens cost, in USD per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Cost returns what t costs at p, in USD.
func (p Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.Output)*p.Output +
		float64(t.CacheRead)*p.CacheRead + float64(t.CacheWrite)*p.CacheWrite) / 1e6
}

// DefaultPrices are the list prices of current models, keyed by model
// name or name prefix (the longest prefix of a model's name wins):
// standard tier, prompts under the long-context threshold, 5-minute cache
// writes. OpenAI and Google charge no cache writes apart (written tokens
// cost as input).
var DefaultPrices = map[string]Price{
	// Anthropic.
	"claude-opus":        {5, 25, 0.50, 6.25}, // Opus 4.5 to 4.8, and later ones not listed
	"claude-opus-5-5":    {4, 20, 0.20, 5},    // as Claude Code 2.1.332 prices it
	"claude-opus-4-0":    {15, 75, 1.50, 18.75},
	"claude-opus-4-1":    {15, 75, 1.50, 18.75},
	"claude-opus-4-2025": {15, 75, 1.50, 18.75}, // claude-opus-4-20250514
	"claude-3-opus":      {15, 75, 1.50, 18.75},
	"claude-sonnet":      {3, 15, 0.30, 3.75},
	"claude-3-5-sonnet":  {3, 15, 0.30, 3.75},
	"claude-3-7-sonnet":  {3, 15, 0.30, 3.75},
	"claude-haiku":       {1, 5, 0.10, 1.25}, // Haiku 4.5 and later
	"claude-3-5-haiku":   {0.80, 4, 0.08, 1},
	"claude-3-haiku":     {0.25, 1.25, 0.03, 0.30},
	// OpenAI.
	"gpt-5":        {1.25, 10, 0.125, 1.25},
	"gpt-5-mini":   {0.25, 2, 0.025, 0.25},
	"gpt-5-nano":   {0.05, 0.40, 0.005, 0.05},
	"gpt-5-pro":    {15, 120, 15, 15},
	"gpt-4.1":      {2, 8, 0.50, 2},
	"gpt-4.1-mini": {0.40, 1.60, 0.10, 0.40},
	"gpt-4.1-nano": {0.10, 0.40, 0.025, 0.10},
	"gpt-4o":       {2.50, 10, 1.25, 2.50},
	"gpt-4o-mini":  {0.15, 0.60, 0.075, 0.15},
	"o3":           {2, 8, 0.50, 2},
	"o4-mini":      {1.10, 4.40, 0.275, 1.10},
	"codex-mini":   {1.50, 6, 0.375, 1.50},
	// Google.
	"gemini-3-pro":          {2, 12, 0.20, 2},
	"gemini-2.5-pro":        {1.25, 10, 0.125, 1.25},
	"gemini-2.5-flash":      {0.30, 2.50, 0.03, 0.30},
	"gemini-2.5-flash-lite": {0.10, 0.40, 0.01, 0.10},
	"gemini-2.0-flash":      {0.10, 0.40, 0.025, 0.10},
}

// Prices is a price table: exact names and prefixes, longest match wins.
type Prices map[string]Price

// NewPrices returns DefaultPrices with overrides laid over them (a key
// of overrides replaces the default of the same key).
func NewPrices(overrides map[string]Price) Prices {
	p := make(Prices, len(DefaultPrices)+len(overrides))
	for k, v := range DefaultPrices {
		p[k] = v
	}
	for k, v := range overrides {
		p[strings.ToLower(k)] = v
	}
	return p
}

// Lookup returns the price of model: the entry whose key is the longest
// prefix of the model's normal name. ok is false when none matches.
func (p Prices) Lookup(model string) (price Price, key string, ok bool) {
	m := NormalModel(model)
	for k, v := range p {
		if strings.HasPrefix(m, k) && len(k) > len(key) {
			price, key, ok = v, k, true
		}
	}
	return price, key, ok
}

// Cost returns what r cost: the agent's own figure when it gave one,
// else the table's price of its tokens (0 for a model it does not know).
func (p Prices) Cost(r Record) float64 {
	if r.HasCost {
		return r.Cost
	}
	price, _, _ := p.Lookup(r.Model)
	return price.Cost(r.Tokens)
}

// PricesFrom returns the default table with the [prices] overrides laid
// over it: a price an entry leaves out is the one the default table
// gives that key.
func PricesFrom(over map[string]config.Price) Prices {
	out := make(map[string]Price, len(over))
	def := Prices(DefaultPrices)
	for k, o := range over {
		p, _, _ := def.Lookup(k)
		for _, f := range []struct {
			v   *float64
			dst *float64
		}{{o.Input, &p.Input}, {o.Output, &p.Output}, {o.CacheRead, &p.CacheRead}, {o.CacheWrite, &p.CacheWrite}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
		out[k] = p
	}
	return NewPrices(out)
}
