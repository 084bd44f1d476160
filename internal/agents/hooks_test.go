package agents

import (
	"strings"
	"testing"
	"time"

	"herd"
)

func TestParseHookTable(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		kind     string
		payload  string
		fallback string
		activity herd.Activity
		reason   string
		progress bool
		ended    bool
	}{
		{"claude session start clear", herd.AgentClaude, `{"hook_event_name":"SessionStart","source":"clear"}`, "", herd.ActivityIdle, "", true, false},
		// An automatic compaction starts the session again in the middle
		// of a turn: not its end (PostCompact says which it was).
		{"claude session start compact", herd.AgentClaude, `{"hook_event_name":"SessionStart","source":"compact"}`, "", "", "", true, false},
		{"claude post compact manual", herd.AgentClaude, `{"hook_event_name":"PostCompact","trigger":"manual"}`, "", herd.ActivityIdle, "", true, false},
		{"claude post compact auto", herd.AgentClaude, `{"hook_event_name":"PostCompact","trigger":"auto"}`, "", herd.ActivityWorking, "", true, false},
		{"codex interrupt", herd.AgentCodex, `{"hook_event_name":"Interrupt"}`, "", herd.ActivityIdle, "", true, false},
		{"claude subagent start", herd.AgentClaude, `{"hook_event_name":"SubagentStart"}`, "", herd.ActivityWorking, "", true, false},
		{"claude subagent stop", herd.AgentClaude, `{"hook_event_name":"SubagentStop"}`, "", "", "", true, false},
		{"claude pre compact", herd.AgentClaude, `{"hook_event_name":"PreCompact"}`, "", herd.ActivityWorking, "", true, false},
		{"claude post tool failure", herd.AgentClaude, `{"hook_event_name":"PostToolUseFailure","tool_name":"Bash"}`, "", herd.ActivityWorking, "", true, false},
		{"claude elicitation", herd.AgentClaude, `{"hook_event_name":"Notification","notification_type":"elicitation_dialog"}`, "", herd.ActivityWaiting, "", true, false},
		{"claude auth notification", herd.AgentClaude, `{"hook_event_name":"Notification","notification_type":"auth_success"}`, "", "", "", false, false},
		{"claude legacy permission", herd.AgentClaude, `{"hook_event_name":"Notification","message":"Claude needs your permission to use Bash"}`, "", herd.ActivityWaiting, ReasonPermission, true, false},
		{"claude legacy idle", herd.AgentClaude, `{"hook_event_name":"Notification","message":"Claude is waiting for your input"}`, "", "", "", false, false},
		{"claude stop failure server", herd.AgentClaude, `{"hook_event_name":"StopFailure","error":"server_error","last_assistant_message":"API Error: 500"}`, "", herd.ActivityBlocked, ReasonAPIError, true, false},
		{"claude future event", herd.AgentClaude, `{"hook_event_name":"TeammateIdle"}`, "", "", "", false, false},
		{"fallback name", herd.AgentClaude, `{}`, "Stop", herd.ActivityIdle, "", true, false},
		{"codex session start", herd.AgentCodex, `{"hook_event_name":"SessionStart","session_id":"th_1","source":"startup"}`, "", herd.ActivityIdle, "", true, false},
		{"codex permission", herd.AgentCodex, `{"hook_event_name":"PermissionRequest","tool_name":"Bash"}`, "", herd.ActivityWaiting, ReasonPermission, true, false},
		{"codex stop", herd.AgentCodex, `{"hook_event_name":"Stop"}`, "", herd.ActivityIdle, "", true, false},
		{"gemini session start", herd.AgentGemini, `{"hook_event_name":"SessionStart","source":"startup"}`, "", herd.ActivityIdle, "", true, false},
		{"gemini before agent", herd.AgentGemini, `{"hook_event_name":"BeforeAgent","prompt":"x"}`, "", herd.ActivityWorking, "", true, false},
		{"gemini before model (retried)", herd.AgentGemini, `{"hook_event_name":"BeforeModel"}`, "", herd.ActivityWorking, "", false, false},
		{"gemini after model", herd.AgentGemini, `{"hook_event_name":"AfterModel"}`, "", herd.ActivityWorking, "", true, false},
		{"gemini before tool", herd.AgentGemini, `{"hook_event_name":"BeforeTool","tool_name":"run_shell_command"}`, "", herd.ActivityWorking, "", true, false},
		{"gemini permission", herd.AgentGemini, `{"hook_event_name":"Notification","notification_type":"ToolPermission","message":"Allow?"}`, "", herd.ActivityWaiting, ReasonPermission, true, false},
		{"gemini other notification", herd.AgentGemini, `{"hook_event_name":"Notification","notification_type":"Other"}`, "", "", "", false, false},
		{"gemini pre compress", herd.AgentGemini, `{"hook_event_name":"PreCompress"}`, "", herd.ActivityWorking, "", true, false},
		{"gemini after agent", herd.AgentGemini, `{"hook_event_name":"AfterAgent"}`, "", herd.ActivityIdle, "", true, false},
		{"gemini session end", herd.AgentGemini, `{"hook_event_name":"SessionEnd","reason":"exit"}`, "", herd.ActivityIdle, "", true, true},
	}
	for _, tc := range tests {
		s, err := ParseHook(tc.kind, []byte(tc.payload), tc.fallback, now)
		if err != nil {
			t.Errorf("[%s] error %v", tc.name, err)
			continue
		}
		if s.Activity != tc.activity || s.Reason != tc.reason || s.Progress != tc.progress || s.Ended != tc.ended {
			t.Errorf("[%s] expected %q/%q progress=%v ended=%v, got %q/%q progress=%v ended=%v",
				tc.name, tc.activity, tc.reason, tc.progress, tc.ended, s.Activity, s.Reason, s.Progress, s.Ended)
		}
	}
}

