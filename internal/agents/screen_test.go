package agents

import (
	"strings"
	"testing"

	"herd"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"claude spinner frame and verb", "❯ x\n\n✶ Thinking… (1m 1s · ↓ 1.2k tokens)\n", "❯ x\n\n✢ Pondering… (1m 2s · ↑ 1.3k tokens)\n", true},
		{"claude done verb", "● ok\n\n✻ Crunched for 1m 2s\n", "● ok\n\n✻ Sautéed for 1m 2s\n", true},
		{"tip rotates", "✶ Thinking…\n  ⎿  Tip: one\n", "✶ Thinking…\n  ⎿\u00a0 Tip: two\n", true},
		{"trailing blanks", "a  \nb\n\n\n", "a\nb", true},
		{"codex working timer", "• Working (5s • esc to interrupt)\n", "• Working (12s • esc to interrupt)\n", true},
		{"codex bullet shimmer", "• Working (5s • esc to interrupt)\n", "◦ Working (6s • esc to interrupt)\n", true},
		{"gemini braille", "⠋ Thinking... (esc to cancel, 3s)\n", "⠏ Thinking... (esc to cancel, 14s)\n", true},
		{"new output", "● ok\n", "● ok\n● more\n", false},
		{"new tool line", "✶ Thinking… (3s)\n", "● Bash(ls)\n✶ Thinking… (4s)\n", false},
		{"bullet text is no spinner", "* Added (tests) to x\n", "* Added (docs) to x\n", false},
	}
	for _, tc := range tests {
		na, nb := Normalize(tc.a), Normalize(tc.b)
		if (na == nb) != tc.same {
			t.Errorf("[%s] expected same=%v, got:\n%q\n%q", tc.name, tc.same, na, nb)
		}
	}
}

func TestClassifyScreenTable(t *testing.T) {
	box := strings.Repeat("─", 40)
	tests := []struct {
		name     string
		kind     string
		screen   string
		activity herd.Activity
		reason   string
	}{
		{"claude idle", herd.AgentClaude, "hi\n" + box + "\n❯ \n" + box + "\n  ? for shortcuts\n", herd.ActivityIdle, ""},
		{"claude leftover input", herd.AgentClaude, box + "\n❯ half typed\n" + box + "\n", herd.ActivityIdle, ""},
		{"claude running", herd.AgentClaude, "✽ Concocting… (31s)\n" + box + "\n❯ \n" + box + "\n  esc to interrupt\n", herd.ActivityWorking, ""},
		{"claude old permission in scrollback", herd.AgentClaude, "Do you want to proceed?\n" + strings.Repeat("line\n", 40) + box + "\n❯ \n" + box + "\n", herd.ActivityIdle, ""},
		{"claude trust (older wording)", herd.AgentClaude, " Do you trust the files in this folder?\n ❯ 1. Yes, proceed\n", herd.ActivityWaiting, ReasonStartupPrompt},
		{"claude edit permission", herd.AgentClaude, " Do you want to make this edit to a.go?\n ❯ 1. Yes\n", herd.ActivityWaiting, ReasonPermission},
		{"claude blank", herd.AgentClaude, "\n\n", "", ""},
		{"codex approval", herd.AgentCodex, "Would you like to run the following command?\n  $ ls\n› 1. Yes, proceed\n", herd.ActivityWaiting, ReasonPermission},
		{"codex trust", herd.AgentCodex, "Do you trust the contents of this directory?\n› 1. Yes\n", herd.ActivityWaiting, ReasonStartupPrompt},
		{"codex working", herd.AgentCodex, "• Working (5s • esc to interrupt)\n› \n", herd.ActivityWorking, ""},
		{"codex idle", herd.AgentCodex, "› Ask Codex to do anything\n", herd.ActivityIdle, ""},
		{"gemini working", herd.AgentGemini, "⠏ Thinking... (esc to cancel, 3s)\n> Type your message\n", herd.ActivityWorking, ""},
		{"gemini idle", herd.AgentGemini, "│ > Type your message or @path/to/file │\n", herd.ActivityIdle, ""},
		{"gemini permission", herd.AgentGemini, "Allow execution of: 'ls'?\n● 1. Allow once\n", herd.ActivityWaiting, ReasonPermission},
		{"generic", herd.AgentGeneric, box + "\n❯ \n" + box + "\n", "", ""},
	}
	for _, tc := range tests {
		sc := ClassifyScreen(tc.kind, tc.screen)
		if sc.Activity != tc.activity || sc.Reason != tc.reason {
			t.Errorf("[%s] expected %q/%q, got %q/%q (%+v)", tc.name, tc.activity, tc.reason, sc.Activity, sc.Reason, sc)
		}
		if sc.Hash == "" {
			t.Errorf("[%s] no hash", tc.name)
		}
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"abc", 1, "abc"},
		{"", 3, ""},
	} {
		if got := lastLines(tc.s, tc.n); got != tc.want {
			t.Errorf("lastLines(%q, %d): expected %q, got %q", tc.s, tc.n, tc.want, got)
		}
	}
}

