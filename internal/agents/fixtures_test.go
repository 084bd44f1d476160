package agents

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
)

// The fixtures under testdata/claude/<version> were captured from the
// real Claude Code talking to internal/mockapi, by TestRealClaude with
// HERD_CAPTURE_FIXTURES=1 (scripts/real-agents.sh --capture); machine
// paths are replaced by /home/user.

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forEachClaude runs f on every captured Claude Code version
// (testdata/claude/<version>).
func forEachClaude(t *testing.T, f func(t *testing.T, dir string)) {
	ents, err := os.ReadDir(filepath.Join("testdata", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() {
			n++
			t.Run(e.Name(), func(t *testing.T) { f(t, filepath.Join("claude", e.Name())) })
		}
	}
	if n == 0 {
		t.Fatal("no captured Claude Code version under testdata/claude")
	}
}

func TestClaudeHookFixtures(t *testing.T)        { forEachClaude(t, claudeHookFixtures) }
func TestClaudeSessionReplay(t *testing.T)       { forEachClaude(t, claudeSessionReplay) }
func TestClaudeScreenFixtures(t *testing.T)      { forEachClaude(t, claudeScreenFixtures) }
func TestClaudeSpinnerIsNoProgress(t *testing.T) { forEachClaude(t, claudeSpinnerIsNoProgress) }
func TestClaudeStreamFixtures(t *testing.T)      { forEachClaude(t, claudeStreamFixtures) }

// fixedNow is the present for reset-time parsing in fixture tests.
var fixedNow = time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)

func claudeHookFixtures(t *testing.T, dir string) {
	tests := []struct {
		file     string
		event    string
		activity herd.Activity
		reason   string
		progress bool
		inTool   bool
		ended    bool
		tool     string
	}{
		{"hook-session-start-startup.json", HookSessionStart, herd.ActivityIdle, "", true, false, false, ""},
		{"hook-session-start-resume.json", HookSessionStart, herd.ActivityIdle, "", true, false, false, ""},
		{"hook-user-prompt-submit.json", HookUserPromptSubmit, herd.ActivityWorking, "", true, false, false, ""},
		{"hook-pre-tool-use.json", HookPreToolUse, herd.ActivityWorking, "", true, true, false, "Bash"},
		{"hook-permission-request.json", HookPermissionRequest, herd.ActivityWaiting, ReasonPermission, true, false, false, "Bash"},
		{"hook-notification-permission.json", HookNotification, herd.ActivityWaiting, ReasonPermission, true, false, false, ""},
		{"hook-post-tool-use.json", HookPostToolUse, herd.ActivityWorking, "", true, false, false, "Bash"},
		{"hook-stop.json", HookStop, herd.ActivityIdle, "", true, false, false, ""},
		{"hook-stop-failure.json", HookStopFailure, herd.ActivityBlocked, ReasonRateLimited, true, false, false, ""},
		{"hook-notification-idle.json", HookNotification, "", "", false, false, false, ""},
		{"hook-session-end.json", HookSessionEnd, herd.ActivityIdle, "", true, false, true, ""},
	}
	for _, tc := range tests {
		s, err := ParseHook(herd.AgentClaude, readFixture(t, dir+"/"+tc.file), "", fixedNow)
		if err != nil {
			t.Errorf("[%s] error %v", tc.file, err)
			continue
		}
		if s.Event != tc.event || s.Activity != tc.activity || s.Reason != tc.reason || s.Progress != tc.progress ||
			s.InTool != tc.inTool || s.Ended != tc.ended || s.Tool != tc.tool {
			t.Errorf("[%s] expected %s/%q/%q progress=%v inTool=%v ended=%v tool=%q, got %s/%q/%q progress=%v inTool=%v ended=%v tool=%q",
				tc.file, tc.event, tc.activity, tc.reason, tc.progress, tc.inTool, tc.ended, tc.tool,
				s.Event, s.Activity, s.Reason, s.Progress, s.InTool, s.Ended, s.Tool)
		}
		if s.AgentSessionID == "" || s.TranscriptPath == "" {
			t.Errorf("[%s] no session id or transcript path: %+v", tc.file, s)
		}
	}
}

