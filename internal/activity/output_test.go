package activity

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func readLines(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, append([]byte{}, sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseLineSamples(t *testing.T) {
	const cid = "8f3b2c1e-5d4a-4e7b-9c2f-1a6d3e8b7f90"
	const gid = "c25acda3-b8e2-4a33-9e4b-3d1f2a7c9e06"
	tests := []struct {
		file string
		want []Output
	}{
		{"claude_stream.jsonl", []Output{
			{Type: "system", AgentSessionID: cid},
			{Type: "assistant", AgentSessionID: cid},
			{Type: "assistant", Tool: "Bash", AgentSessionID: cid},
			{Type: "user", AgentSessionID: cid},
			{Type: "assistant", Tool: "Edit", AgentSessionID: cid}, // last tool_use block wins
			{Type: "user", AgentSessionID: cid},
			{Type: "assistant", AgentSessionID: cid},
			{Type: "result", AgentSessionID: cid, Final: true},
		}},
		{"codex_exec.jsonl", []Output{
			{Type: "thread.started", AgentSessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53"},
			{Type: "turn.started"},
			{Type: "item.completed"},
			{Type: "item.started", Tool: "command_execution"},
			{Type: "item.completed", Tool: "command_execution"},
			{Type: "item.started", Tool: "search"},
			{Type: "item.completed", Tool: "file_change"},
			{Type: "item.completed"},
			{Type: "turn.completed", Final: true},
		}},
		{"codex_exec_legacy.jsonl", []Output{
			{Type: "thread.started", AgentSessionID: "th_6c1f0e9a"},
			{Type: "item.started", Tool: "command_execution"},
			{Type: "item.completed"},
			{Type: "turn.failed", Final: true},
		}},
		{"gemini_stream.jsonl", []Output{
			{Type: "init", AgentSessionID: gid},
			{Type: "message"},
			{Type: "message"},
			{Type: "tool_use", Tool: "run_shell_command"},
			{Type: "tool_result"},
			{Type: "error"},
			{Type: "result", Final: true},
		}},
	}
	for _, tt := range tests {
		var got []Output
		for _, l := range readLines(t, tt.file) {
			got = append(got, ParseLine(l))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.file, diff)
		}
	}
}

func TestParseLineEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Output
	}{
		{"plain text", "Compiling foo v0.1.0", Output{Type: OutputText}},
		{"empty", "", Output{Type: OutputText}},
		{"spaces", "   \t", Output{Type: OutputText}},
		{"broken json", `{"type":"assistant"`, Output{Type: OutputText}},
		{"json array", `[1,2,3]`, Output{Type: OutputText}},
		{"json without type", `{"a":1}`, Output{Type: OutputJSON}},
		{"type not string", `{"type":5}`, Output{Type: OutputText}},
		{"crlf", "{\"type\":\"turn.started\"}\r\n", Output{Type: "turn.started"}},
		{"gemini camel session", `{"type":"init","sessionId":"abc"}`, Output{Type: "init", AgentSessionID: "abc"}},
		{"assistant message not object", `{"type":"assistant","message":"hi"}`, Output{Type: "assistant"}},
		{"assistant bad content", `{"type":"assistant","message":{"content":"x"}}`, Output{Type: "assistant"}},
		{"tool_use without name", `{"type":"assistant","message":{"content":[{"type":"tool_use"}]}}`, Output{Type: "assistant"}},
		{"codex item null", `{"type":"item.started","item":null}`, Output{Type: "item.started"}},
		{"long type clipped", `{"type":"` + strings.Repeat("x", 100) + `"}`, Output{Type: strings.Repeat("x", maxTypeLen)}},
	}
	for _, tt := range tests {
		got := ParseLine([]byte(tt.line))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestParseLineDropsBadIDsAndClipsTools: a session or thread id the resume
// command could read as a flag is dropped (the line still counts); tool
// names are cut to MaxToolName bytes of valid UTF-8.
func TestParseLineDropsBadIDsAndClipsTools(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	tests := []struct {
		name string
		line string
		want Output
	}{
		{"claude flag id", `{"type":"system","session_id":"--dangerously-skip-permissions"}`, Output{Type: "system"}},
		{"gemini flag id", `{"type":"init","sessionId":"-p"}`, Output{Type: "init"}},
		{"codex flag thread", `{"type":"thread.started","thread_id":"--yolo"}`, Output{Type: "thread.started"}},
		{"id with space", `{"type":"result","session_id":"a b"}`, Output{Type: "result", Final: true}},
		{"id too long", `{"type":"system","session_id":"` + strings.Repeat("a", 129) + `"}`, Output{Type: "system"}},
		{"valid id kept", `{"type":"system","session_id":"abc-1"}`, Output{Type: "system", AgentSessionID: "abc-1"}},
		{"claude long tool", `{"type":"assistant","message":{"content":[{"type":"tool_use","name":"` + strings.Repeat("t", 300) + `"}]}}`,
			Output{Type: "assistant", Tool: strings.Repeat("t", MaxToolName)}},
		{"gemini long tool", `{"type":"tool_use","tool_name":"` + long + `"}`, Output{Type: "tool_use", Tool: strings.Repeat("é", MaxToolName/2)}},
		{"gemini tool cut mid rune", `{"type":"tool_use","tool_name":"x` + long + `"}`, Output{Type: "tool_use", Tool: "x" + strings.Repeat("é", MaxToolName/2-1)}},
		{"codex long mcp tool", `{"type":"item.started","item":{"type":"mcp_tool_call","tool":"` + strings.Repeat("m", 200) + `"}}`,
			Output{Type: "item.started", Tool: strings.Repeat("m", MaxToolName)}},
		{"tool over the type bound kept", `{"type":"tool_use","tool_name":"` + strings.Repeat("t", 100) + `"}`, Output{Type: "tool_use", Tool: strings.Repeat("t", 100)}},
	}
	for _, tt := range tests {
		got := ParseLine([]byte(tt.line))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("[%s] expected … got … (-want +got):\n%s", tt.name, diff)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}`))
	f.Add([]byte(`{"type":"item.started","item":{"type":"command_execution"}}`))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o := ParseLine(b)
		if o.Type == "" || len(o.Type) > maxTypeLen || len(o.Tool) > MaxToolName || !utf8.ValidString(o.Tool) {
			t.Errorf("[fuzz] expected a bounded non-empty type and a bounded tool, got %+v", o)
		}
		if o.AgentSessionID != "" && !ValidAgentSessionID(o.AgentSessionID) {
			t.Errorf("[fuzz] expected no invalid session id, got %q", o.AgentSessionID)
		}
	})
}
