package accounts

import (
	"testing"
	"time"

	"herd"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		role herd.Role
		want string
	}{
		{"nothing set", herd.Role{Agent: herd.AgentClaude}, Default},
		{"named", herd.Role{Agent: herd.AgentClaude, Account: " team ", Env: map[string]string{"CLAUDE_CONFIG_DIR": "/c"}}, "team"},
		{"claude config dir", herd.Role{Agent: herd.AgentClaude, Env: map[string]string{"CLAUDE_CONFIG_DIR": "/home/u/.claude-b/"}}, "/home/u/.claude-b"},
		{"codex home", herd.Role{Agent: herd.AgentCodex, Env: map[string]string{"CODEX_HOME": "/x/codex"}}, "/x/codex"},
		{"gemini home", herd.Role{Agent: herd.AgentGemini, Env: map[string]string{"GEMINI_CLI_HOME": "/g"}}, "/g"},
		{"another agent's variable is not claude's", herd.Role{Agent: herd.AgentClaude, Env: map[string]string{"CODEX_HOME": "/x"}}, Default},
		{"a home of its own", herd.Role{Agent: herd.AgentCodex, Env: map[string]string{"HOME": "/h"}}, "/h/.codex"},
		{"the config dir wins over home", herd.Role{Agent: herd.AgentClaude, Env: map[string]string{"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}}, "/c"},
		{"generic: any agent's variable", herd.Role{Agent: herd.AgentGeneric, Env: map[string]string{"CODEX_HOME": "/x"}}, "/x"},
		{"generic: home", herd.Role{Agent: herd.AgentGeneric, Env: map[string]string{"HOME": "/h"}}, "/h"},
		{"blank variable", herd.Role{Agent: herd.AgentClaude, Env: map[string]string{"CLAUDE_CONFIG_DIR": "  "}}, Default},
	} {
		if got := Of(tc.role); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}

func TestShares(t *testing.T) {
	a := herd.Role{Agent: herd.AgentClaude, Account: "team"}
	for _, tc := range []struct {
		name string
		b    herd.Role
		want bool
	}{
		{"same account and kind", herd.Role{Agent: herd.AgentClaude, Account: "team"}, true},
		{"another account", herd.Role{Agent: herd.AgentClaude, Account: "other"}, false},
		{"same name, another provider", herd.Role{Agent: herd.AgentCodex, Account: "team"}, false},
		{"derived the same", herd.Role{Agent: herd.AgentClaude, Env: map[string]string{"CLAUDE_CONFIG_DIR": "team"}}, true},
	} {
		if got := Shares(a, tc.b); got != tc.want {
			t.Errorf("[%s] expected %v, got %v", tc.name, tc.want, got)
		}
	}
}

func TestResolver(t *testing.T) {
	roles := map[string]herd.Role{"w": {Name: "w", Agent: herd.AgentClaude, Env: map[string]string{"CLAUDE_CONFIG_DIR": "/c"}}}
	r := Resolver{Roles: func(n string) (herd.Role, bool) { ro, ok := roles[n]; return ro, ok }}
	if got := r.AccountOf("w"); got != "/c" {
		t.Errorf("[known] expected /c, got %q", got)
	}
	if got := r.AccountOf("gone"); got != Default {
		t.Errorf("[unknown] expected %q, got %q", Default, got)
	}
	if got := (Resolver{}).AccountOf("w"); got != Default {
		t.Errorf("[no roles] expected %q, got %q", Default, got)
	}
}

func TestTurn(t *testing.T) {
	reset := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		last           time.Time
		spacing        time.Duration
		wantBase       time.Time
		jitter         time.Duration
		wantAtAfterMax time.Duration // at is in [base, base+this)
	}{
		{"first of the account", time.Time{}, 10 * time.Second, reset, 0, 0},
		{"after one at the reset", reset, 10 * time.Second, reset.Add(10 * time.Second), 0, 0},
		{"after one long ago", reset.Add(-time.Hour), 10 * time.Second, reset, 0, 0},
		{"after one still to come", reset.Add(25 * time.Second), 10 * time.Second, reset.Add(35 * time.Second), 0, 0},
		{"no spacing", reset, 0, reset, 0, 0},
		{"jitter", reset, 10 * time.Second, reset.Add(10 * time.Second), 3 * time.Second, 3 * time.Second},
	} {
		base, at := Turn(reset, tc.last, tc.spacing, tc.jitter, "42")
		if !base.Equal(tc.wantBase) {
			t.Errorf("[%s] expected base %s, got %s", tc.name, tc.wantBase, base)
		}
		if at.Before(base) || (tc.wantAtAfterMax == 0 && !at.Equal(base)) || (tc.wantAtAfterMax > 0 && !at.Before(base.Add(tc.wantAtAfterMax))) {
			t.Errorf("[%s] expected at in [%s, +%s), got %s", tc.name, base, tc.wantAtAfterMax, at)
		}
	}
	// The jitter is fixed by the seed and spread by it.
	a, b := Jitter(time.Second, Seed(1)), Jitter(time.Second, Seed(1))
	if a != b || a < 0 || a >= time.Second {
		t.Errorf("[jitter] expected the same jitter in [0, 1s) for the same seed, got %s and %s", a, b)
	}
	seen := map[time.Duration]bool{}
	for i := range 20 {
		seen[Jitter(time.Second, Seed(int64(i)))] = true
	}
	if len(seen) < 10 {
		t.Errorf("[jitter] expected jitters spread over seeds, got %d distinct of 20", len(seen))
	}
}

func TestHolds(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	spacing := 10 * time.Second
	h := NewHolds(func() time.Duration { return spacing })
	a := herd.Role{Agent: herd.AgentClaude, Account: "team"}
	if until, _ := h.LaunchHeld(a, now); !until.IsZero() {
		t.Fatalf("[empty] expected no hold, got %s", until)
	}
	reset := now.Add(time.Minute)
	h.Block(a, reset)
	h.Block(a, now.Add(time.Second)) // an earlier reset does not shorten it
	if until, why := h.LaunchHeld(herd.Role{Agent: herd.AgentClaude, Account: "team", Name: "other"}, now); !until.Equal(reset) || why == "" {
		t.Errorf("[same account] expected held a minute, got %s %q", until, why)
	}
	if until, _ := h.LaunchHeld(herd.Role{Agent: herd.AgentCodex, Account: "team"}, now); !until.IsZero() {
		t.Errorf("[other kind] expected no hold, got %s", until)
	}
	if until, _ := h.LaunchHeld(herd.Role{Agent: herd.AgentClaude}, now); !until.IsZero() {
		t.Errorf("[other account] expected no hold, got %s", until)
	}
	// The ramp after the reset: one launch per spacing.
	for i, step := range []struct {
		at   time.Duration // after the reset
		want time.Duration // held until reset + this; -1: goes
	}{
		{0, -1}, {0, spacing}, {time.Second, spacing}, {spacing, -1}, {spacing + time.Second, 2 * spacing},
		{2 * spacing, -1},
		// A spacing with no launch: the ramp is over, launches go freely.
		{4*spacing + time.Second, -1}, {4*spacing + time.Second, -1},
	} {
		until, _ := h.LaunchHeld(a, reset.Add(step.at))
		if (step.want < 0 && !until.IsZero()) || (step.want >= 0 && !until.Equal(reset.Add(step.want))) {
			t.Errorf("[ramp %d at +%s] expected held until +%s (-1: goes), got %s", i, step.at, step.want, until)
		}
	}
	// Without a spacing the launches go together at the reset.
	h = NewHolds(nil)
	h.Block(a, reset)
	for range 3 {
		if until, _ := h.LaunchHeld(a, reset); !until.IsZero() {
			t.Errorf("[no spacing] expected every launch at the reset, got held until %s", until)
		}
	}
}