// TestClaudeSessionReplay folds the captured session in order: the
// activity after each event is the table, and the idle reminder
// after a finished turn leaves it idle.
func claudeSessionReplay(t *testing.T, dir string) {
	steps := []struct {
		file string
		want herd.Activity
	}{
		{"hook-session-start-startup.json", herd.ActivityIdle},
		{"hook-user-prompt-submit.json", herd.ActivityWorking},
		{"hook-stop.json", herd.ActivityIdle},
		{"hook-user-prompt-submit.json", herd.ActivityWorking},
		{"hook-pre-tool-use.json", herd.ActivityWorking},
		{"hook-permission-request.json", herd.ActivityWaiting},
		{"hook-notification-permission.json", herd.ActivityWaiting},
		{"hook-post-tool-use.json", herd.ActivityWorking},
		{"hook-stop.json", herd.ActivityIdle},
		{"hook-notification-idle.json", herd.ActivityIdle},
		{"hook-user-prompt-submit.json", herd.ActivityWorking},
		{"hook-stop-failure.json", herd.ActivityBlocked},
		{"hook-notification-idle.json", herd.ActivityBlocked},
		{"hook-session-end.json", herd.ActivityIdle},
		{"hook-session-start-resume.json", herd.ActivityIdle},
	}
	var st State
	for i, step := range steps {
		s, err := ParseHook(herd.AgentClaude, readFixture(t, dir+"/"+step.file), "", fixedNow)
		if err != nil {
			t.Fatal(err)
		}
		st = Apply(st, s)
		if st.Activity != step.want {
			t.Errorf("[step %d %s] expected %q, got %q", i, step.file, step.want, st.Activity)
		}
		if CanStall(st.Activity) != (st.Activity == herd.ActivityWorking) {
			t.Errorf("[step %d %s] CanStall(%q) = %v", i, step.file, st.Activity, CanStall(st.Activity))
		}
	}
	if !st.Ended && st.LastEvent != HookSessionStart {
		t.Errorf("expected the resumed session to be live, got %+v", st)
	}
}

func claudeScreenFixtures(t *testing.T, dir string) {
	tests := []struct {
		file     string
		activity herd.Activity
		reason   string
		running  bool
		prompt   bool
	}{
		{"screen-trust.txt", herd.ActivityWaiting, ReasonStartupPrompt, false, false},
		{"screen-api-key.txt", herd.ActivityWaiting, ReasonStartupPrompt, false, false},
		{"screen-idle.txt", herd.ActivityIdle, "", false, true},
		{"screen-after-turn.txt", herd.ActivityIdle, "", false, true},
		{"screen-spinner-start.txt", herd.ActivityWorking, "", true, true},
		{"screen-spinner-timer-a.txt", herd.ActivityWorking, "", true, true},
		{"screen-spinner-timer-b.txt", herd.ActivityWorking, "", true, true},
		{"screen-after-esc.txt", herd.ActivityIdle, "", false, true},
		{"screen-permission.txt", herd.ActivityWaiting, ReasonPermission, false, false},
		{"screen-rate-limited.txt", herd.ActivityIdle, "", false, true},
		{"screen-resumed.txt", herd.ActivityIdle, "", false, true},
	}
	for _, tc := range tests {
		sc := ClassifyScreen(herd.AgentClaude, string(readFixture(t, dir+"/"+tc.file)))
		if sc.Activity != tc.activity || sc.Reason != tc.reason || sc.Running != tc.running || sc.Prompt != tc.prompt {
			t.Errorf("[%s] expected %q/%q running=%v prompt=%v, got %q/%q running=%v prompt=%v",
				tc.file, tc.activity, tc.reason, tc.running, tc.prompt, sc.Activity, sc.Reason, sc.Running, sc.Prompt)
		}
		if len(sc.Hash) != 32 {
			t.Errorf("[%s] hash %q", tc.file, sc.Hash)
		}
	}
}

