package inbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
)

func fixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "agents", "testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadDialog(t *testing.T) {
	for _, c := range []struct {
		name, file string
		ok         bool
		text       []string // lines the text must hold
		options    []Option
		narrow     int // wrap the options' labels at this width, as the agent does on a narrow pane
	}{
		{name: "claude permission", file: "claude/2.1.197/screen-permission.txt", ok: true,
			text:    []string{"Bash command", "touch herd-tool-ran", "Do you want to proceed?"},
			options: []Option{{"1", "1. Yes"}, {"2", "2. Yes, and always allow access to proj/ from this project"}, {"3", "3. No"}}},
		{name: "claude trust", file: "claude/2.1.197/screen-trust.txt", ok: true,
			options: []Option{{"1", "1. Yes, I trust this folder"}, {"2", "2. No, exit"}}},
		{name: "codex permission", file: "codex/0.169.0/screen-permission.txt", ok: true,
			text: []string{"Would you like to run the following command?", "$ touch herd-tool-ran"},
			options: []Option{{"1", "1. Yes, proceed (y)"}, {"2", "2. Yes, and don't ask again for commands that start with `touch herd-tool-ran` (p)"},
				{"3", "3. No, and tell Codex what to do differently (esc)"}}},
		{name: "codex trust", file: "codex/0.169.0/screen-trust.txt", ok: true,
			text:    []string{"Trust this folder?"},
			options: []Option{{"1", "1. Trust and continue"}, {"2", "2. Back to Agent Command Center"}}},
		{name: "codex hooks review", file: "codex/0.169.0/screen-hooks-review.txt", ok: true,
			text:    []string{"Hooks need review"},
			options: []Option{{"1", "1. Review hooks"}, {"2", "2. Trust all and continue"}, {"3", "3. Continue without trusting (hooks won't run)"}}},
		{name: "gemini permission, boxed", file: "gemini/0.61.0/screen-permission.txt", ok: true,
			text:    []string{"Shell  touch tool-ran", "Allow execution of [Shell]?"},
			options: []Option{{"1", "1. Allow once"}, {"2", "2. Allow for this session"}, {"3", "3. No, suggest changes (esc)"}}},
		{name: "gemini trust, boxed", file: "gemini/0.61.0/screen-trust.txt", ok: true,
			text:    []string{"Do you trust the files in this folder?", "of the CLI."},
			options: []Option{{"1", "1. Trust folder (proj)"}, {"2", "2. Trust parent folder (001)"}, {"3", "3. Don't trust"}}},
		{name: "claude idle", file: "claude/2.1.197/screen-idle.txt"},
		{name: "gemini idle, its numbered tips unmarked", file: "gemini/0.61.0/screen-idle.txt"},
		{name: "claude permission, labels wrapped on a narrow pane", file: "claude/2.1.330/screen-permission.txt", narrow: 40, ok: true,
			text: []string{"touch herd-tool-ran", "Do you want to proceed?"},
			options: []Option{{"1", "1. Yes"}, {"2", "2. Yes, and always allow access to /home/user/proj from this project"},
				{"3", "3. Yes, and switch to auto mode · auto mode handles these prompts for you"}, {"4", "4. No"}}},
	} {
		screen := fixture(t, c.file)
		if c.narrow > 0 {
			screen = wrapOptions(screen, c.narrow)
		}
		d, ok := ReadDialog(screen)
		if ok != c.ok {
			t.Errorf("[%s] expected a dialog %v … got %v (%+v)", c.name, c.ok, ok, d)
			continue
		}
		for _, l := range c.text {
			if !strings.Contains(d.Text, l) {
				t.Errorf("[%s] expected the text to hold %q … got %q", c.name, l, d.Text)
			}
		}
		if c.options != nil {
			if diff := cmp.Diff(c.options, d.Options); diff != "" {
				t.Errorf("[%s] options (-expected +got):\n%s", c.name, diff)
			}
		}
	}
}

