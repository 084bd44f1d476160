package config

import (
	"strings"
	"testing"
	"time"
)

func TestAccountAndBudgetKeys(t *testing.T) {
	cfg, err := Parse([]byte(`
[auto_continue]
spacing = "30s"
jitter = "0s"

[[role]]
name = "worker"
command = ["claude"]
account = " team-a "
daily_budget_usd = 12.5
budget_hard = true

[[role]]
name = "plain"
command = ["claude"]
`), "herd.toml", "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AutoContinue != (AutoContinue{Spacing: 30 * time.Second}) {
		t.Errorf("[auto_continue] expected spacing 30s and no jitter, got %+v", cfg.AutoContinue)
	}
	if r := cfg.Roles[0]; r.Account != "team-a" || r.DailyBudgetUSD != 12.5 || !r.BudgetHard {
		t.Errorf("[worker] expected account team-a, budget 12.5, hard, got %q %v %v", r.Account, r.DailyBudgetUSD, r.BudgetHard)
	}
	if r := cfg.Roles[1]; r.Account != "" || r.DailyBudgetUSD != 0 || r.BudgetHard {
		t.Errorf("[plain] expected no account, no budget, got %q %v %v", r.Account, r.DailyBudgetUSD, r.BudgetHard)
	}
	if d := Default().AutoContinue; d != DefaultAutoContinue || d.Spacing <= 0 {
		t.Errorf("[default] expected the default stagger, got %+v", d)
	}
	for _, tc := range []struct{ doc, want string }{
		{"[[role]]\nname = \"x\"\ncommand = [\"sh\"]\ndaily_budget_usd = -1\n", `herd.toml:4: role "x": daily_budget_usd: must be 0 (no budget) or a positive amount`},
		{"[[role]]\nname = \"x\"\ncommand = [\"sh\"]\ndaily_budget_usd = \"5\"\n", "herd.toml:4"},
		{"[[role]]\nname = \"x\"\ncommand = [\"sh\"]\nbudget_hard = 1\n", "herd.toml:4"},
		{"[[role]]\nname = \"x\"\ncommand = [\"sh\"]\naccount = \"a\\nb\"\n", `herd.toml:4: role "x": account:`},
		{"[auto_continue]\nspacing = \"-1s\"\n", "herd.toml:2: auto_continue.spacing: must be 0"},
		{"[auto_continue]\njitter = \"soon\"\n", "herd.toml:2: auto_continue.jitter: invalid duration"},
		{"[auto_continue]\nspread = \"1s\"\n", "herd.toml:2"},
	} {
		_, err := Parse([]byte(tc.doc), "herd.toml", "/tmp")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("[%q] expected an error with %q, got %v", tc.doc, tc.want, err)
		}
	}
}

func TestAutoContinueReloadsLive(t *testing.T) {
	a, b := Default(), Default()
	b.AutoContinue.Spacing = time.Minute
	ch := Changed(a, b)
	if len(ch) != 1 || ch[0].Name != "auto_continue" || !ch[0].Live {
		t.Errorf("expected [auto_continue] changed and applied live, got %+v", ch)
	}
}
