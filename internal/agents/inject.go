package agents

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"herd"
)

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

// geminiFastReturn is Gemini CLI's FAST_RETURN_TIMEOUT (0.61.0): an Enter
// read within it of a typed key is a newline in the input, not a
// submission, unless the terminal speaks the kitty keyboard protocol
// (tmux does not).
const geminiFastReturn = 30 * time.Millisecond

// SubmitSettle is how long Enter waits, after the pane has shown the
// typed text, for kind to read it as a submission: Gemini CLI's
// fast-return window with room for its clock and event loop (the pane
// shows the text once the agent has read the keys, so the window runs
// from a moment before). Claude Code and Codex tell a paste from typing
// by keys arriving together; the wait for the pane to show the text is
// enough for them.
func SubmitSettle(kind string) time.Duration {
	if kind == herd.AgentGemini {
		return 3 * geminiFastReturn
	}
	return 0
}

// minNeedle is the fewest non-blank characters of typed text that
// InputHolds looks for: a shorter text ("1", "y") can show anywhere.
const minNeedle = 4

// maxNeedle is how many of the text's last non-blank characters
// InputHolds looks for.
const maxNeedle = 24

// InputHolds reports whether the input line on kind's screen shows the
// end of text (typed, not yet submitted). known is false when it cannot
// tell: an agent whose input line herd does not know, a screen without
// it (a dialog), a text too short to look for, or one with several lines
// where the agent may fold a paste into a placeholder (one that shows a
// paste as it is is read by its last line: seen, it holds; not seen,
// unknown). The input line is the
// last input prompt on the screen and what follows it; the prompts above
// it are history. Blanks and box-drawing characters are ignored, so the
// agent's own wrapping of a long line does not hide the text.
func InputHolds(kind, screen, text string) (holds, known bool) {
	r, ok := rules[kind]
	if !ok {
		return false, false
	}
	several := strings.ContainsAny(strings.TrimRight(text, "\n"), "\n\r")
	if several {
		if !r.pasteShown {
			return false, false
		}
		// Its last line shows at the input line's end; not seen, it
		// may be folded or scrolled: unknown.
		lines := strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' })
		text = lines[len(lines)-1]
	}
	needle := compact(Normalize(text))
	if n := utf8.RuneCountInString(needle); n < minNeedle {
		return false, false
	} else if n > maxNeedle {
		rs := []rune(needle)
		needle = string(rs[len(rs)-maxNeedle:])
	}
	input := r.promptRE
	if r.inputRE != nil {
		input = r.inputRE
	}
	norm := Normalize(screen)
	locs := input.FindAllStringIndex(norm, -1)
	if len(locs) == 0 {
		return false, false
	}
	holds = strings.Contains(compact(norm[locs[len(locs)-1][0]:]), needle)
	if several && !holds {
		return false, false
	}
	return holds, true
}

// compact drops blanks and box-drawing characters from s.
func compact(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || (r >= 0x2500 && r <= 0x257F) {
			return -1
		}
		return r
	}, s)
}