// wrapOptions wraps a captured frame's numbered lines at width, as
// Claude Code draws them on a narrow pane: the rest of a label on lines
// indented to where the label begins.
func wrapOptions(screen string, width int) string {
	var out []string
	for _, l := range strings.Split(screen, "\n") {
		m := optionRE.FindStringSubmatchIndex(l)
		if m == nil || len([]rune(l)) <= width {
			out = append(out, l)
			continue
		}
		indent := strings.Repeat(" ", len([]rune(l[:m[6]])))
		line := l[:m[6]]
		for _, w := range strings.Fields(l[m[6]:]) {
			if len([]rune(line))+1+len([]rune(w)) > width && strings.TrimSpace(line) != strings.TrimSpace(l[:m[6]]) {
				out = append(out, line)
				line = indent + w
				continue
			}
			if !strings.HasSuffix(line, " ") {
				line += " "
			}
			line += w
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestDerive(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { v := t0.Add(time.Duration(m) * time.Minute); return &v }
	code := 3
	sess := func(name string, st herd.State, act herd.Activity, last *time.Time) api.SessionView {
		return api.SessionView{Name: name, Role: "r", Host: "h", Incarnation: "i-" + name, RuntimeKind: herd.RuntimeTmux,
			State: st, Activity: act, LastActivityAt: last, StateSince: t0}
	}
	failed := sess("f-0", herd.StateFailed, herd.ActivityUnknown, nil)
	failed.Exit = &herd.Exit{Code: &code, Reason: "exit_code"}
	failed.StateSince = t0.Add(-time.Hour)
	ev := func(name, reason string, data map[string]any) *herd.Event {
		return &herd.Event{Session: name, Incarnation: "i-" + name, Kind: herd.EventActivity, Reason: reason, Data: data}
	}
	sessions := []api.SessionView{
		sess("ok-0", herd.StateRunning, herd.ActivityWorking, at(0)),
		sess("perm-0", herd.StateRunning, herd.ActivityWaiting, at(5)),
		sess("screen-0", herd.StateRunning, herd.ActivityWaiting, at(6)),
		sess("trust-0", herd.StateRunning, herd.ActivityWaiting, at(7)),
		sess("ask-0", herd.StateRunning, herd.ActivityWaiting, at(8)),
		sess("rate-0", herd.StateRunning, herd.ActivityBlocked, at(2)),
		sess("stall-0", herd.StateStalled, herd.ActivityWorking, at(1)),
		failed,
		sess("stopped-0", herd.StateStopped, herd.ActivityWaiting, at(1)),
		{Name: "loose", State: herd.StateUnknown, Activity: herd.ActivityWaiting, Unmanaged: true},
	}
	clues := map[string]Clue{
		"perm-0":   {Agent: herd.AgentClaude, Cause: ev("perm-0", "hook", map[string]any{"event": "PermissionRequest", "tool": "Bash"})},
		"screen-0": {Agent: herd.AgentCodex, Cause: ev("screen-0", "hook", map[string]any{"tool": "Bash"}), Screen: fixture(t, "codex/0.169.0/screen-permission.txt")},
		"trust-0":  {Agent: herd.AgentClaude, Cause: ev("trust-0", "startup_prompt", nil), Screen: fixture(t, "claude/2.1.197/screen-trust.txt")},
		"ask-0":    {Agent: herd.AgentGemini, Cause: ev("ask-0", "hook", map[string]any{"tool": "AskUserQuestion"})},
		"rate-0": {Agent: herd.AgentClaude, Cause: ev("rate-0", "rate_limited",
			map[string]any{"error": "rate_limit <b>", "reset_at": "2026-01-01T13:00:00Z"})},
	}
	items := Derive(sessions, clues)
	type short struct {
		Session, Kind string
		Options       int
	}
	var got []short
	for _, it := range items {
		got = append(got, short{it.Session, it.Kind, len(it.Options)})
	}
	want := []short{
		{"f-0", KindFailed, 0}, // oldest first: failed an hour before
		{"stall-0", KindStalled, 0},
		{"rate-0", KindBlocked, 1},
		{"perm-0", KindPermission, 3},
		{"screen-0", KindPermission, 3},
		{"trust-0", KindStartup, 2},
		{"ask-0", KindQuestion, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("inbox (-expected +got):\n%s", diff)
	}
	byName := map[string]Item{}
	for _, it := range items {
		byName[it.Session] = it
	}
	for name, sub := range map[string]string{
		"f-0":      "exit code 3",
		"perm-0":   "to use Bash",
		"screen-0": "$ touch herd-tool-ran",
		"rate-0":   "rate limited: rate_limit <b> (resets 13:00 UTC)",
	} {
		if !strings.Contains(byName[name].Text, sub) {
			t.Errorf("[%s] expected the text to hold %q … got %q", name, sub, byName[name].Text)
		}
	}
	if got := byName["perm-0"].Options[2].Label; !strings.Contains(got, "tell Claude") {
		t.Errorf("[perm-0] expected Claude's third answer … got %q", got)
	}
	if !byName["perm-0"].Since.Equal(*at(5)) {
		t.Errorf("[perm-0] expected since its last activity … got %v", byName["perm-0"].Since)
	}
	// A dialog not read from the screen yet is marked so the page asks
	// again; one read from it is not.
	for name, want := range map[string]bool{"perm-0": true, "ask-0": true, "screen-0": false, "trust-0": false, "rate-0": false} {
		if got := byName[name].Unread; got != want {
			t.Errorf("[%s] expected unread %v … got %v", name, want, got)
		}
	}
	if r := byName["rate-0"].ResetAt; r == nil || r.Hour() != 13 {
		t.Errorf("[rate-0] expected the reset time … got %v", r)
	}
}

// TestDefaultStartupOptions: a startup dialog not read from the screen
// offers each agent's own trust answers, numbered as its dialog numbers
// them (the captured frames), so a digit never means another answer.
func TestDefaultStartupOptions(t *testing.T) {
	for agent, file := range map[string]string{
		herd.AgentClaude: "claude/2.1.197/screen-trust.txt",
		herd.AgentCodex:  "codex/0.169.0/screen-trust.txt",
		herd.AgentGemini: "gemini/0.61.0/screen-trust.txt",
	} {
		d, ok := ReadDialog(fixture(t, file))
		if !ok {
			t.Fatalf("[%s] expected the trust dialog read from %s", agent, file)
		}
		def := DefaultOptions(agent, KindStartup)
		if len(def) != len(d.Options) {
			t.Errorf("[%s] expected %d default answers … got %d", agent, len(d.Options), len(def))
			continue
		}
		for i, o := range def {
			if o.Key != d.Options[i].Key || !strings.HasPrefix(d.Options[i].Label, o.Label) {
				t.Errorf("[%s] expected default %q to begin the dialog's %q", agent, o.Label, d.Options[i].Label)
			}
		}
	}
}
