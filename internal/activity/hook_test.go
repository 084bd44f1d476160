package activity

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestParseHookSamples(t *testing.T) {
	sid := "8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90"
	tests := []struct {
		file string
		want Hook
	}{
		{"session_start.json", Hook{HookEventName: HookSessionStart}},
		{"pre_tool_use.json", Hook{HookEventName: HookPreToolUse, ToolName: "Bash"}},
		{"permission_request.json", Hook{HookEventName: HookPermissionRequest, ToolName: "Bash"}},
		{"notification_permission.json", Hook{HookEventName: HookNotification, NotificationType: "permission_prompt", Message: "Claude needs your permission to use Bash"}},
		{"notification_idle_legacy.json", Hook{HookEventName: HookNotification, Message: "Claude is waiting for your input"}},
		{"stop.json", Hook{HookEventName: HookStop}},
		{"session_end.json", Hook{HookEventName: HookSessionEnd}},
	}
	for _, tt := range tests {
		data, err := os.ReadFile(filepath.Join("testdata", "hooks", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseHook(data)
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", tt.file, err)
			continue
		}
		tt.want.SessionID = sid
		tt.want.Cwd = "/home/dev/src/app"
		tt.want.TranscriptPath = "/home/dev/.claude/projects/-home-dev-src-app/" + sid + ".jsonl"
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.file, diff)
		}
	}
}

func TestParseHookErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string // substring of the error
	}{
		{"empty", nil, "decode"},
		{"garbage", []byte("not json"), "decode"},
		{"array", []byte(`[1,2]`), "decode"},
		{"null", []byte(`null`), "empty hook_event_name"},
		{"no event", []byte(`{"session_id":"x"}`), "empty hook_event_name"},
		{"trailing garbage", []byte(`{"hook_event_name":"Stop"} x`), "decode"},
		{"wrong type", []byte(`{"hook_event_name":3}`), "decode"},
		{"bad event", []byte(`{"hook_event_name":"Stop; rm -rf /"}`), "invalid hook_event_name"},
		{"long event", []byte(`{"hook_event_name":"` + strings.Repeat("A", 65) + `"}`), "longer than"},
		{"too large", append([]byte(`{"hook_event_name":"Stop","message":"`), bytes.Repeat([]byte("a"), MaxHookSize)...), "limit"},
	}
	for _, tt := range tests {
		_, err := ParseHook(tt.data)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%s] expected error containing %q, got %v", tt.name, tt.want, err)
		}
	}
}

func TestParseHookEventFallback(t *testing.T) {
	h, err := ParseHookEvent([]byte(`{"session_id":"s"}`), "Stop")
	if err != nil || h.HookEventName != "Stop" {
		t.Errorf("[fallback used] expected Stop, nil … got %q, %v", h.HookEventName, err)
	}
	h, err = ParseHookEvent([]byte(`{"hook_event_name":"PreToolUse"}`), "Stop")
	if err != nil || h.HookEventName != "PreToolUse" {
		t.Errorf("[payload wins] expected PreToolUse, nil … got %q, %v", h.HookEventName, err)
	}
	if _, err := ParseHookEvent([]byte(`{}`), ""); err == nil {
		t.Errorf("[no event anywhere] expected error, got nil")
	}
}

