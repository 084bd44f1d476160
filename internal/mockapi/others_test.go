package mockapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func postTo(t *testing.T, url, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestResponsesAPI(t *testing.T) {
	s, url := start(t)
	tools := `"tools":[{"type":"function","name":"shell_command"}]`
	user := func(text string) string {
		return `{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}`
	}
	tests := []struct {
		name, input string
		events      string // SSE event names, space separated
		item        string // the type of the output item
		args        string // a substring of the function call's arguments
	}{
		{"text", user("hello"), "response.created response.output_item.added response.output_text.delta response.output_item.done response.completed", "message", ""},
		{"tool", user("run " + TriggerTool), "response.created response.output_item.added response.output_item.done response.completed", "function_call", `"command":"touch tool-ran"`},
		{"escalated tool", user("run " + TriggerTool + " " + TriggerEscalate), "response.created response.output_item.added response.output_item.done response.completed", "function_call", `"sandbox_permissions":"require_escalated"`},
		{"after the tool", user("run "+TriggerTool) + `,{"type":"function_call_output","call_id":"c","output":"ok"}`, "response.created response.output_item.added response.output_text.delta response.output_item.done response.completed", "message", ""},
	}
	for _, tc := range tests {
		resp := postTo(t, url, "/v1/responses", `{"model":"m","stream":true,`+tools+`,"input":[`+tc.input+`]}`)
		names, data := events(t, resp)
		if strings.Join(names, " ") != tc.events {
			t.Errorf("[%s] expected events %s, got %v", tc.name, tc.events, names)
			continue
		}
		item := data[len(data)-2]["item"].(map[string]any)
		args, _ := item["arguments"].(string)
		if item["type"] != tc.item || !strings.Contains(args, tc.args) {
			t.Errorf("[%s] expected a %s item with %s, got %v", tc.name, tc.item, tc.args, item)
		}
	}
	resp := postTo(t, url, "/v1/responses", `{"model":"m","input":[`+user(TriggerRateLimit)+`]}`)
	var e struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != 429 || e.Error.Type != "usage_limit_reached" || e.Error.ResetsAt == 0 {
		t.Errorf("rate limit: got %d %+v", resp.StatusCode, e)
	}
	recs := s.Records()
	if n := len(recs); n != 5 {
		t.Fatalf("expected 5 records, got %d", n)
	}
	// The tool calls name their call ids; the tool's output comes back
	// in the record of the request that carries it.
	if r := recs[1]; !r.Tool || r.ToolName != "shell_command" || r.ToolID == "" || !slices.Equal(r.Tools, []string{"shell_command"}) {
		t.Errorf("[tool] expected the call and its id recorded, got %+v", r)
	}
	if r := recs[3]; len(r.Results) != 1 || r.Results[0] != (ToolResult{ToolUseID: "c", Text: "ok"}) {
		t.Errorf("[after the tool] expected the output of call c recorded, got %+v", r.Results)
	}
	// Each user message is recorded, oldest first: what the agent sent of
	// its conversation (a resumed one carries the earlier messages).
	postTo(t, url, "/v1/responses", `{"model":"m","input":[`+user("first")+`,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},`+user("second")+`]}`)
	if r := s.Records()[5]; strings.Join(r.Users, "|") != "first\n|second\n" {
		t.Errorf("[users] expected first and second recorded, got %q", r.Users)
	}
}

func TestGeminiAPI(t *testing.T) {
	s, url := start(t)
	tools := `"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]`
	user := func(text string) string { return `{"role":"user","parts":[{"text":"` + text + `"}]}` }
	type answer struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string `json:"text"`
					FunctionCall *struct {
						Name string `json:"name"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	tests := []struct {
		name, contents, text, call string
	}{
		{"text", user("hello"), ReplyText, ""},
		{"tool", user("run " + TriggerTool), "", "run_shell_command"},
		{"tool result", user("run "+TriggerTool) + `,{"role":"model","parts":[{"functionCall":{"name":"run_shell_command"}}]},{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"ok"}}}]}`, ReplyText, ""},
		// Words typed after a refused call, appended to the prompt's turn
		// (the call dropped): what was typed last is no trigger.
		{"refused", `{"role":"user","parts":[{"text":"run ` + TriggerTool + `"},{"text":"no, use ls instead"}]}`, ReplyText, ""},
		// The tool's marker in a directory listing is no trigger.
		{"listing", user("files: " + ToolMarker + " " + TriggerRateLimit), "", ""},
	}
	for _, tc := range tests {
		resp := postTo(t, url, "/v1beta/models/m:generateContent", `{`+tools+`,"contents":[`+tc.contents+`]}`)
		if tc.name == "listing" {
			if resp.StatusCode != 429 {
				t.Errorf("[%s] expected 429, got %d", tc.name, resp.StatusCode)
			}
			continue
		}
		var a answer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || len(a.Candidates) != 1 {
			t.Errorf("[%s] bad answer: %v %+v", tc.name, err, a)
			continue
		}
		p := a.Candidates[0].Content.Parts[0]
		call := ""
		if p.FunctionCall != nil {
			call = p.FunctionCall.Name
		}
		if p.Text != tc.text || call != tc.call {
			t.Errorf("[%s] expected text %q call %q, got %q %q", tc.name, tc.text, tc.call, p.Text, call)
		}
	}
	// The function's response comes back in the record of the request
	// that carries it.
	if r := s.Records()[2]; len(r.Results) != 1 || r.Results[0] != (ToolResult{ToolUseID: "c1", Text: `{"output":"ok"}`}) || !slices.Equal(r.Tools, []string{"run_shell_command"}) {
		t.Errorf("[tool result] expected the response of call c1 recorded, got %+v", r.Results)
	}
	// Each user turn is recorded, oldest first.
	if r := s.Records()[2]; len(r.Users) != 2 || r.Users[0] != "run "+TriggerTool {
		t.Errorf("[tool result] expected the two user turns recorded, got %q", r.Users)
	}
	resp := postTo(t, url, "/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[`+user("hi")+`]}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("stream: content type %q", resp.Header.Get("Content-Type"))
	}
	_, data := events(t, resp)
	if len(data) != 1 || data[0]["candidates"] == nil {
		t.Errorf("stream: expected one data line with candidates, got %v", data)
	}
}

// TestToolCommands: with ToolCommands, each API's TriggerTool calls run
// the commands in order, the last one repeated.
func TestToolCommands(t *testing.T) {
	for _, api := range []struct {
		name, path, body, want string
	}{
		{"messages", "/v1/messages", `{"model":"m","max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"run ` + TriggerTool + `"}]}`, `"command":"%s"`},
		{"responses", "/v1/responses", `{"model":"m","tools":[{"type":"function","name":"shell_command"}],"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"run ` + TriggerTool + `"}]}]}`, `\"command\":\"%s\"`},
		{"gemini", "/v1beta/models/m:generateContent", `{"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}],"contents":[{"role":"user","parts":[{"text":"run ` + TriggerTool + `"}]}]}`, `"command":"%s"`},
	} {
		s, url := start(t)
		s.ToolCommands("echo one", "echo two")
		for _, cmd := range []string{"echo one", "echo two", "echo two"} {
			resp := postTo(t, url, api.path, api.body)
			b, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf(api.want, cmd); !strings.Contains(string(b), want) {
				t.Errorf("[%s] expected a call running %q (%s) … got %s", api.name, cmd, want, b)
			}
		}
	}
}

