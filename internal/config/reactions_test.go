package config

import (
	"strings"
	"testing"
)

func TestReactions(t *testing.T) {
	cfg, err := Parse([]byte("[reactions.check_failed]\naction = \"notify\"\nretries = 5\n[reactions.conflict]\naction = \"notify\"\n"), "herd.toml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reactions{CheckFailed: Reaction{Action: "notify", Retries: 5}, Conflict: Reaction{Action: "notify"}}); cfg.Reactions != want {
		t.Errorf("expected %+v, got %+v", want, cfg.Reactions)
	}
	for _, c := range []struct{ doc, want string }{
		{"[reactions.check_failed]\naction = \"land\"\n", `reactions.check_failed.action: "land" is not one of send, notify`},
		{"[reactions.check_failed]\nretries = -1\n", "reactions.check_failed.retries: must be 0 to 100, got -1"},
		{"[reactions.conflict]\nretries = 1\n", "reactions.conflict.retries: applies to check_failed only"},
		{"[reactions.approved]\naction = \"land\"\n", "reactions.approved: unknown key"},
	} {
		_, err := Parse([]byte(c.doc), "herd.toml", "/base")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("[%q] expected %q, got %v", c.doc, c.want, err)
		}
	}
}
