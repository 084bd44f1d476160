package agents

import "herd"

// clearLines is how many lines of leftover input ClearKeys empties.
const clearLines = 4

// ClearKeys returns the tmux key names that empty kind's input line before
// herd types into it, nil when herd does not know what would (generic: a
// key means what the program makes of it).
//
// Claude Code, Codex and Gemini CLI all read C-e as "end of line" and C-u
// as "delete to the start of the line"; on an empty line C-u deletes the
// line break before it, so two presses per line empty a multi-line input
// from its last line. Neither key interrupts a running turn or opens a
// menu on an empty input, unlike Escape (interrupts; twice opens Claude's
// rewind menu) and C-c (twice exits). Verified on the real Claude Code:
// the prompt an Esc puts back in the input line is gone.
func ClearKeys(kind string) []string {
	switch kind {
	case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
		keys := []string{"C-e"}
		for range 2*clearLines - 1 {
			keys = append(keys, "C-u")
		}
		return keys
	}
	return nil
}