// TestClaudeSpinnerIsNoProgress: the captures of one hung turn, seconds
// apart, differ on screen (spinner frame, verb, timer) but not once
// normalised; a finished turn differs from all of them.
func claudeSpinnerIsNoProgress(t *testing.T, dir string) {
	a := string(readFixture(t, dir+"/screen-spinner-timer-a.txt"))
	b := string(readFixture(t, dir+"/screen-spinner-timer-b.txt"))
	start := string(readFixture(t, dir+"/screen-spinner-start.txt"))
	if a == b {
		t.Fatal("fixtures a and b are identical: they prove nothing")
	}
	ha := ClassifyScreen(herd.AgentClaude, a).Hash
	for _, other := range []string{b, start} {
		if h := ClassifyScreen(herd.AgentClaude, other).Hash; h != ha {
			t.Errorf("expected the same hash, got a different one:\n%s\n---\n%s", Normalize(a), Normalize(other))
		}
	}
	done := ClassifyScreen(herd.AgentClaude, string(readFixture(t, dir+"/screen-after-esc.txt"))).Hash
	if done == ha {
		t.Error("the screen after Esc hashes like the running turn")
	}
}

func claudeStreamFixtures(t *testing.T, dir string) {
	tests := []struct {
		file    string
		final   herd.Activity
		reason  string
		retries int
		tool    string
	}{
		{"stream-ok.jsonl", herd.ActivityIdle, "", 0, ""},
		{"stream-tool.jsonl", herd.ActivityIdle, "", 0, "Bash"},
		{"stream-rate-limit.jsonl", herd.ActivityBlocked, ReasonRateLimited, 0, ""},
		{"stream-overloaded.jsonl", herd.ActivityBlocked, ReasonAPIError, 2, ""},
	}
	for _, tc := range tests {
		var st State
		retries, progress := 0, 0
		var id string
		for _, l := range bytes.Split(bytes.TrimSpace(readFixture(t, dir+"/"+tc.file)), []byte("\n")) {
			s := ParseLine(herd.AgentClaude, l, fixedNow)
			if s.Event == "system/api_retry" {
				retries++
				if s.Progress || s.Activity != "" {
					t.Errorf("[%s] api_retry is progress or sets activity: %+v", tc.file, s)
				}
			} else if s.Progress {
				progress++
			}
			if s.AgentSessionID != "" {
				id = s.AgentSessionID
			}
			st = Apply(st, s)
		}
		if st.Activity != tc.final || st.Reason != tc.reason || retries != tc.retries || st.LastTool != tc.tool {
			t.Errorf("[%s] expected %q/%q retries=%d tool=%q, got %q/%q retries=%d tool=%q",
				tc.file, tc.final, tc.reason, tc.retries, tc.tool, st.Activity, st.Reason, retries, st.LastTool)
		}
		if tc.final == herd.ActivityBlocked && st.Error == "" {
			t.Errorf("[%s] blocked without the error", tc.file)
		}
		if id == "" || progress == 0 {
			t.Errorf("[%s] session id %q, %d progress lines", tc.file, id, progress)
		}
	}
}

func TestCodexFixtures(t *testing.T) {
	// The interactive CLI's hooks, notify and screens, per version; the
	// exec runs of the first.
	codexTUIFixtures(t, filepath.Join("codex", "0.169.0"))
	// A hung turn's first frame with its indicator drawn.
	codexTUIFixtures(t, filepath.Join("codex", "0.171.0"), "screen-turn-start.txt")
	dir := filepath.Join("codex", "0.169.0")
	// Codex 0.171: the Interrupt hook (Esc in a hung turn; no Stop follows).
	for _, tc := range []struct {
		file     string
		activity herd.Activity
	}{
		{"hook-user-prompt-submit.json", herd.ActivityWorking},
		{"hook-interrupt.json", herd.ActivityIdle},
	} {
		s, err := ParseHook(herd.AgentCodex, readFixture(t, "codex/0.171.0/"+tc.file), "", fixedNow)
		if err != nil || s.Activity != tc.activity || !s.Progress || s.AgentSessionID == "" {
			t.Errorf("[0.171.0/%s] expected %q with progress and id, got %+v, %v", tc.file, tc.activity, s, err)
		}
	}
	exec := []struct {
		file   string
		final  herd.Activity
		reason string
		reset  bool
	}{
		{"exec-ok.jsonl", herd.ActivityIdle, "", false},
		{"exec-tool.jsonl", herd.ActivityIdle, "", false},
		{"exec-rate-limit.jsonl", herd.ActivityBlocked, ReasonRateLimited, true},
		{"exec-overloaded.jsonl", herd.ActivityBlocked, ReasonAPIError, false},
	}
	for _, tc := range exec {
		var st State
		for _, l := range bytes.Split(bytes.TrimSpace(readFixture(t, dir+"/"+tc.file)), []byte("\n")) {
			st = Apply(st, ParseLine(herd.AgentCodex, l, fixedNow))
		}
		if st.Activity != tc.final || st.Reason != tc.reason || st.ResetAt.IsZero() == tc.reset || st.AgentSessionID == "" {
			t.Errorf("[%s] expected %q/%q reset=%v, got %+v", tc.file, tc.final, tc.reason, tc.reset, st)
		}
	}
}

