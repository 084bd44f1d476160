package watchdog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
)

func TestScreenActivity(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	idle := agents.Screen{Activity: herd.ActivityIdle, Prompt: true}
	spinner := agents.Screen{Activity: herd.ActivityWorking, Running: true}
	trust := agents.Screen{Activity: herd.ActivityWaiting, Reason: agents.ReasonStartupPrompt, Dialog: agents.DialogStartup}
	perm := agents.Screen{Activity: herd.ActivityWaiting, Reason: agents.ReasonPermission, Dialog: agents.DialogPermission}
	tests := []struct {
		name   string
		f      screenFacts
		act    herd.Activity
		reason string
		ok     bool
	}{
		{"unrecognised screen: nothing", screenFacts{Screen: agents.Screen{}, Current: herd.ActivityWorking, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"trust dialog before any hook: waiting startup_prompt", screenFacts{Screen: trust, Current: herd.ActivityUnknown, Since: t0, Now: t0}, herd.ActivityWaiting, agents.ReasonStartupPrompt, true},
		{"login dialog with hooks: waiting startup_prompt", screenFacts{Screen: trust, Current: herd.ActivityIdle, HooksSeen: true, Since: t0, Now: t0}, herd.ActivityWaiting, agents.ReasonStartupPrompt, true},
		{"startup dialog already recorded: nothing", screenFacts{Screen: trust, Current: herd.ActivityWaiting, Reason: agents.ReasonStartupPrompt, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"startup dialog answered, prompt confirmed: idle", screenFacts{Screen: idle, Current: herd.ActivityWaiting, Reason: agents.ReasonStartupPrompt, HooksSeen: true, Since: t0, Now: at(confirmIdle)}, herd.ActivityIdle, "", true},
		{"startup dialog answered, prompt not yet confirmed: nothing", screenFacts{Screen: idle, Current: herd.ActivityWaiting, Reason: agents.ReasonStartupPrompt, Since: t0, Now: at(time.Second)}, "", "", false},
		{"no hooks, spinner: working at once", screenFacts{Screen: spinner, Current: herd.ActivityIdle, Since: t0, Now: t0}, herd.ActivityWorking, "", true},
		{"no hooks, permission dialog: waiting", screenFacts{Screen: perm, Current: herd.ActivityWorking, Since: t0, Now: t0}, herd.ActivityWaiting, agents.ReasonPermission, true},
		{"no hooks, prompt confirmed: idle", screenFacts{Screen: idle, Current: herd.ActivityWorking, Since: t0, Now: at(confirmIdle)}, herd.ActivityIdle, "", true},
		{"no hooks, prompt seen once: nothing yet", screenFacts{Screen: idle, Current: herd.ActivityWorking, Since: t0, Now: t0}, "", "", false},
		{"no hooks, same activity: nothing", screenFacts{Screen: spinner, Current: herd.ActivityWorking, Since: t0, Now: at(time.Hour)}, "", "", false},
		{"hooks, Esc: prompt back after the last hook, confirmed: idle", screenFacts{Screen: idle, Current: herd.ActivityWorking, HooksSeen: true, LastHookAt: at(-time.Second), Since: t0, Now: at(3 * time.Second)}, herd.ActivityIdle, "", true},
		{"hooks, prompt first seen before the last hook: nothing", screenFacts{Screen: idle, Current: herd.ActivityWorking, HooksSeen: true, LastHookAt: at(time.Second), Since: t0, Now: at(time.Minute)}, "", "", false},
		{"hooks, prompt not confirmed: nothing", screenFacts{Screen: idle, Current: herd.ActivityWorking, HooksSeen: true, LastHookAt: at(-time.Second), Since: t0, Now: at(time.Second)}, "", "", false},
		{"hooks, spinner while hooks say idle: hooks win", screenFacts{Screen: spinner, Current: herd.ActivityIdle, HooksSeen: true, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"hooks, permission dialog while working: hooks win", screenFacts{Screen: perm, Current: herd.ActivityWorking, HooksSeen: true, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"hooks, prompt while waiting for permission: hooks win", screenFacts{Screen: idle, Current: herd.ActivityWaiting, Reason: agents.ReasonPermission, HooksSeen: true, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"hooks, prompt while blocked: stays blocked", screenFacts{Screen: idle, Current: herd.ActivityBlocked, HooksSeen: true, Since: t0, Now: at(time.Minute)}, "", "", false},
		{"hooks, unknown activity and prompt: idle", screenFacts{Screen: idle, Current: herd.ActivityUnknown, HooksSeen: true, Since: t0, Now: at(time.Minute)}, herd.ActivityIdle, "", true},
	}
	for _, tc := range tests {
		act, reason, ok := screenActivity(tc.f)
		if act != tc.act || reason != tc.reason || ok != tc.ok {
			t.Errorf("[%s] expected %q/%q/%v, got %q/%q/%v", tc.name, tc.act, tc.reason, tc.ok, act, reason, ok)
		}
	}
}

func TestCaptureBounds(t *testing.T) {
	tests := []struct {
		stallAfter, interval, gap, quiet time.Duration
	}{
		{5 * time.Minute, time.Second, 7500 * time.Millisecond, 75 * time.Second},
		{20 * time.Second, time.Second, time.Second, 5 * time.Second},
		{time.Hour, time.Second, 10 * time.Second, 15 * time.Minute},
		{2 * time.Second, 200 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond},
		{0, time.Second, time.Second, time.Minute},
	}
	for _, tc := range tests {
		if g := captureGap(tc.stallAfter, tc.interval); g != tc.gap {
			t.Errorf("[captureGap(%s, %s)] expected %s, got %s", tc.stallAfter, tc.interval, tc.gap, g)
		}
		if q := quietCaptureEvery(tc.stallAfter, tc.interval); q != tc.quiet {
			t.Errorf("[quietCaptureEvery(%s, %s)] expected %s, got %s", tc.stallAfter, tc.interval, tc.quiet, q)
		}
	}
}

// TestClaudeScreensThroughTheWatchdog replays the captured Claude screens
// through the classifier and the decision: a hung call (the spinner
// redrawing) is never progress, and the screen after Esc ends the turn.
func TestClaudeScreensThroughTheWatchdog(t *testing.T) {
	dirs, _ := filepath.Glob("../agents/testdata/claude/*/screen-after-esc.txt")
	if len(dirs) == 0 {
		t.Fatal("no captured Claude screens")
	}
	for _, esc := range dirs {
		dir := esc[:len(esc)-len("screen-after-esc.txt")]
		a := agents.ClassifyScreen(herd.AgentClaude, readString(t, dir+"screen-spinner-timer-a.txt"))
		b := agents.ClassifyScreen(herd.AgentClaude, readString(t, dir+"screen-spinner-timer-b.txt"))
		if a.Hash != b.Hash {
			t.Errorf("[%s] a spinner redraw changed the normalised screen", dir)
		}
		sc := agents.ClassifyScreen(herd.AgentClaude, readString(t, esc))
		t0 := time.Now()
		act, _, ok := screenActivity(screenFacts{Screen: sc, Current: herd.ActivityWorking, HooksSeen: true,
			LastHookAt: t0.Add(-time.Minute), Since: t0, Now: t0.Add(confirmIdle)})
		if !ok || act != herd.ActivityIdle {
			t.Errorf("[%s] after Esc: expected idle, got %q/%v", dir, act, ok)
		}
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHashWanted: the pane of an agent herd cannot read is captured for a
// hash only where no window_activity is listed, once silent half its
// threshold, at most once per quarter threshold.
func TestHashWanted(t *testing.T) {
	now := time.Now()
	const threshold = 4 * time.Minute
	tests := []struct {
		name                  string
		winActivity           bool
		silent, sinceCaptured time.Duration
		threshold             time.Duration
		want                  bool
	}{
		{"window_activity listed, silent long", true, time.Hour, time.Hour, threshold, false},
		{"no window_activity, silent half the threshold", false, 2 * time.Minute, time.Hour, threshold, true},
		{"no window_activity, not silent long enough", false, time.Minute, time.Hour, threshold, false},
		{"no window_activity, captured a moment ago", false, time.Hour, 30 * time.Second, threshold, false},
		{"no window_activity, captured a quarter threshold ago", false, time.Hour, time.Minute, threshold, true},
		{"no stall threshold", false, time.Hour, time.Hour, 0, false},
	}
	for _, tc := range tests {
		m := &incWatch{lastActivity: now.Add(-tc.silent), capturedAt: now.Add(-tc.sinceCaptured)}
		if tc.winActivity {
			m.winActivity = now.Add(-tc.silent)
		}
		if got := hashWantedLocked(m, tc.threshold, now); got != tc.want {
			t.Errorf("[%s] expected %v, got %v", tc.name, tc.want, got)
		}
	}
}

// TestHungTurnScreensThroughTheWatchdog: the captured first seconds of a
// hung Gemini CLI turn ("Executing Hooks" above an empty input prompt)
// and Codex's hung turn never end the turn, however long they stay put
// (the issue: `working -> idle (prompt) [screen]` 2.3 s into a hang, so
// the hang was never stalled); the same agents' prompt after Esc does.
func TestHungTurnScreensThroughTheWatchdog(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		kind, file string
		ends       bool
	}{
		{herd.AgentGemini, "gemini/0.61.0/screen-hooks-running.txt", false},
		{herd.AgentGemini, "gemini/0.61.0/screen-working-a.txt", false},
		{herd.AgentGemini, "gemini/0.61.0/screen-after-esc.txt", true},
		{herd.AgentCodex, "codex/0.171.0/screen-turn-start.txt", false},
		{herd.AgentCodex, "codex/0.171.0/screen-working-a.txt", false},
		{herd.AgentCodex, "codex/0.171.0/screen-after-esc.txt", true},
	} {
		sc := agents.ClassifyScreen(c.kind, readString(t, "../agents/testdata/"+c.file))
		act, _, ok := screenActivity(screenFacts{Screen: sc, Current: herd.ActivityWorking, HooksSeen: true,
			LastHookAt: t0.Add(-time.Minute), Since: t0, Now: t0.Add(time.Hour)})
		if ends := ok && act == herd.ActivityIdle; ends != c.ends {
			t.Errorf("[%s] expected the turn ended=%v, got %q/%v", c.file, c.ends, act, ok)
		}
	}
}
