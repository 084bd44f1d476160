package agents

import (
	"slices"
	"testing"

	"herd"
)

func TestClearKeys(t *testing.T) {
	for _, kind := range []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini} {
		keys := ClearKeys(kind)
		if len(keys) < 2 || keys[0] != "C-e" || slices.Contains(keys, "Escape") || slices.Contains(keys, "C-c") {
			t.Errorf("[%s] expected C-e then C-u presses, never Escape or C-c, got %q", kind, keys)
		}
	}
	if keys := ClearKeys(herd.AgentGeneric); keys != nil {
		t.Errorf("[generic] expected no keys, got %q", keys)
	}
}
