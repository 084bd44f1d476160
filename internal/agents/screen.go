package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"herd"
)

// Dialogs a screen can show.
const (
	DialogPermission = "permission" // may the agent use a tool?
	DialogStartup    = "startup"    // trust, onboarding, API key, login
)

// Screen is what one `tmux capture-pane -p` of an agent's pane shows.
type Screen struct {
	// Activity the screen proves: working (a turn runs), idle (the input
	// prompt with no turn running), waiting (a dialog); "" when it proves
	// nothing (a screen herd does not recognise).
	Activity herd.Activity
	// Reason qualifies waiting: ReasonPermission or ReasonStartupPrompt.
	Reason  string
	Running bool   // a spinner or "esc to interrupt": a turn runs
	Prompt  bool   // the input prompt is on screen
	Dialog  string // DialogPermission, DialogStartup or ""
	// Hash identifies the normalised screen (spinner frames, timers, token
	// counters and rotating tips taken out): two captures with the same
	// Hash show no progress, however much the spinner moved.
	Hash string
}

// screenRules are one agent's screen patterns. Every pattern is matched
// against the normalised screen.
type screenRules struct {
	startup    []string // any of these: a startup dialog
	permission []string // any of these: a permission dialog
	promptRE   *regexp.Regexp
	// inputRE, when set, finds the input line for InputHolds where it
	// takes more forms than promptRE (Gemini CLI's YOLO mode draws it
	// with "*"); promptRE otherwise.
	inputRE *regexp.Regexp
	// pasteShown: the agent shows a pasted text of several lines as it
	// is (no placeholder), so InputHolds can look for its last line.
	pasteShown bool
	// turnRE matches the agent's own in-turn indicators that the common
	// spinner patterns miss, in the raw capture: while one shows, the
	// input prompt below it does not mean the turn is over.
	turnRE *regexp.Regexp
}

var rules = map[string]screenRules{
	herd.AgentClaude: {
		startup: []string{
			"Yes, I trust this folder", "Do you trust the files in this folder",
			"Detected a custom API key", "Select login method", "Choose the text style",
			"Unable to connect to Anthropic services", "Paste code here if prompted",
			"Security notes:", "Press Enter to continue",
		},
		permission: []string{
			"Do you want to proceed?", "Do you want to make this edit", "Do you want to create",
			"Do you want to allow", "Would you like to proceed?",
		},
		// The input box: a rule line, then the prompt mark.
		promptRE: regexp.MustCompile(`(?m)^─{8,}\n❯`),
	},
	herd.AgentCodex: {
		startup: []string{
			"Trust this folder?", "Trust and continue", "Hooks need review",
			"Do you trust the contents of this directory", "Sign in with ChatGPT",
			"Provide your own API key", "Welcome to Codex",
		},
		permission: []string{
			"Would you like to run the following command?", "Would you like to make the following edits?",
			"Allow command?", "Yes, proceed",
		},
		// The input line; user prompts in the scrollback look the same,
		// but a running turn or a dialog is checked first.
		promptRE: regexp.MustCompile(`(?m)^\s*› `),
	},
	herd.AgentGemini: {
		startup: []string{
			"Do you trust the files in this folder?", "Trust folder (", "Do you trust this folder?",
			"How would you like to authenticate", "Get started", "Waiting for auth",
		},
		permission: []string{
			"Allow execution", "Apply this change?", "Do you want to proceed?", "Allow once",
		},
		promptRE: regexp.MustCompile(`(?m)^\s*│?\s*> `),
		// Its input line in YOLO mode: " * text".
		inputRE:    regexp.MustCompile(`(?m)^\s*│?\s*[>*] `),
		pasteShown: true,
		// The loading indicator: a braille spinner frame and a phrase
		// ("⠙ Executing Hooks: … (1/2)", "⠏ Thinking... (esc to cancel,
		// 3s)", a thought's subject), shown above a live input prompt for
		// as long as a turn runs; hooks running, before the spinner's
		// first frame is drawn, read "Executing Hook(s): …" alone.
		turnRE: regexp.MustCompile(`(?m)^ ?[\x{2800}-\x{28FF}] +\S|^\s*(?:[\x{2800}-\x{28FF}]\s*)?Executing Hooks?: `),
	},
}