// TestAllResults: a refused call's result sent before the person's
// words is no result of the last user message, but the record keeps it
// among the conversation's.
func TestAllResults(t *testing.T) {
	s, url := start(t)
	postTo(t, url, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"go"},{"role":"assistant","content":[]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"rejected"},{"type":"text","text":"no"}]}]}`)
	postTo(t, url, "/v1/responses", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},`+
		`{"type":"function_call_output","call_id":"c1","output":"aborted"},{"type":"message","role":"user","content":[{"type":"input_text","text":"no"}]}]}`)
	postTo(t, url, "/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"run_shell_command"}}]},`+
		`{"role":"user","parts":[{"functionResponse":{"id":"g1","name":"run_shell_command","response":{"error":"cancelled"}}}]},{"role":"user","parts":[{"text":"no"}]}]}`)
	want := [][]ToolResult{
		{{ToolUseID: "t1", Text: "rejected", IsError: true}},
		{{ToolUseID: "c1", Text: "aborted"}},
		{{ToolUseID: "g1", Text: `{"error":"cancelled"}`}},
	}
	recs := s.Records()
	if len(recs) != len(want) {
		t.Fatalf("expected %d records, got %d", len(want), len(recs))
	}
	for i, r := range recs {
		if !slices.Equal(r.AllResults, want[i]) {
			t.Errorf("[%s] expected every result %+v, got %+v", r.Path, want[i], r.AllResults)
		}
	}
}
