package mockapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// ToolCall is one tool_use a scripted conversation answers with.
type ToolCall struct {
	Name  string         // the tool, as the agent names it (mcp__herd__send)
	Input map[string]any // its arguments
	id    string         // the tool_use's id; "" for a new one
}

// ToolResult is one tool result an agent sent back.
type ToolResult struct {
	ToolUseID string
	Text      string // the result's text (its text blocks joined)
	IsError   bool
}

// Claude Code's tools for reaching MCP tools that are not offered yet:
// WaitForMCP waits for servers still connecting; ToolSearch loads deferred
// tools (by default MCP tools are deferred, offered once searched for).
const (
	WaitForMCP = "WaitForMcpServers"
	ToolSearch = "ToolSearch"
)

// script is a conversation the mock drives: a tool call per turn.
type script struct {
	trigger string
	calls   []ToolCall
	issued  map[string]bool // ids of the tool_uses of calls sent so far
	// perTurn: one call per prompt typed (ScriptTurns), the turn ended
	// with ReplyText once its call's result is back.
	perTurn bool
}

// ScriptTurns is Script with one call per turn: the conversation's
// first prompt is answered with calls[0], the next prompt typed into it
// with calls[1], and so on; each call's result with ReplyText, which
// ends the turn. Prompts past the calls are answered as usual.
func (s *Server) ScriptTurns(trigger string, calls []ToolCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = &script{trigger: trigger, calls: calls, issued: map[string]bool{}, perTurn: true}
}

// Script makes the mock drive a conversation whose first user message
// contains trigger: it answers with calls[0], and each time the agent
// sends a tool result back, with the next call; after the last one's
// result, with ReplyText. The tool results each request carried are in
// its Record (Results). As a model would, while calls[0]'s tool is not
// offered yet but WaitForMCP is (its MCP server still connecting), it
// calls WaitForMCP for that server first. Requests that offer neither (an
// agent's side requests: titles, topics) are answered as usual.
func (s *Server) Script(trigger string, calls []ToolCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = &script{trigger: trigger, calls: calls, issued: map[string]bool{}}
}

// scripted answers req when it belongs to the script's conversation, and
// reports whether it did.
func (s *Server) scripted(w http.ResponseWriter, req request, rec Record) bool {
	s.mu.Lock()
	sc := s.script
	s.mu.Unlock()
	if sc == nil || len(sc.calls) == 0 || !req.firstUserHas(sc.trigger) {
		return false
	}
	first := sc.calls[0].Name
	if !req.hasTool(first) {
		call, ok := sc.reach(req)
		if !ok {
			return false
		}
		call.id = s.nextID("toolu")
		rec.Trigger, rec.Status = sc.trigger, http.StatusOK
		rec.Tool, rec.ToolName, rec.ToolID = true, call.Name, call.id
		s.record(rec)
		s.answer(w, req, &call)
		return true
	}
	rec.Trigger, rec.Status = sc.trigger, http.StatusOK
	if sc.perTurn {
		_, result := req.lastUser()
		turn := req.turns() - 1
		if result || turn >= len(sc.calls) {
			s.record(rec)
			s.answer(w, req, nil)
			return true
		}
		call := sc.calls[turn]
		call.id = s.nextID("toolu")
		rec.Tool, rec.ToolName, rec.ToolID = true, call.Name, call.id
		s.record(rec)
		s.answer(w, req, &call)
		return true
	}
	// The results of the script's calls so far say how far it got: the
	// agent may retry a request, never skip one.
	n := 0
	s.mu.Lock()
	for _, id := range req.resultIDs() {
		if sc.issued[id] {
			n++
		}
	}
	s.mu.Unlock()
	if n >= len(sc.calls) {
		s.record(rec)
		s.answer(w, req, nil)
		return true
	}
	call := sc.calls[n]
	call.id = s.nextID("toolu")
	s.mu.Lock()
	sc.issued[call.id] = true
	s.mu.Unlock()
	rec.Tool, rec.ToolName, rec.ToolID = true, call.Name, call.id
	s.record(rec)
	s.answer(w, req, &call)
	return true
}

// blocks reads a message's content as blocks (nil for plain text).
func (m message) blocks() []block {
	var bs []block
	if json.Unmarshal(m.Content, &bs) != nil {
		return nil
	}
	return bs
}

// reach is the call that makes the script's tools offered, as a model
// would make it: wait for their server while it connects, else search
// for them.
func (sc *script) reach(req request) (ToolCall, bool) {
	server, ok := mcpServer(sc.calls[0].Name)
	switch {
	case ok && req.hasTool(WaitForMCP):
		return ToolCall{Name: WaitForMCP, Input: map[string]any{"servers": []string{server}}}, true
	case req.hasTool(ToolSearch):
		var names []string
		for _, c := range sc.calls {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
		return ToolCall{Name: ToolSearch, Input: map[string]any{"query": "select:" + strings.Join(names, ","), "max_results": len(names)}}, true
	}
	return ToolCall{}, false
}

// mcpServer is the server of an MCP tool's name (mcp__SERVER__TOOL).
func mcpServer(tool string) (string, bool) {
	rest, ok := strings.CutPrefix(tool, "mcp__")
	if !ok {
		return "", false
	}
	server, _, ok := strings.Cut(rest, "__")
	return server, ok
}

// resultIDs returns the tool_use ids of every tool result in the
// conversation.
func (r request) resultIDs() []string {
	var ids []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "tool_result" {
				ids = append(ids, b.ToolUseID)
			}
		}
	}
	return ids
}

// allResults returns every tool result of the conversation, oldest
// first.
func (r request) allResults() []ToolResult {
	var out []ToolResult
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "tool_result" {
				out = append(out, ToolResult{ToolUseID: b.ToolUseID, Text: resultText(b.Content), IsError: b.IsError})
			}
		}
	}
	return out
}

// lastResults returns the tool results of the last user message.
func (r request) lastResults() []ToolResult {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var out []ToolResult
		for _, b := range m.blocks() {
			if b.Type == "tool_result" {
				out = append(out, ToolResult{ToolUseID: b.ToolUseID, Text: resultText(b.Content), IsError: b.IsError})
			}
		}
		return out
	}
	return nil
}

// resultText is a tool result's content: a string, or text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	var b strings.Builder
	for _, x := range bs {
		if x.Type == "text" {
			b.WriteString(x.Text)
		}
	}
	return b.String()
}