var (
	// spinnerRE is a status line with a spinner frame and a gerund ("✶
	// Thinking… (1m 1s · ↓ 1.2k tokens)", "• Working (5s • esc to
	// interrupt)", "⠏ Thinking... (esc to cancel, 3s)").
	spinnerRE = regexp.MustCompile(`(?m)^\s*[·✢✳✶✻✽∗*•◦\x{2800}-\x{28FF}◐◓◑◒] ?[A-Z][A-Za-z' -]*(?:(?:…|\.\.\.)[^\n]*|\(\d+[hms][^\n]*esc to interrupt[^\n]*)$`)
	// doneRE is Claude's line after a turn ("✻ Crunched for 1m 2s"): its
	// verb is picked at random again on every redraw.
	doneRE = regexp.MustCompile(`(?m)^\s*[·✢✳✶✻✽∗*] \p{Lu}\p{Ll}+ for [0-9hms ]+(·.*)?$`)
	// tipRE is a rotating tip under the spinner.
	tipRE = regexp.MustCompile(`(?m)^\s*⎿\s+Tip:.*$`)
	// timerRE is an elapsed time or token counter.
	timerRE = regexp.MustCompile(`\d+(\.\d+)?\s?[kK]? ?tokens|\b\d+[hms]( \d+[hms])*\b|[↓↑]`)
	// interruptRE is the footer while a turn runs; what it shows on its
	// right (effort, hints) comes and goes with no progress.
	interruptRE = regexp.MustCompile(`(?m)^.*(esc to interrupt|esc to cancel).*$`)
	// logoRE is Claude's mascot, drawn in block elements; newer versions
	// animate it while a turn runs.
	// Codex draws its logo in braille.
	logoRE = regexp.MustCompile(`[\x{2580}-\x{259F}\x{2800}-\x{28FF}]+`)
	// effortRE is the effort indicator, shown and hidden as the turn goes.
	effortRE = regexp.MustCompile(`[◐◑◒◓○●]\s*(low|medium|high|xhigh|max)\s*·\s*/effort`)
	// trailingRE is trailing blanks of a line.
	trailingRE = regexp.MustCompile(`(?m)[ \t]+$`)
)

// Normalize returns the screen text with what changes without progress
// taken out: spinner lines become "<spinner>", Claude's after-turn line
// "<done>", any line offering to interrupt the turn ("esc to interrupt",
// "esc to cancel") "<running>"; timers,
// token counters, rotating tips, the (animated) logo and the effort
// indicator vanish; runs of blanks become one space and blank lines go.
func Normalize(text string) string {
	t := strings.ReplaceAll(text, "\r", "")
	t = strings.ReplaceAll(t, "\u00a0", " ") // Claude pads with no-break spaces
	t = trailingRE.ReplaceAllString(t, "")
	t = tipRE.ReplaceAllString(t, "")
	t = doneRE.ReplaceAllString(t, "<done>")
	t = interruptRE.ReplaceAllString(t, "<running>")
	t = spinnerRE.ReplaceAllString(t, "<spinner>")
	t = timerRE.ReplaceAllString(t, "")
	t = logoRE.ReplaceAllString(t, "")
	t = effortRE.ReplaceAllString(t, "")
	// Layout (indentation, alignment, blank lines) moves with redraws;
	// words do not.
	var b strings.Builder
	for _, l := range strings.Split(t, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			b.WriteString(strings.Join(f, " "))
			b.WriteByte('\n')
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// ClassifyScreen reads one capture of a pane running kind. A startup
// dialog (trust, onboarding, API key, login) is waiting with
// ReasonStartupPrompt; a permission dialog waiting with ReasonPermission;
// a spinner, or the agent's own in-turn indicator (Gemini CLI's loading
// line, "Executing Hooks" included), working — however visible the
// input prompt below it; the input prompt without any of them idle — which is
// how an interrupted turn (Esc, no hook) is seen to have ended. Generic
// agents, and screens matching nothing, get no activity; Hash is set in
// every case.
func ClassifyScreen(kind, text string) Screen {
	norm := Normalize(text)
	sum := sha256.Sum256([]byte(norm))
	sc := Screen{Hash: hex.EncodeToString(sum[:16])}
	r, ok := rules[kind]
	if !ok {
		return sc
	}
	// The bottom of the screen is the live part; a dialog's words further
	// up may be scrollback of an answered one.
	live := lastLines(norm, 30)
	sc.Running = strings.Contains(norm, "<spinner>") || strings.Contains(norm, "<running>") ||
		(r.turnRE != nil && r.turnRE.MatchString(strings.ReplaceAll(text, "\r", "")))
	sc.Prompt = r.promptRE.MatchString(live)
	switch {
	case containsAny(live, r.startup):
		sc.Dialog, sc.Activity, sc.Reason = DialogStartup, herd.ActivityWaiting, ReasonStartupPrompt
	case containsAny(live, r.permission):
		sc.Dialog, sc.Activity, sc.Reason = DialogPermission, herd.ActivityWaiting, ReasonPermission
	case sc.Running:
		sc.Activity = herd.ActivityWorking
	case sc.Prompt:
		sc.Activity = herd.ActivityIdle
	}
	return sc
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		j := strings.LastIndexByte(s[:i], '\n')
		if j < 0 {
			return s
		}
		i = j
	}
	if i <= 0 {
		return s
	}
	return s[i+1:]
}
