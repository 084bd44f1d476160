package agents

import (
	"reflect"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"herd"
)

// FuzzStreamLine: any line a headless agent prints on stdout is read as a
// Signal without a panic, for every agent kind, and the Signal is within
// its bounds: an event, tool, error and message cut to their limits and
// valid UTF-8, a session id only when valid, an activity herd knows, a
// reset time only after now and within a week; folding it into a state
// twice is folding it once.
func FuzzStreamLine(f *testing.F) {
	for _, s := range []string{
		`{"type":"system","subtype":"init","session_id":"0f8fad5b-d9cb-469f-a165-70867728950e","model":"claude-sonnet-4-5"}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}`,
		`{"type":"system","subtype":"api_retry","error":"rate_limit","api_error_status":429}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"result":"Claude AI usage limit reached|1800003600"}`,
		`{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}`,
		`{"type":"item.started","item":{"type":"mcp_tool_call","tool":"herd_get"}}`,
		`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again in 3 hours 20 minutes."}}`,
		`{"type":"error","message":"Reconnecting... 2/5"}`,
		`{"type":"init","sessionId":"abc","model":"gemini-2.5-pro"}`,
		`{"type":"tool_use","tool_name":"run_shell_command"}`,
		`{"type":"result","status":"error","error":{"message":"Quota exceeded; resets at 5pm"}}`,
		`{"type":"error","severity":"warning","message":"Retrying"}`,
		`plain text`, `{"session_id":"-rm"}`, `{"type":"` + "\xff\xfe" + `"}`, `{}`, `{`,
	} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, line string) {
		for _, kind := range []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini, herd.AgentGeneric} {
			s := ParseLine(kind, []byte(line), now)
			checkSignal(t, kind, line, s, now)
			if len(s.Event) > maxTypeLen {
				t.Fatalf("%s %q: event of %d bytes", kind, line, len(s.Event))
			}
			once := Apply(State{}, s)
			if twice := Apply(once, s); !reflect.DeepEqual(once, twice) {
				t.Fatalf("%s %q: folded twice %+v, once %+v", kind, line, twice, once)
			}
		}
	})
}

// checkSignal fails t unless s is within a Signal's bounds.
func checkSignal(t *testing.T, kind, in string, s Signal, now time.Time) {
	t.Helper()
	for _, x := range []struct {
		what, v string
		max     int
	}{{"event", s.Event, MaxPayload}, {"tool", s.Tool, MaxToolName}, {"error", s.Error, MaxMessage}, {"message", s.Message, MaxMessage}} {
		if len(x.v) > x.max || !utf8.ValidString(x.v) {
			t.Fatalf("%s %q: %s of %d bytes (valid UTF-8: %v)", kind, in, x.what, len(x.v), utf8.ValidString(x.v))
		}
	}
	if s.AgentSessionID != "" && !ValidSessionID(s.AgentSessionID) {
		t.Fatalf("%s %q: an invalid session id kept: %q", kind, in, s.AgentSessionID)
	}
	known := []herd.Activity{"", herd.ActivityWorking, herd.ActivityWaiting, herd.ActivityIdle, herd.ActivityUnknown, herd.ActivityBlocked}
	if !slices.Contains(known, s.Activity) {
		t.Fatalf("%s %q: activity %q", kind, in, s.Activity)
	}
	if !s.ResetAt.IsZero() && (!s.ResetAt.After(now) || s.ResetAt.Sub(now) > maxReset) {
		t.Fatalf("%s %q: reset at %s, now %s", kind, in, s.ResetAt, now)
	}
	for _, n := range s.Notes {
		if len(n) > 512 || !utf8.ValidString(n) {
			t.Fatalf("%s %q: a note of %d bytes: %q", kind, in, len(n), n)
		}
	}
}
