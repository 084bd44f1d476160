// Package inbox derives the needs-you inbox: which sessions wait for a
// person, for what, and the answers their dialogs offer (read from their
// screens). The console (internal/web) calls it. It is pure: it never reads
// the store, a screen or the clock itself, and never acts on a session.
package inbox

import (
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
)

// Kinds of inbox item: what a session waits for a person for.
const (
	KindPermission = "permission"
	KindQuestion   = "question"
	KindStartup    = "startup_prompt"
	KindBlocked    = "blocked"
	KindStalled    = "stalled"
	KindFailed     = "failed"
)

// Option is one answer a dialog offers: Key is what is typed.
type Option struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// Item is one session that needs a person.
type Item struct {
	Session string `json:"session"`
	Host    string `json:"host"`
	Role    string `json:"role"`
	Kind    string `json:"kind"`
	// Text is what the agent asks, in its own words where known (the
	// dialog read from its screen, the hook's tool, the API error).
	Text    string   `json:"text"`
	Options []Option `json:"options"`
	// Since is when the need began; an answer names it, so an answer to
	// an older need is refused.
	Since time.Time `json:"since"`
	// ResetAt is when a rate limit resets, when known.
	ResetAt *time.Time `json:"reset_at,omitempty"`
	// Agent is the role's agent kind.
	Agent string `json:"agent,omitempty"`
	// Incarnation the need belongs to.
	Incarnation string `json:"incarnation"`
	// Unread is true while a waiting session's dialog was not read from
	// its screen yet (Text and Options are the hook's generic ones): the
	// agent may draw it a moment after its hook fired, so the page asks
	// again soon.
	Unread bool `json:"unread,omitempty"`
}

// Clue is what herd knows about one waiting or blocked session beyond its
// row: its last activity event and its screen.
type Clue struct {
	// Agent is the role's agent kind (claude, codex, gemini, generic).
	Agent string
	// Cause is the session's last activity event of its incarnation, nil
	// when none.
	Cause *herd.Event
	// Screen is the pane's text (no colours), "" when not read.
	Screen string
}

// Needs reports whether a session needs a person, and so whether its
// clue is worth reading.
func Needs(s api.SessionView) bool {
	switch {
	case s.Unmanaged:
		return false
	case s.State == herd.StateFailed, s.State == herd.StateStalled:
		return true
	case s.State.Live() && (s.Activity == herd.ActivityWaiting || s.Activity == herd.ActivityBlocked):
		return true
	}
	return false
}

// Derive is the inbox: one item per session that needs a person, oldest
// first. clues holds what is known of waiting and blocked sessions, by
// name.
func Derive(sessions []api.SessionView, clues map[string]Clue) []Item {
	items := []Item{}
	for _, s := range sessions {
		if !Needs(s) {
			continue
		}
		items = append(items, derive(s, clues[s.Name]))
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].Since.Equal(items[j].Since) {
			return items[i].Since.Before(items[j].Since)
		}
		return items[i].Session < items[j].Session
	})
	return items
}

