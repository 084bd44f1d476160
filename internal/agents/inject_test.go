package agents

import (
	"slices"
	"strings"
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

// TestInputHolds reads the input line of real captures (typed and not yet
// sent; sent, the prompt in the history above an empty input line) and of
// drawn ones.
// checkText is a check's failure as herd types it into an agent.
const checkText = "The check of task t-1 (sh -c grep -qx hello greeting.txt || { echo 'herd-tool: greeting.txt must say hello'; exit 1; }) failed: exited with 1. The end of its output:\n\nherd-tool: greeting.txt must say hello\n\nFix the cause and commit the fix on this branch."

func TestInputHolds(t *testing.T) {
	rule := strings.Repeat("─", 40)
	fixture := func(path string) string { return string(readFixture(t, path)) }
	tests := []struct {
		name, kind, screen, text string
		holds, known             bool
	}{
		{"gemini typed (real)", herd.AgentGemini, fixture("gemini/0.61.0/screen-typed.txt"), "please herd-hang", true, true},
		{"gemini sent (real)", herd.AgentGemini, fixture("gemini/0.61.0/screen-submitted.txt"), "please herd-hang", false, true},
		{"gemini idle (real)", herd.AgentGemini, fixture("gemini/0.61.0/screen-idle.txt"), "please herd-hang", false, true},
		{"codex sent (real)", herd.AgentCodex, fixture("codex/0.171.0/screen-submitted.txt"), "please herd-hang", false, true},
		{"codex typed", herd.AgentCodex, "› say hello\n\n• OK\n\n› please herd-hang\n\n  gpt-mock default · /home/user/proj\n", "please herd-hang", true, true},
		{"claude typed", herd.AgentClaude, "❯ earlier\n\n● ok\n\n" + rule + "\n❯ fix the bug\n" + rule + "\n  ? for shortcuts\n", "fix the bug", true, true},
		{"claude sent", herd.AgentClaude, "❯ fix the bug\n\n✶ Thinking…\n\n" + rule + "\n❯ \n" + rule + "\n  ? for shortcuts\n", "fix the bug", false, true},
		{"wrapped by the agent", herd.AgentGemini, " > please look at the file and\n   then fix the bug\n", "please look at the file and then fix the bug", true, true},
		{"only the end is looked for", herd.AgentCodex, "› …that goes on and on and ends here\n", strings.Repeat("a long text ", 20) + "that goes on and on and ends here", true, true},
		{"a newline Gemini took for Enter", herd.AgentGemini, " > please herd-hang\n  \n", "please herd-hang", true, true},
		{"gemini yolo, several lines pasted (real)", herd.AgentGemini, fixture("gemini/0.61.0/screen-yolo-pasted.txt"), checkText, true, true},
		{"gemini yolo, several lines sent (real)", herd.AgentGemini, fixture("gemini/0.61.0/screen-yolo-idle.txt"), checkText, false, false},
		{"gemini yolo, one line typed", herd.AgentGemini, " * please herd-hang\n workspace (/directory)\n", "please herd-hang", true, true},
		{"too short to tell", herd.AgentCodex, "› 1\n", "1", false, false},
		{"several lines", herd.AgentCodex, "› [Pasted Content 1200 chars]\n", "one\ntwo\nthree", false, false},
		{"no input line (a dialog)", herd.AgentGemini, "Allow execution of: 'ls'?\n● 1. Allow once\n", "allow it", false, false},
		{"generic", herd.AgentGeneric, "$ please herd-hang\n", "please herd-hang", false, false},
	}
	for _, tc := range tests {
		holds, known := InputHolds(tc.kind, tc.screen, tc.text)
		if holds != tc.holds || known != tc.known {
			t.Errorf("[%s] expected holds=%v known=%v, got %v %v", tc.name, tc.holds, tc.known, holds, known)
		}
	}
}

func TestSubmitSettle(t *testing.T) {
	if d := SubmitSettle(herd.AgentGemini); d <= geminiFastReturn {
		t.Errorf("[gemini] expected more than its fast-return window %v, got %v", geminiFastReturn, d)
	}
	if d := SubmitSettle(herd.AgentClaude); d != 0 {
		t.Errorf("[claude] expected no wait, got %v", d)
	}
}
