package mockapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScript: a scripted conversation waits for its MCP server while its
// tools are not offered, then is answered with its tool calls in turn, one
// per result sent back, then with text; each request's tool results are
// recorded; a side request is answered as usual.
func TestScript(t *testing.T) {
	s, url := start(t)
	s.Script("herd-lead", []ToolCall{
		{Name: "mcp__herd__list_sessions", Input: map[string]any{}},
		{Name: "mcp__herd__send", Input: map[string]any{"session": "worker-0", "text": "hi"}},
	})
	tools := `"tools":[{"name":"Bash"},{"name":"` + WaitForMCP + `"}]`
	first := `{"role":"user","content":[{"type":"text","text":"herd-lead: go"}]}`
	result := func(id, text string) string {
		return `{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":[{"type":"text","text":"` + text + `"}]}]}`
	}
	type reply struct {
		Content []struct {
			Type, Name, Text, ID string
			Input                map[string]any
		}
	}
	ask := func(msgs string) reply {
		t.Helper()
		var m reply
		if err := json.NewDecoder(post(t, url, `{"model":"m",`+tools+`,"messages":[`+msgs+`]}`).Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// The server still connecting: wait for it.
	w := ask(first).Content[0]
	if w.Name != WaitForMCP || fmt.Sprint(w.Input["servers"]) != "[herd]" {
		t.Fatalf("[connecting] expected %s for herd, got %+v", WaitForMCP, w)
	}
	first += "," + result(w.ID, "herd connected")
	tools = `"tools":[{"name":"Bash"},{"name":"mcp__herd__list_sessions"},{"name":"mcp__herd__send"}]`
	c1 := ask(first).Content[0]
	if c1.Name != "mcp__herd__list_sessions" {
		t.Fatalf("[first] expected list_sessions called, got %+v", c1)
	}
	c2 := ask(first + "," + result(c1.ID, "worker-0 running")).Content[0]
	if c2.Name != "mcp__herd__send" || c2.Input["session"] != "worker-0" {
		t.Fatalf("[second] expected send to worker-0, got %+v", c2)
	}
	if m := ask(first + "," + result(c1.ID, "worker-0 running") + "," + result(c2.ID, "delivered")); m.Content[0].Type != "text" || m.Content[0].Text != ReplyText {
		t.Errorf("[last] expected the text answer, got %+v", m)
	}
	// A side request (no such tool offered) is not part of the script.
	var side reply
	json.NewDecoder(post(t, url, `{"model":"m","messages":[`+first+`]}`).Body).Decode(&side)
	if side.Content[0].Type != "text" {
		t.Errorf("[side] expected text, got %+v", side)
	}
	recs := s.Records()
	var got []string
	for _, r := range recs {
		var res []string
		for _, x := range r.Results {
			res = append(res, x.Text)
		}
		got = append(got, r.ToolName+"|"+strings.Join(res, ","))
	}
	want := []string{WaitForMCP + "|", "mcp__herd__list_sessions|herd connected", "mcp__herd__send|worker-0 running", "|delivered", "|herd connected"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

// TestScriptToolSearch: while the script's tools are deferred (only
// ToolSearch offered), the mock searches for them, each named once.
func TestScriptToolSearch(t *testing.T) {
	s, url := start(t)
	s.Script("herd-lead", []ToolCall{{Name: "mcp__herd__send"}, {Name: "mcp__herd__wait"}, {Name: "mcp__herd__send"}})
	var m struct {
		Content []struct {
			Name  string
			Input map[string]any
		}
	}
	body := `{"model":"m","tools":[{"name":"Bash"},{"name":"` + ToolSearch + `"}],"messages":[{"role":"user","content":"herd-lead: go"}]}`
	if err := json.NewDecoder(post(t, url, body).Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"query": "select:mcp__herd__send,mcp__herd__wait", "max_results": float64(2)}
	if len(m.Content) != 1 || m.Content[0].Name != ToolSearch || !cmp.Equal(m.Content[0].Input, want) {
		t.Errorf("expected %s %v, got %+v", ToolSearch, want, m)
	}
}

// TestScriptTurns: one call per prompt typed: the first prompt gets the
// first call, its result the text that ends the turn; the next prompt the
// next call; a prompt past the calls the text.
func TestScriptTurns(t *testing.T) {
	s, url2 := start(t)
	s.ScriptTurns("herd-task", []ToolCall{
		{Name: "Bash", Input: map[string]any{"command": "first"}},
		{Name: "Bash", Input: map[string]any{"command": "second"}},
	})
	type reply struct {
		Content []struct {
			Type, Name, Text, ID string
			Input                map[string]any
		}
	}
	ask := func(msgs string) reply {
		t.Helper()
		var m reply
		if err := json.NewDecoder(post(t, url2, `{"model":"m","tools":[{"name":"Bash"}],"messages":[`+msgs+`]}`).Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	user := func(text string) string {
		return `{"role":"user","content":[{"type":"text","text":"` + text + `"}]}`
	}
	result := func(id string) string {
		return `{"role":"assistant","content":[]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":[{"type":"text","text":"ok"}]}]}`
	}
	conv := user("herd-task: do it")
	c1 := ask(conv).Content[0]
	if c1.Name != "Bash" || c1.Input["command"] != "first" {
		t.Fatalf("[turn 1] expected the first call, got %+v", c1)
	}
	conv += "," + result(c1.ID)
	if m := ask(conv).Content[0]; m.Type != "text" || m.Text != ReplyText {
		t.Fatalf("[turn 1 result] expected the text that ends the turn, got %+v", m)
	}
	conv += `,{"role":"assistant","content":[{"type":"text","text":"done"}]},` + user("the check failed: fix it")
	c2 := ask(conv).Content[0]
	if c2.Name != "Bash" || c2.Input["command"] != "second" {
		t.Fatalf("[turn 2] expected the second call, got %+v", c2)
	}
	conv += "," + result(c2.ID) + `,{"role":"assistant","content":[{"type":"text","text":"done"}]},` + user("more")
	if m := ask(conv).Content[0]; m.Type != "text" {
		t.Errorf("[turn 3] expected text past the calls, got %+v", m)
	}
}