// derive builds the item of one session that needs a person.
func derive(s api.SessionView, c Clue) Item {
	it := Item{Session: s.Name, Host: s.Host, Role: s.Role, Incarnation: s.Incarnation, Agent: c.Agent, Since: s.StateSince.UTC(), Options: []Option{}}
	data := map[string]any{}
	if c.Cause != nil && c.Cause.Incarnation == s.Incarnation {
		data = c.Cause.Data
	}
	switch {
	case s.State == herd.StateFailed:
		it.Kind = KindFailed
		it.Text = "failed: restart budget spent or policy forbids restart"
		if s.Exit != nil {
			it.Text = "failed; last exit: " + s.Exit.Brief()
		}
		return it
	case s.State == herd.StateStalled:
		it.Kind = KindStalled
		it.Text = "alive but silent in a turn"
		if s.LastActivityAt != nil {
			it.Text += " since " + s.LastActivityAt.UTC().Format(time.RFC3339)
		}
		return it
	}
	if s.LastActivityAt != nil {
		it.Since = s.LastActivityAt.UTC()
	}
	if s.Activity == herd.ActivityBlocked {
		it.Kind = KindBlocked
		it.Text = "the turn ended on an API error"
		if c.Cause != nil && c.Cause.Reason == agents.ReasonRateLimited {
			it.Text = "rate limited"
		}
		if e := str(data, "error"); e != "" {
			it.Text += ": " + Clip(e, 300)
		}
		if t, err := time.Parse(time.RFC3339, str(data, "reset_at")); err == nil {
			t = t.UTC()
			it.ResetAt = &t
			it.Text += " (resets " + t.Format("15:04 MST") + ")"
		}
		it.Options = []Option{{Key: "continue", Label: "Continue"}}
		return it
	}
	// Waiting: a dialog. Its words and answers come from the screen when
	// herd can read them there, else from the hook.
	d, onScreen := ReadDialog(c.Screen)
	tool := str(data, "tool")
	switch {
	case (c.Cause != nil && c.Cause.Reason == agents.ReasonStartupPrompt) || str(data, "reason") == agents.ReasonStartupPrompt:
		it.Kind = KindStartup
	case tool == "AskUserQuestion":
		it.Kind = KindQuestion
	case tool != "" || str(data, "event") == "PermissionRequest":
		it.Kind = KindPermission
	case onScreen:
		it.Kind = KindPermission
	default:
		it.Kind = KindQuestion
	}
	if onScreen {
		it.Text, it.Options = d.Text, d.Options
		return it
	}
	switch it.Kind {
	case KindPermission:
		it.Text = "asks for permission"
		if tool != "" {
			it.Text += " to use " + tool
		}
	case KindStartup:
		it.Text = "shows a startup dialog (trust, login or onboarding)"
	default:
		it.Text = "waits for input"
	}
	it.Options = DefaultOptions(c.Agent, it.Kind)
	it.Unread = true
	return it
}

// DefaultOptions are the answers an agent kind's dialog of kind offers,
// for when its screen cannot be read.
func DefaultOptions(agent, kind string) []Option {
	switch kind {
	case KindPermission:
		switch agent {
		case herd.AgentClaude:
			return []Option{{"1", "Yes"}, {"2", "Yes, and don't ask again"}, {"3", "No, and tell Claude what to do differently (esc)"}}
		case herd.AgentCodex:
			return []Option{{"1", "Yes, proceed"}, {"2", "Yes, and don't ask again"}, {"3", "No, and tell Codex what to do differently (esc)"}}
		case herd.AgentGemini:
			return []Option{{"1", "Allow once"}, {"2", "Allow for this session"}, {"3", "No, suggest changes (esc)"}}
		}
		return []Option{{"1", "1. Yes"}, {"2", "2. Yes, and don't ask again"}, {"3", "3. No"}}
	case KindStartup:
		// Each agent's trust dialog (its first startup screen): the same
		// digit means different things to each.
		switch agent {
		case herd.AgentCodex:
			return []Option{{"1", "1. Trust and continue"}, {"2", "2. Back"}}
		case herd.AgentGemini:
			return []Option{{"1", "1. Trust folder"}, {"2", "2. Trust parent folder"}, {"3", "3. Don't trust"}}
		}
		return []Option{{"1", "1. Yes, I trust this folder"}, {"2", "2. No, exit"}}
	}
	return []Option{}
}

// Dialog is a numbered dialog read from an agent's screen.
type Dialog struct {
	Text    string
	Options []Option
}

var (
	// optionRE is one numbered answer: an optional selection mark, the
	// number, the label.
	optionRE = regexp.MustCompile(`^\s*([❯›>●▶]?)\s*([1-9])\.\s+(\S.*?)\s*$`)
	// ruleRE is a horizontal rule or a box edge: where a dialog begins.
	ruleRE = regexp.MustCompile(`^[\s─━═╭╰┌└│|]*[─━═]{6,}`)
)

