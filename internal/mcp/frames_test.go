package mcp

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/internal/api"
)

// TestMalformedFramesAnswered: lines that are not JSON-RPC messages are
// answered with the spec's error codes, each recorded as an mcp_call, and
// the server goes on answering the well-formed ones on the same stream.
func TestMalformedFramesAnswered(t *testing.T) {
	d := &fakeDaemon{policy: api.MCPPolicy{}, views: []api.SessionView{{Name: "w-0", Role: "w"}}}
	s := New(Options{Daemon: d, Version: "test"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Run(t.Context(), s.StdioTransport(inR, outW)) }()
	replies := bufio.NewScanner(outR)
	replies.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if replies.Scan() {
				json.Unmarshal(replies.Bytes(), &m)
			}
			got <- m
		}()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no reply from the server")
			return nil
		}
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("the server stopped reading: %v", err)
		}
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("[initialize] expected a result, got %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, c := range []struct {
		name, line string
		code       float64
		id         any
	}{
		{"garbage", `hello there`, codeParseError, nil},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"x\":\"\xff\xfe\"}", codeParseError, nil},
		{"JSON-RPC 1.0", `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, codeInvalidRequest, 3.0},
		{"an empty batch", `[]`, codeInvalidRequest, nil},
		{"a bare number", `42`, codeInvalidRequest, nil},
		{"a batch with a bad one", `[{"jsonrpc":"2.0","id":4,"method":"tools/list"},{"jsonrpc":"9"}]`, codeInvalidRequest, nil},
	} {
		send(c.line)
		m := next()
		if errCode(m) != c.code || m["id"] != c.id {
			t.Errorf("[%s] expected error %v with id %v … got %v", c.name, c.code, c.id, m)
		}
	}
	// Still serving: a real request on the same stream is answered.
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if m := next(); m["id"] != 9.0 || m["result"] == nil {
		t.Errorf("[after the bad lines] expected tools/list answered, got %v", m)
	}
	d.mu.Lock()
	recorded := 0
	for _, c := range d.calls {
		if strings.HasPrefix(c.Error, "malformed message") {
			recorded++
		}
	}
	d.mu.Unlock()
	if recorded != 6 {
		t.Errorf("expected an mcp_call for each of the 6 malformed lines, got %d (%+v)", recorded, d.calls)
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the server did not end when its input closed")
	}
}

func TestCheckFrame(t *testing.T) {
	for _, c := range []struct {
		line string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 0},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, codeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1}`, 0}, // a response: the SDK's to judge
		{`{`, codeParseError},
		{"\x00", codeParseError},
	} {
		if code, _, why := checkFrame([]byte(c.line)); code != c.code {
			t.Errorf("[%q] expected code %d, got %d (%s)", c.line, c.code, code, why)
		}
	}
}

// TestFailedCallsRecorded: a call that fails before its tool records it (a
// session not found, arguments that name nothing) is an mcp_call event
// with its error, like every other call.
func TestFailedCallsRecorded(t *testing.T) {
	d := &fakeDaemon{views: []api.SessionView{{Name: "w-0", Role: "w"}}}
	cs := connect(t, d, "")
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"send", map[string]any{"session": "nope-0", "text": "hi"}},
		{"send", map[string]any{"session": "w-0", "role": "w", "text": "hi"}},
		{"describe_session", map[string]any{"session": "nope-0"}},
	} {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
		if err == nil && !res.IsError {
			t.Errorf("[%s %v] expected the call to fail", c.tool, c.args)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	failed := 0
	for _, c := range d.calls {
		if c.Error != "" {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("expected 3 failed calls recorded with their error, got %d: %+v", failed, d.calls)
	}
}
