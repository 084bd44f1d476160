package agents

import (
	"bytes"
	"testing"
	"time"

	"herd"
)

// testdata/docs holds stream lines written after the Codex and Gemini CLI
// documentation (not captured from the CLIs).

func TestStreamLineTable(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		kind     string
		line     string
		event    string
		activity herd.Activity
		progress bool
		final    bool
		tool     string
		id       string
	}{
		{"text", herd.AgentClaude, "plain output", LineText, "", true, false, "", ""},
		{"broken json", herd.AgentClaude, "{nope", LineText, "", true, false, "", ""},
		{"json without type", herd.AgentClaude, `{"a":1}`, LineJSON, "", true, false, "", ""},
		{"claude init", herd.AgentClaude, `{"type":"system","subtype":"init","session_id":"s-1"}`, "system/init", herd.ActivityWorking, true, false, "", "s-1"},
		{"claude api retry", herd.AgentClaude, `{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded","session_id":"s-1"}`, "system/api_retry", "", false, false, "", "s-1"},
		{"claude other retry", herd.AgentClaude, `{"type":"system","subtype":"stream_retry"}`, "system/stream_retry", "", false, false, "", ""},
		{"claude bad id", herd.AgentClaude, `{"type":"system","subtype":"init","session_id":"-p"}`, "system/init", herd.ActivityWorking, true, false, "", ""},
		{"claude error result", herd.AgentClaude, `{"type":"result","subtype":"error_during_execution","is_error":true,"result":"boom"}`, "result", herd.ActivityBlocked, true, true, "", ""},
		{"codex reconnect", herd.AgentCodex, `{"type":"error","message":"Reconnecting... 2/5"}`, "error", "", false, false, "", ""},
		{"codex failed", herd.AgentCodex, `{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 2 hours."}}`, "turn.failed", herd.ActivityBlocked, true, true, "", ""},
		{"codex tool start", herd.AgentCodex, `{"type":"item.started","item":{"type":"command_execution"}}`, "item.started", herd.ActivityWorking, true, false, "command_execution", ""},
		{"codex legacy item", herd.AgentCodex, `{"type":"item.completed","item":{"item_type":"file_change"}}`, "item.completed", herd.ActivityWorking, true, false, "file_change", ""},
		{"gemini warning", herd.AgentGemini, `{"type":"error","severity":"warning","message":"slow"}`, "error", "", false, false, "", ""},
		{"gemini sessionId", herd.AgentGemini, `{"type":"init","sessionId":"g-1"}`, "init", herd.ActivityWorking, true, false, "", "g-1"},
		{"gemini failed", herd.AgentGemini, `{"type":"result","status":"error","error":{"type":"quota","message":"RESOURCE_EXHAUSTED"}}`, "result", herd.ActivityBlocked, true, true, "", ""},
		{"generic codex line", herd.AgentGeneric, `{"type":"turn.completed"}`, "turn.completed", herd.ActivityIdle, true, true, "", ""},
		{"generic gemini line", herd.AgentGeneric, `{"type":"tool_use","tool_name":"read_file"}`, "tool_use", herd.ActivityWorking, true, false, "read_file", ""},
		{"generic claude result", herd.AgentGeneric, `{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429 rate limit"}`, "result", herd.ActivityBlocked, true, true, "", ""},
		{"generic codex error", herd.AgentGeneric, `{"type":"error","message":"Reconnecting... 1/5"}`, "error", "", false, false, "", ""},
	}
	for _, tc := range tests {
		s := ParseLine(tc.kind, []byte(tc.line), now)
		if s.Event != tc.event || s.Activity != tc.activity || s.Progress != tc.progress || s.Final != tc.final || s.Tool != tc.tool || s.AgentSessionID != tc.id {
			t.Errorf("[%s] expected %s/%q progress=%v final=%v tool=%q id=%q, got %s/%q progress=%v final=%v tool=%q id=%q",
				tc.name, tc.event, tc.activity, tc.progress, tc.final, tc.tool, tc.id, s.Event, s.Activity, s.Progress, s.Final, s.Tool, s.AgentSessionID)
		}
	}
	s := ParseLine(herd.AgentCodex, []byte(`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 2 hours."}}`), now)
	if s.Reason != ReasonRateLimited || !s.ResetAt.Equal(now.Add(2*time.Hour)) {
		t.Errorf("codex usage limit: expected rate_limited until %v, got %+v", now.Add(2*time.Hour), s)
	}
}

func TestStreamDocFixtures(t *testing.T) {
	tests := []struct {
		file, kind string
		final      herd.Activity
		id         string
		tools      []string
	}{
		{"docs/codex-exec.jsonl", herd.AgentCodex, herd.ActivityIdle, "0199a213-81c0-7800-8aa1-bbab2a035a53", []string{"command_execution", "command_execution", "search", "file_change"}},
		{"docs/gemini-stream.jsonl", herd.AgentGemini, herd.ActivityIdle, "c25acda3-b8e2-4a33-9e4b-3d1f2a7c9e06", []string{"run_shell_command"}},
	}
	for _, tc := range tests {
		var st State
		var tools []string
		for _, l := range bytes.Split(bytes.TrimSpace(readFixture(t, tc.file)), []byte("\n")) {
			s := ParseLine(tc.kind, l, fixedNow)
			if s.Tool != "" {
				tools = append(tools, s.Tool)
			}
			st = Apply(st, s)
		}
		if st.Activity != tc.final || st.AgentSessionID != tc.id || len(tools) != len(tc.tools) {
			t.Errorf("[%s] expected %q id %q tools %q, got %q id %q tools %q", tc.file, tc.final, tc.id, tc.tools, st.Activity, st.AgentSessionID, tools)
			continue
		}
		for i := range tools {
			if tools[i] != tc.tools[i] {
				t.Errorf("[%s] tool %d: expected %q, got %q", tc.file, i, tc.tools[i], tools[i])
			}
		}
	}
}