func TestGeminiFixtures(t *testing.T) {
	dir := filepath.Join("gemini", "0.61.0")
	hooks := []struct {
		file     string
		activity herd.Activity
		progress bool
		ended    bool
	}{
		{"hook-sessionstart.json", herd.ActivityIdle, true, false},
		{"hook-beforeagent.json", herd.ActivityWorking, true, false},
		{"hook-precompress.json", herd.ActivityWorking, true, false},
		{"hook-beforemodel.json", herd.ActivityWorking, false, false},
		{"hook-aftermodel.json", herd.ActivityWorking, true, false},
		{"hook-beforetool.json", herd.ActivityWorking, true, false},
		{"hook-aftertool.json", herd.ActivityWorking, true, false},
		{"hook-afteragent.json", herd.ActivityIdle, true, false},
		{"hook-sessionend.json", herd.ActivityIdle, true, true},
		{"hook-tui-afteragent.json", herd.ActivityIdle, true, false},
		{"hook-notification-permission.json", herd.ActivityWaiting, true, false},
	}
	for _, tc := range hooks {
		s, err := ParseHook(herd.AgentGemini, readFixture(t, dir+"/"+tc.file), "", fixedNow)
		if err != nil || s.Activity != tc.activity || s.Progress != tc.progress || s.Ended != tc.ended || s.AgentSessionID == "" {
			t.Errorf("[%s] expected %q progress=%v ended=%v with an id, got %+v, %v", tc.file, tc.activity, tc.progress, tc.ended, s, err)
		}
		if m, _ := filepath.Match(TranscriptPatterns(herd.AgentGemini, Where{Home: "/home/user", Cwd: "/home/user/proj", SessionID: s.AgentSessionID})[0], s.TranscriptPath); !m {
			t.Errorf("[%s] transcript %s not matched by the gemini pattern", tc.file, s.TranscriptPath)
		}
	}
	screens := []struct {
		file     string
		activity herd.Activity
		reason   string
	}{
		{"screen-trust.txt", herd.ActivityWaiting, ReasonStartupPrompt},
		{"screen-idle.txt", herd.ActivityIdle, ""},
		{"screen-after-turn.txt", herd.ActivityIdle, ""},
		{"screen-working-a.txt", herd.ActivityWorking, ""},
		{"screen-working-b.txt", herd.ActivityWorking, ""},
		// The first seconds of a turn: hooks run above an empty input
		// prompt; the turn is not over.
		{"screen-hooks-running.txt", herd.ActivityWorking, ""},
		{"screen-after-esc.txt", herd.ActivityIdle, ""},
		{"screen-permission.txt", herd.ActivityWaiting, ReasonPermission},
		{"screen-resumed.txt", herd.ActivityIdle, ""},
	}
	for _, tc := range screens {
		sc := ClassifyScreen(herd.AgentGemini, string(readFixture(t, dir+"/"+tc.file)))
		if sc.Activity != tc.activity || sc.Reason != tc.reason {
			t.Errorf("[%s] expected %q/%q, got %q/%q", tc.file, tc.activity, tc.reason, sc.Activity, sc.Reason)
		}
	}
	a := string(readFixture(t, dir+"/screen-working-a.txt"))
	b := string(readFixture(t, dir+"/screen-working-b.txt"))
	if a == b || ClassifyScreen(herd.AgentGemini, a).Hash != ClassifyScreen(herd.AgentGemini, b).Hash {
		t.Errorf("expected two different captures of one hung turn to hash alike:\n%s\n---\n%s", Normalize(a), Normalize(b))
	}
	streams := []struct {
		file   string
		final  herd.Activity
		reason string
		tool   string
	}{
		{"stream-ok.jsonl", herd.ActivityIdle, "", ""},
		{"stream-tool.jsonl", herd.ActivityIdle, "", "run_shell_command"},
		{"stream-rate-limit.jsonl", herd.ActivityBlocked, ReasonRateLimited, ""},
	}
	for _, tc := range streams {
		var st State
		for _, l := range bytes.Split(bytes.TrimSpace(readFixture(t, dir+"/"+tc.file)), []byte("\n")) {
			st = Apply(st, ParseLine(herd.AgentGemini, l, fixedNow))
		}
		if st.Activity != tc.final || st.Reason != tc.reason || st.LastTool != tc.tool || st.AgentSessionID == "" {
			t.Errorf("[%s] expected %q/%q tool %q, got %+v", tc.file, tc.final, tc.reason, tc.tool, st)
		}
	}
}

