package config

import (
	"slices"
	"sync/atomic"
)

// Live holds the daemon's current configuration: a reload swaps it whole,
// and every reader sees one consistent Config.
type Live struct{ p atomic.Pointer[Config] }

// NewLive returns a Live holding c.
func NewLive(c *Config) *Live {
	l := &Live{}
	l.p.Store(c)
	return l
}

// Load returns the current configuration; it is never modified in place.
func (l *Live) Load() *Config { return l.p.Load() }

// Store makes c the current configuration.
func (l *Live) Store(c *Config) { l.p.Store(c) }

// Section is one table of herd.toml and whether a reload applies it to
// the running daemon.
type Section struct {
	Name string
	// Live: a reload applies it at once; otherwise the daemon must be
	// restarted for a change to take effect.
	Live bool
	// Why says why a section needs a restart.
	Why   string
	equal func(a, b *Config) bool
}

// Sections lists herd.toml's tables with how a reload treats each.
var Sections = []Section{
	{Name: "daemon", Why: "the host name keys every row this daemon owns", equal: func(a, b *Config) bool { return a.Daemon == b.Daemon }},
	{Name: "store", Why: "the store is opened once, at start", equal: func(a, b *Config) bool { return a.Store == b.Store }},
	{Name: "tmux", Why: "the tmux server and binary are bound at start", equal: func(a, b *Config) bool { return a.Tmux == b.Tmux }},
	{Name: "probe", Why: "the probe loop, its pid watchers and per-call timeouts are set up at start", equal: func(a, b *Config) bool { return a.Probe == b.Probe }},
	{Name: "restart", Live: true, equal: func(a, b *Config) bool { return a.Restart == b.Restart }},
	{Name: "watchdog", Live: true, equal: func(a, b *Config) bool { return a.Watchdog == b.Watchdog }},
	{Name: "reaper", Live: true, equal: func(a, b *Config) bool { return a.Reaper == b.Reaper }},
	{Name: "escalation", Live: true, equal: func(a, b *Config) bool { return equalEscalation(a.Escalation, b.Escalation) }},
	{Name: "notify", Live: true, equal: func(a, b *Config) bool { return a.Notify.Equal(b.Notify) }},
	{Name: "metrics", Why: "the metrics listener is opened at start", equal: func(a, b *Config) bool { return a.Metrics == b.Metrics }},
	{Name: "mcp", Live: true, equal: func(a, b *Config) bool {
		return slices.Equal(a.MCP.Roles, b.MCP.Roles) && slices.Equal(a.MCP.Verbs, b.MCP.Verbs)
	}},
	{Name: "auto_continue", Live: true, equal: func(a, b *Config) bool { return a.AutoContinue == b.AutoContinue }},
	{Name: "reactions", Live: true, equal: func(a, b *Config) bool { return a.Reactions == b.Reactions }},
	{Name: "prices", Live: true, equal: func(a, b *Config) bool { return equalPrices(a.Prices, b.Prices) }},
	{Name: "web", Why: "the console's listener is opened at start", equal: func(a, b *Config) bool { return a.Web.Equal(b.Web) }},
}

func equalPrices(a, b map[string]Price) bool {
	eq := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	if len(a) != len(b) {
		return false
	}
	for k, p := range a {
		q, ok := b[k]
		if !ok || !eq(p.Input, q.Input) || !eq(p.Output, q.Output) || !eq(p.CacheRead, q.CacheRead) || !eq(p.CacheWrite, q.CacheWrite) {
			return false
		}
	}
	return true
}

func equalEscalation(a, b Escalation) bool {
	if a.WaitingAfter != b.WaitingAfter || a.UnknownAfter != b.UnknownAfter || a.Webhook != b.Webhook || len(a.Command) != len(b.Command) {
		return false
	}
	for i := range a.Command {
		if a.Command[i] != b.Command[i] {
			return false
		}
	}
	return true
}

// Changed lists the sections that differ between old and new.
func Changed(old, new *Config) []Section {
	var out []Section
	for _, s := range Sections {
		if !s.equal(old, new) {
			out = append(out, s)
		}
	}
	return out
}
