package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReactions(t *testing.T) {
	def, err := Parse(nil, "herd.toml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(defaultReactions(), def.Reactions); diff != "" {
		t.Errorf("[defaults] (-want +got):\n%s", diff)
	}
	cfg, err := Parse([]byte(`
[reactions.check_failed]
action = "notify"
retries = 5
escalate_after = "30m"
[reactions.changes_requested]
action = "notify"
[reactions.approved]
action = "land"
[reactions.agent_stuck]
action = "send"
retries = 3
escalate_after = "2m"
[reactions.conflict]
action = "notify"
escalate_after = "0s"
`), "herd.toml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	want := Reactions{
		CheckFailed:      Reaction{Action: "notify", Retries: 5, EscalateAfter: 30 * time.Minute},
		ChangesRequested: Reaction{Action: "notify"},
		Approved:         Reaction{Action: "land"},
		AgentStuck:       Reaction{Action: "send", Retries: 3, EscalateAfter: 2 * time.Minute},
		Conflict:         Reaction{Action: "notify"},
	}
	if diff := cmp.Diff(want, cfg.Reactions); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for kind, r := range map[string]Reaction{"check_failed": want.CheckFailed, "changes_requested": want.ChangesRequested,
		"approved": want.Approved, "agent_stuck": want.AgentStuck, "conflict": want.Conflict, "nonsense": {}} {
		if got := cfg.Reactions.Of(kind); got != r {
			t.Errorf("[Of %s] expected %+v, got %+v", kind, r, got)
		}
	}
	for _, c := range []struct{ doc, want string }{
		{"[reactions.check_failed]\naction = \"land\"\n", `reactions.check_failed.action: "land" is not one of send, notify`},
		{"[reactions.check_failed]\nretries = -1\n", "reactions.check_failed.retries: must be 0 to 100, got -1"},
		{"[reactions.agent_stuck]\nretries = 101\n", "reactions.agent_stuck.retries: must be 0 to 100, got 101"},
		{"[reactions.conflict]\nretries = 1\n", "reactions.conflict.retries: applies to check_failed and agent_stuck only"},
		{"[reactions.changes_requested]\nretries = 1\n", "reactions.changes_requested.retries: applies to check_failed and agent_stuck only"},
		{"[reactions.approved]\naction = \"notify\"\n", `reactions.approved.action: "notify" is not one of land (a person's approval in herd is what lands a task)`},
		{"[reactions.approved]\nescalate_after = \"5m\"\n", "reactions.approved.escalate_after: applies to the reactions that send to the agent only"},
		{"[reactions.check_failed]\nescalate_after = \"soon\"\n", `reactions.check_failed.escalate_after: invalid duration "soon"`},
		{"[reactions.conflict]\nescalate_after = \"-1m\"\n", `reactions.conflict.escalate_after: must be 0 (never: a person only when the agent stops) or positive, got "-1m"`},
		{"[reactions.agent_stuck]\nescalate_after = \"0s\"\n", `reactions.agent_stuck.escalate_after: must be positive, got "0s"`},
		{"[reactions.agent_stuck]\nwhen = 1\n", "reactions.agent_stuck.when: unknown key"},
		{"[reactions.review]\naction = \"send\"\n", "reactions.review: unknown key"},
	} {
		_, err := Parse([]byte(c.doc), "herd.toml", "/base")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("[%q] expected %q, got %v", c.doc, c.want, err)
		}
	}
}
