package agents

import (
	"testing"
	"time"

	"herd"
)

// FuzzParseHook: any payload an agent's hook sends is parsed or refused
// with an error, never a panic, for every agent kind.
func FuzzParseHook(f *testing.F) {
	for _, s := range []string{`{"hook_event_name":"PreToolUse","tool_name":"Bash","session_id":"0f8fad5b-d9cb-469f-a165-70867728950e"}`,
		`{"hook_event_name":"Notification","message":"Claude needs your permission"}`, `{"type":"agent-turn-complete"}`, `[]`, `null`, "\xff",
		`{"hook_event_name":"SessionStart","transcript_path":"../../etc/passwd","cwd":7}`} {
		f.Add(s)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, in string) {
		for _, kind := range []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini, herd.AgentGeneric} {
			ParseHook(kind, []byte(in), "", now)
		}
	})
}