func TestParseHookRejects(t *testing.T) {
	for name, payload := range map[string]string{
		"not json":     `nope`,
		"array":        `[1]`,
		"no event":     `{"session_id":"a"}`,
		"bad event":    `{"hook_event_name":"Stop; rm -rf"}`,
		"long event":   `{"hook_event_name":"` + strings.Repeat("A", 65) + `"}`,
		"huge payload": `{"hook_event_name":"Stop","x":"` + strings.Repeat("a", MaxPayload) + `"}`,
	} {
		if _, err := ParseHook(herd.AgentClaude, []byte(payload), "", time.Now()); err == nil {
			t.Errorf("[%s] expected an error, got none", name)
		}
	}
}

func TestParseHookDropsBadSessionID(t *testing.T) {
	s, err := ParseHook(herd.AgentClaude, []byte(`{"hook_event_name":"Stop","session_id":"--resume"}`), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s.AgentSessionID != "" || len(s.Notes) != 1 || s.Activity != herd.ActivityIdle {
		t.Errorf("expected the id dropped with a note and the event kept, got %+v", s)
	}
	st := Apply(State{AgentSessionID: "good"}, Signal{AgentSessionID: "-x", Activity: herd.ActivityIdle})
	if st.AgentSessionID != "good" {
		t.Errorf("Apply took an invalid id: %+v", st)
	}
}

func TestStopFailureResetTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	s, err := ParseHook(herd.AgentClaude, []byte(`{"hook_event_name":"StopFailure","error":"rate_limit","last_assistant_message":"You've hit your limit · resets 5pm (UTC)"}`), "", now)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 22, 17, 0, 0, 0, time.UTC)
	if s.Activity != herd.ActivityBlocked || s.Reason != ReasonRateLimited || !s.ResetAt.Equal(want) || !strings.Contains(s.Error, "rate_limit") {
		t.Errorf("expected blocked rate_limited until %v, got %+v", want, s)
	}
	st := Apply(State{}, s)
	if st.Activity != herd.ActivityBlocked || !st.ResetAt.Equal(want) || CanStall(st.Activity) {
		t.Errorf("state: %+v", st)
	}
	// The next prompt clears the block.
	st = Apply(st, Signal{Event: HookUserPromptSubmit, Activity: herd.ActivityWorking})
	if !st.ResetAt.IsZero() || st.Error != "" || st.Reason != "" {
		t.Errorf("expected the block cleared, got %+v", st)
	}
}

func TestParseCodexNotify(t *testing.T) {
	tests := []struct {
		arg      string
		activity herd.Activity
		id       string
		err      bool
	}{
		{`{"type":"agent-turn-complete","thread-id":"0199a213-81c0","turn-id":"1","cwd":"/w","input-messages":["x"],"last-assistant-message":"done"}`, herd.ActivityIdle, "0199a213-81c0", false},
		{`{"type":"approval-requested","thread-id":"t1"}`, herd.ActivityWaiting, "t1", false},
		{`{"type":"something-new"}`, "", "", false},
		{`{"type":""}`, "", "", true},
		{`not json`, "", "", true},
	}
	for _, tc := range tests {
		s, err := ParseCodexNotify([]byte(tc.arg))
		if (err != nil) != tc.err || s.Activity != tc.activity || s.AgentSessionID != tc.id {
			t.Errorf("[%s] expected %q id %q err=%v, got %q id %q err=%v", tc.arg, tc.activity, tc.id, tc.err, s.Activity, s.AgentSessionID, err)
		}
	}
}

func TestNotifyIDIsWeak(t *testing.T) {
	title, err := ParseCodexNotify([]byte(`{"type":"agent-turn-complete","thread-id":"side-thread","input-messages":["Generate a concise, single-line task title"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if st := Apply(State{AgentSessionID: "main-thread"}, title); st.AgentSessionID != "main-thread" {
		t.Errorf("a notify replaced the known session id: %+v", st)
	}
	if st := Apply(State{}, title); st.AgentSessionID != "side-thread" {
		t.Errorf("a notify id was not taken when none was known: %+v", st)
	}
}

func TestCanStall(t *testing.T) {
	for a, want := range map[herd.Activity]bool{
		herd.ActivityWorking: true, herd.ActivityUnknown: true, "": true,
		herd.ActivityIdle: false, herd.ActivityWaiting: false, herd.ActivityBlocked: false,
	} {
		if got := CanStall(a); got != want {
			t.Errorf("CanStall(%q): expected %v, got %v", a, want, got)
		}
	}
}

// TestClaudeCompactFixtures replays the hooks of a real /compact (Claude
// Code 2.1.332): working from PreCompact, through the compaction's own
// SubagentStop and the SessionStart that follows it, to idle at
// PostCompact.
func TestClaudeCompactFixtures(t *testing.T) {
	steps := []struct {
		file string
		want herd.Activity
	}{
		{"hook-pre-compact.json", herd.ActivityWorking},
		{"hook-subagent-stop.json", herd.ActivityWorking},
		{"hook-session-start-compact.json", herd.ActivityWorking},
		{"hook-post-compact.json", herd.ActivityIdle},
	}
	st := State{Activity: herd.ActivityIdle}
	for _, step := range steps {
		s, err := ParseHook(herd.AgentClaude, readFixture(t, "claude-hooks/2.1.332/"+step.file), "", fixedNow)
		if err != nil {
			t.Fatalf("[%s] %v", step.file, err)
		}
		st = Apply(st, s)
		if st.Activity != step.want || st.AgentSessionID == "" {
			t.Errorf("[%s] expected %q with the session id, got %q %q", step.file, step.want, st.Activity, st.AgentSessionID)
		}
	}
}