// codexTUIFixtures checks the captures of one interactive Codex session
// (TestRealCodexTUI) in dir; working names the screens of a running turn
// only that version has.
func codexTUIFixtures(t *testing.T, dir string, working ...string) {
	t.Helper()
	hooks := []struct {
		file     string
		activity herd.Activity
		reason   string
	}{
		{"hook-session-start.json", herd.ActivityIdle, ""},
		{"hook-user-prompt-submit.json", herd.ActivityWorking, ""},
		{"hook-pre-tool-use.json", herd.ActivityWorking, ""},
		{"hook-permission-request.json", herd.ActivityWaiting, ReasonPermission},
		{"hook-post-tool-use.json", herd.ActivityWorking, ""},
		{"hook-stop.json", herd.ActivityIdle, ""},
	}
	for _, tc := range hooks {
		s, err := ParseHook(herd.AgentCodex, readFixture(t, dir+"/"+tc.file), "", fixedNow)
		if err != nil || s.Activity != tc.activity || s.Reason != tc.reason || s.AgentSessionID == "" || s.TranscriptPath == "" {
			t.Errorf("[%s] expected %q/%q with id and transcript, got %+v, %v", tc.file, tc.activity, tc.reason, s, err)
		}
		// The transcript is where TranscriptPatterns looks.
		if m, _ := filepath.Match(TranscriptPatterns(herd.AgentCodex, Where{Home: "/home/user", SessionID: s.AgentSessionID})[0], s.TranscriptPath); !m {
			t.Errorf("[%s] transcript %s not matched by the codex pattern", tc.file, s.TranscriptPath)
		}
	}
	screens := []struct {
		file     string
		activity herd.Activity
		reason   string
	}{
		{"screen-trust.txt", herd.ActivityWaiting, ReasonStartupPrompt},
		{"screen-hooks-review.txt", herd.ActivityWaiting, ReasonStartupPrompt},
		{"screen-idle.txt", herd.ActivityIdle, ""},
		{"screen-after-turn.txt", herd.ActivityIdle, ""},
		{"screen-working-a.txt", herd.ActivityWorking, ""},
		{"screen-working-b.txt", herd.ActivityWorking, ""},
		{"screen-after-esc.txt", herd.ActivityIdle, ""},
		{"screen-permission.txt", herd.ActivityWaiting, ReasonPermission},
		{"screen-resumed.txt", herd.ActivityIdle, ""},
	}
	for _, f := range working {
		screens = append(screens, struct {
			file     string
			activity herd.Activity
			reason   string
		}{f, herd.ActivityWorking, ""})
	}
	for _, tc := range screens {
		sc := ClassifyScreen(herd.AgentCodex, string(readFixture(t, dir+"/"+tc.file)))
		if sc.Activity != tc.activity || sc.Reason != tc.reason {
			t.Errorf("[%s] expected %q/%q, got %q/%q", tc.file, tc.activity, tc.reason, sc.Activity, sc.Reason)
		}
	}
	n, err := ParseCodexNotify(readFixture(t, dir+"/notify-turn-complete.json"))
	if err != nil || n.Activity != herd.ActivityIdle || n.AgentSessionID == "" || n.Event != "agent-turn-complete" {
		t.Errorf("notify: expected idle with the thread id, got %+v, %v", n, err)
	}
	a := string(readFixture(t, dir+"/screen-working-a.txt"))
	b := string(readFixture(t, dir+"/screen-working-b.txt"))
	if a == b || ClassifyScreen(herd.AgentCodex, a).Hash != ClassifyScreen(herd.AgentCodex, b).Hash {
		t.Errorf("expected two different captures of one hung turn to hash alike:\n%s\n---\n%s", Normalize(a), Normalize(b))
	}
}