func TestApply(t *testing.T) {
	working := State{Activity: herd.ActivityWorking, LastEvent: HookUserPromptSubmit}
	waiting := State{Activity: herd.ActivityWaiting, InTool: true, Tool: "Bash", LastEvent: HookPermissionRequest}
	inTool := State{Activity: herd.ActivityWorking, InTool: true, Tool: "Task", LastEvent: HookPreToolUse}
	tests := []struct {
		name string
		prev State
		hook Hook
		want State
	}{
		{"session start", State{}, Hook{HookEventName: HookSessionStart, SessionID: "s1"},
			State{Activity: herd.ActivityWorking, AgentSessionID: "s1", LastEvent: HookSessionStart}},
		{"session start clears ended and waiting", State{Activity: herd.ActivityWaiting, Ended: true, InTool: true, Tool: "Bash"}, Hook{HookEventName: HookSessionStart},
			State{Activity: herd.ActivityWorking, LastEvent: HookSessionStart}},
		{"prompt submit", State{Activity: herd.ActivityIdle}, Hook{HookEventName: HookUserPromptSubmit},
			State{Activity: herd.ActivityWorking, LastEvent: HookUserPromptSubmit}},
		{"pre tool use", working, Hook{HookEventName: HookPreToolUse, ToolName: "Bash"},
			State{Activity: herd.ActivityWorking, InTool: true, Tool: "Bash", LastEvent: HookPreToolUse}},
		{"post tool use", inTool, Hook{HookEventName: HookPostToolUse, ToolName: "Task"},
			State{Activity: herd.ActivityWorking, Tool: "Task", LastEvent: HookPostToolUse}},
		{"post tool use failure", inTool, Hook{HookEventName: HookPostToolUseFailure},
			State{Activity: herd.ActivityWorking, Tool: "Task", LastEvent: HookPostToolUseFailure}},
		{"post tool use clears waiting", waiting, Hook{HookEventName: HookPostToolUse, ToolName: "Bash"},
			State{Activity: herd.ActivityWorking, Tool: "Bash", LastEvent: HookPostToolUse}},
		{"permission request", inTool, Hook{HookEventName: HookPermissionRequest, ToolName: "Bash"},
			State{Activity: herd.ActivityWaiting, InTool: true, Tool: "Bash", LastEvent: HookPermissionRequest}},
		{"notification permission type", working, Hook{HookEventName: HookNotification, NotificationType: "permission_prompt"},
			State{Activity: herd.ActivityWaiting, LastEvent: HookNotification}},
		{"notification idle type", State{Activity: herd.ActivityIdle}, Hook{HookEventName: HookNotification, NotificationType: "idle_prompt"},
			State{Activity: herd.ActivityWaiting, LastEvent: HookNotification}},
		{"notification elicitation", working, Hook{HookEventName: HookNotification, NotificationType: "elicitation_dialog"},
			State{Activity: herd.ActivityWaiting, LastEvent: HookNotification}},
		{"notification permission message", working, Hook{HookEventName: HookNotification, Message: "Claude needs your permission to use Bash"},
			State{Activity: herd.ActivityWaiting, LastEvent: HookNotification}},
		{"notification input message", working, Hook{HookEventName: HookNotification, Message: "Claude is Waiting for your input"},
			State{Activity: herd.ActivityWaiting, LastEvent: HookNotification}},
		{"notification other: no change", working, Hook{HookEventName: HookNotification, NotificationType: "auth_success", Message: "Authenticated"},
			State{Activity: herd.ActivityWorking, LastEvent: HookNotification}},
		{"notification other keeps waiting", waiting, Hook{HookEventName: HookNotification, NotificationType: "auth_success"},
			State{Activity: herd.ActivityWaiting, InTool: true, Tool: "Bash", LastEvent: HookNotification}},
		{"stop", inTool, Hook{HookEventName: HookStop},
			State{Activity: herd.ActivityIdle, Tool: "Task", LastEvent: HookStop}},
		{"stop clears waiting", waiting, Hook{HookEventName: HookStop},
			State{Activity: herd.ActivityIdle, Tool: "Bash", LastEvent: HookStop}},
		{"subagent stop keeps working", inTool, Hook{HookEventName: HookSubagentStop},
			State{Activity: herd.ActivityWorking, InTool: true, Tool: "Task", LastEvent: HookSubagentStop}},
		{"subagent stop after idle: working", State{Activity: herd.ActivityIdle}, Hook{HookEventName: HookSubagentStop},
			State{Activity: herd.ActivityWorking, LastEvent: HookSubagentStop}},
		{"subagent stop keeps waiting", waiting, Hook{HookEventName: HookSubagentStop},
			State{Activity: herd.ActivityWaiting, InTool: true, Tool: "Bash", LastEvent: HookSubagentStop}},
		{"session end", inTool, Hook{HookEventName: HookSessionEnd, SessionID: "s2"},
			State{Activity: herd.ActivityIdle, Tool: "Task", Ended: true, AgentSessionID: "s2", LastEvent: HookSessionEnd}},
		{"unknown event keeps waiting", waiting, Hook{HookEventName: "PreCompact"},
			State{Activity: herd.ActivityWaiting, InTool: true, Tool: "Bash", LastEvent: "PreCompact"}},
		{"empty session id keeps known one", State{AgentSessionID: "s1"}, Hook{HookEventName: HookStop},
			State{Activity: herd.ActivityIdle, AgentSessionID: "s1", LastEvent: HookStop}},
	}
	for _, tt := range tests {
		got := Apply(tt.prev, tt.hook)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestApplySequence replays a recorded turn: the permission wait survives an
// unrelated notification and is cleared by the tool finishing.
func TestApplySequence(t *testing.T) {
	files := []struct {
		file string
		want herd.Activity
	}{
		{"session_start.json", herd.ActivityWorking},
		{"pre_tool_use.json", herd.ActivityWorking},
		{"permission_request.json", herd.ActivityWaiting},
		{"notification_auth.json", herd.ActivityWaiting},
		{"notification_permission.json", herd.ActivityWaiting},
		{"stop.json", herd.ActivityIdle},
		{"notification_idle_legacy.json", herd.ActivityWaiting},
		{"session_end.json", herd.ActivityIdle},
	}
	var s State
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join("testdata", "hooks", f.file))
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHook(data)
		if err != nil {
			t.Fatalf("[%s] %v", f.file, err)
		}
		s = Apply(s, h)
		if s.Activity != f.want {
			t.Errorf("[%s] expected %s, got %s", f.file, f.want, s.Activity)
		}
	}
	if !s.Ended || s.AgentSessionID != "8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90" {
		t.Errorf("[end] expected ended with session id, got %+v", s)
	}
}

