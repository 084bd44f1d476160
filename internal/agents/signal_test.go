package agents

import (
	"testing"

	"herd"
)

// TestApplyToolLifetime: the tool lives as long as its turn; LastTool
// outlives it.
func TestApplyToolLifetime(t *testing.T) {
	inTurn := State{Activity: herd.ActivityWorking, Tool: "Bash", LastTool: "Bash"}
	cases := []struct {
		name           string
		prev           State
		sig            Signal
		tool, lastTool string
	}{
		{"a tool names itself", State{}, Signal{Event: HookPreToolUse, Activity: herd.ActivityWorking, InTool: true, Tool: "Bash"}, "Bash", "Bash"},
		{"a tool-less event in the turn keeps it", inTurn, Signal{Event: GeminiAfterModel, Activity: herd.ActivityWorking}, "Bash", "Bash"},
		{"a notification keeps it", inTurn, Signal{Event: HookNotification}, "Bash", "Bash"},
		{"Stop clears it", inTurn, Signal{Event: HookStop, Activity: herd.ActivityIdle}, "", "Bash"},
		{"AfterAgent clears it", inTurn, Signal{Event: GeminiAfterAgent, Activity: herd.ActivityIdle}, "", "Bash"},
		{"a blocked turn clears it", inTurn, Signal{Event: HookStopFailure, Activity: herd.ActivityBlocked}, "", "Bash"},
		{"a new prompt clears it", inTurn, Signal{Event: HookUserPromptSubmit, Activity: herd.ActivityWorking}, "", "Bash"},
		{"Gemini's new prompt clears it", inTurn, Signal{Event: GeminiBeforeAgent, Activity: herd.ActivityWorking}, "", "Bash"},
		{"the session ending clears it", inTurn, Signal{Event: HookSessionEnd, Activity: herd.ActivityIdle, Ended: true}, "", "Bash"},
	}
	for _, c := range cases {
		got := Apply(c.prev, c.sig)
		if got.Tool != c.tool || got.LastTool != c.lastTool {
			t.Errorf("[%s] expected tool %q, last tool %q, got %q, %q", c.name, c.tool, c.lastTool, got.Tool, got.LastTool)
		}
	}
}