// TestInTurnIndicators: each agent's in-turn status line, drawn above its
// (visible, empty) input prompt, is a running turn; the prompt without it
// is idle; the indicator's words elsewhere on a line are not one.
func TestInTurnIndicators(t *testing.T) {
	rule := strings.Repeat("─", 40)
	prompts := map[string]string{
		herd.AgentGemini: rule + "\n Shift+Tab to accept edits\n\n >   Type your message or @path/to/file\n\n workspace (/directory)   sandbox   /model\n",
		herd.AgentCodex:  "\n› Ask Codex to do anything\n\n  gpt-mock default · /home/user/proj\n  ? for shortcuts\n",
		herd.AgentClaude: rule + "\n❯ \n" + rule + "\n  ? for shortcuts\n",
	}
	tests := []struct {
		name, kind, line string
		running          bool
	}{
		{"gemini hooks", herd.AgentGemini, " ⠙ Executing Hooks: /usr/local/bin/herd hook --agent gemini BeforeAgent (1/2), /usr/lo", true},
		{"gemini one hook", herd.AgentGemini, " ⠼ Executing Hook: herd hook --agent gemini BeforeModel", true},
		{"gemini hooks before the spinner's first frame", herd.AgentGemini, "  Executing Hooks: /usr/local/bin/herd hook --agent gemini SessionStart, /home/user", true},
		{"gemini thinking", herd.AgentGemini, " ⠏ Thinking... (esc to cancel, 3s)                                   ? for shortcuts", true},
		{"gemini a thought's subject", herd.AgentGemini, " ⠧ Reading the project files", true},
		{"gemini waiting for the model", herd.AgentGemini, " ⠋ Waiting for model... (esc to cancel, 12s)", true},
		{"gemini a hook's end over the hint", herd.AgentGemini, "? for shortcutsok: /usr/local/bin/herd hook --agent gemini BeforeModel (esc to cancel, 2s)", true},
		{"gemini nothing", herd.AgentGemini, "", false},
		{"gemini the words in an answer", herd.AgentGemini, "✦ The line reads Executing Hooks: while they run.", false},
		{"codex working", herd.AgentCodex, "• Working (12s • esc to interrupt)", true},
		{"codex working shimmer", herd.AgentCodex, "◦ Working (0s • esc to interrupt)", true},
		{"codex nothing", herd.AgentCodex, "", false},
		{"claude spinner", herd.AgentClaude, "✶ Thinking… (1m 1s · ↓ 1.2k tokens · esc to interrupt)", true},
		{"claude spinner without the hint", herd.AgentClaude, "✢ Pondering…", true},
		{"claude done", herd.AgentClaude, "✻ Crunched for 1m 2s", false},
	}
	for _, tc := range tests {
		screen := " > earlier prompt\n\n" + tc.line + "\n" + prompts[tc.kind]
		sc := ClassifyScreen(tc.kind, screen)
		want := herd.ActivityIdle
		if tc.running {
			want = herd.ActivityWorking
		}
		if sc.Running != tc.running || sc.Activity != want || !sc.Prompt {
			t.Errorf("[%s] expected running=%v %s with the prompt seen, got running=%v %s prompt=%v:\n%s",
				tc.name, tc.running, want, sc.Running, sc.Activity, sc.Prompt, screen)
		}
	}
}