func TestHookEvents(t *testing.T) {
	ev := HookEvents()
	if len(ev) != 10 {
		t.Fatalf("[count] expected 10, got %d", len(ev))
	}
	ev[0] = "mutated"
	if HookEvents()[0] != HookSessionStart {
		t.Errorf("[copy] expected a fresh slice each call")
	}
}

func TestValidAgentSessionID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90", true},
		{"0199a213-81c0-7800-8aa1-bbab2a035a53", true},
		{"thread_1:a.b", true},
		{"s", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"--dangerously-skip-permissions", false},
		{"-x", false},
		{".hidden", false},
		{"_x", false},
		{"a b", false},
		{"a/b", false},
		{"a;rm -rf /", false},
		{"a\nb", false},
		{"a\x00", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := ValidAgentSessionID(tt.id); got != tt.want {
			t.Errorf("[%q] expected %v, got %v", tt.id, tt.want, got)
		}
	}
}

// TestParseHookDropsBadSessionID: an id that the resume command could read
// as a flag is dropped with a note; the event itself still counts.
func TestParseHookDropsBadSessionID(t *testing.T) {
	tests := []struct {
		name, sid string
		wantSID   string
		wantNote  bool
	}{
		{"uuid kept", "8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90", "8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90", false},
		{"none", "", "", false},
		{"flag", "--dangerously-skip-permissions", "", true},
		{"short flag", "-p", "", true},
		{"shell", "x; rm -rf ~", "", true},
		{"too long", strings.Repeat("a", 129), "", true},
		{"huge", strings.Repeat("-", 100000), "", true},
	}
	for _, tt := range tests {
		data := []byte(`{"hook_event_name":"PreToolUse","tool_name":"Bash","session_id":` + jsonString(tt.sid) + `}`)
		h, err := ParseHook(data)
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", tt.name, err)
			continue
		}
		if h.SessionID != tt.wantSID || h.HookEventName != HookPreToolUse || h.ToolName != "Bash" {
			t.Errorf("[%s] expected session id %q and the rest kept, got %+v", tt.name, tt.wantSID, h)
		}
		if got := len(h.Notes) == 1 && strings.Contains(h.Notes[0], "session_id"); got != tt.wantNote {
			t.Errorf("[%s] expected a note: %v, got %q", tt.name, tt.wantNote, h.Notes)
		}
		for _, n := range h.Notes {
			if len(n) > 300 || strings.Contains(n, "\n") {
				t.Errorf("[%s] expected one short log line, got %d bytes %q", tt.name, len(n), n)
			}
		}
		if s := Apply(State{}, h); s.AgentSessionID != tt.wantSID || s.Activity != herd.ActivityWorking {
			t.Errorf("[%s] expected the activity applied with session id %q, got %+v", tt.name, tt.wantSID, s)
		}
	}
}

// TestApplyIgnoresBadSessionID: a Hook built by hand (not parsed) cannot
// plant a flag-looking session id either.
func TestApplyIgnoresBadSessionID(t *testing.T) {
	got := Apply(State{AgentSessionID: "s1"}, Hook{HookEventName: HookStop, SessionID: "--resume"})
	if got.AgentSessionID != "s1" || got.Activity != herd.ActivityIdle {
		t.Errorf("[flag id] expected s1 kept and idle, got %+v", got)
	}
}

func TestParseHookClipsToolName(t *testing.T) {
	tests := []struct {
		name, tool string
		wantLen    int
	}{
		{"short", "Bash", 4},
		{"exact", strings.Repeat("t", MaxToolName), MaxToolName},
		{"ascii", strings.Repeat("t", 1000), MaxToolName},
		{"two-byte runes", strings.Repeat("é", 100), MaxToolName},
		{"rune cut in two", "a" + strings.Repeat("é", 100), MaxToolName - 1},
		{"mcp", "mcp__" + strings.Repeat("server", 30) + "__tool", MaxToolName},
	}
	for _, tt := range tests {
		h, err := ParseHook([]byte(`{"hook_event_name":"PreToolUse","tool_name":` + jsonString(tt.tool) + `}`))
		if err != nil {
			t.Fatalf("[%s] %v", tt.name, err)
		}
		if len(h.ToolName) != tt.wantLen || !utf8.ValidString(h.ToolName) || !strings.HasPrefix(tt.tool, h.ToolName) {
			t.Errorf("[%s] expected a valid %d-byte prefix, got %d bytes %q", tt.name, tt.wantLen, len(h.ToolName), h.ToolName)
		}
		if len(h.Notes) != 0 {
			t.Errorf("[%s] expected no note for a clipped tool name, got %q", tt.name, h.Notes)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