// ReadDialog finds the last numbered dialog on screen: a run of numbered
// lines, one of them marked as selected, and the lines above it up to a
// rule or the top of its box. A dialog drawn in a box (Gemini CLI's) is
// read without its borders; a label wrapped over several lines (Claude
// Code's, on a narrow pane) is joined. ok is false when the screen shows
// none.
func ReadDialog(screen string) (d Dialog, ok bool) {
	raw := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	lines := make([]string, len(raw))
	for i, l := range raw {
		lines[i] = unbox(l)
	}
	end := -1
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-15; i-- {
		if optionRE.MatchString(lines[i]) {
			end = i
			break
		}
	}
	if end < 0 {
		return d, false
	}
	// A label's continuation lines follow the last option too.
	for end+1 < len(lines) && continues(lines[end+1]) {
		end++
	}
	start, marked := end, false
	for i := end; i >= 0; i-- {
		m := optionRE.FindStringSubmatch(lines[i])
		if m == nil {
			// A wrapped label continues the option above; anything
			// else ends the options.
			if continues(lines[i]) {
				continue
			}
			break
		}
		start = i
		if m[1] != "" {
			marked = true
		}
	}
	if !marked {
		return d, false
	}
	for i := start; i <= end; i++ {
		if m := optionRE.FindStringSubmatch(lines[i]); m != nil {
			d.Options = append(d.Options, Option{Key: m[2], Label: m[2] + ". " + strings.TrimSpace(m[3])})
		} else if n := len(d.Options); n > 0 {
			d.Options[n-1].Label += " " + strings.TrimSpace(lines[i])
		}
	}
	// The question: the lines above the options, up to a rule or the top
	// of the dialog's box; a box inside it (Gemini's command) is read
	// without its edges.
	var text []string
	depth := 0
	for i := start - 1; i >= 0 && len(text) < 12; i-- {
		l := strings.TrimSpace(strings.Trim(lines[i], "│|"))
		if ruleRE.MatchString(lines[i]) {
			switch {
			case strings.HasPrefix(l, "╰") || strings.HasPrefix(l, "└"):
				depth++
				continue
			case depth > 0 && (strings.HasPrefix(l, "╭") || strings.HasPrefix(l, "┌")):
				depth--
				continue
			}
			break
		}
		text = append(text, l)
	}
	for i, j := 0, len(text)-1; i < j; i, j = i+1, j-1 {
		text[i], text[j] = text[j], text[i]
	}
	d.Text = strings.TrimSpace(collapseBlank(text))
	return d, true
}

// continues reports whether a dialog's line (unboxed) continues the
// label above it: indented text that is neither a new option nor a rule.
func continues(l string) bool {
	t := strings.TrimLeft(l, " ")
	return t != "" && len(l)-len(t) >= 3 && !optionRE.MatchString(l) && !ruleRE.MatchString(l)
}

// unbox strips a line of the box borders drawn around it (│ on both
// sides, nested boxes too), keeping the indentation inside the box.
func unbox(l string) string {
	l = strings.TrimRight(l, " ")
	for {
		t := strings.TrimLeft(l, " ")
		r, n := utf8.DecodeRuneInString(t)
		if !strings.ContainsRune("│┃║", r) {
			return l
		}
		l = strings.TrimRight(t[n:], " ")
		if r, n := utf8.DecodeLastRuneInString(l); strings.ContainsRune("│┃║", r) {
			l = strings.TrimRight(l[:len(l)-n], " ")
		}
	}
}

// collapseBlank joins lines, keeping at most one blank line in a row.
func collapseBlank(lines []string) string {
	var b strings.Builder
	blank := false
	for _, l := range lines {
		if l == "" {
			if !blank && b.Len() > 0 {
				b.WriteString("\n")
			}
			blank = true
			continue
		}
		blank = false
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(l)
	}
	return b.String()
}

func str(data map[string]any, key string) string {
	s, _ := data[key].(string)
	return s
}

// Clip trims s and cuts it to n bytes, marked "...".
func Clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
