package mockapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The OpenAI Responses API (POST /v1/responses), as Codex speaks it: the
// same triggers as the Messages API, answered as streamed response events.

// responsesRequest holds the fields of a Responses API request the mock
// looks at.
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// lastUser returns the text of the last user message, whether a tool
// result follows it, and whether any user message holds word.
func (r responsesRequest) scan(word string) (last string, toolResult, anyHas bool) {
	for _, raw := range r.Input {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			toolResult = true
		case it.Role == "user":
			var b strings.Builder
			for _, c := range it.Content {
				b.WriteString(c.Text)
				b.WriteByte('\n')
			}
			last, toolResult = b.String(), false
			if strings.Contains(last, word) {
				anyHas = true
			}
		}
	}
	return last, toolResult, anyHas
}

// shellTool returns the name of the request's shell tool and the
// arguments that run command with it, or "" when it has none.
func (r responsesRequest) shellTool(escalate bool, command string) (name, args string) {
	for _, t := range r.Tools {
		var a any
		switch t.Name {
		case "shell_command":
			a = map[string]any{"command": command}
		case "exec_command":
			a = map[string]any{"cmd": command}
		case "shell":
			a = map[string]any{"command": []string{"bash", "-lc", command}}
		default:
			continue
		}
		if m, ok := a.(map[string]any); ok && escalate {
			// Asking to run outside the sandbox makes Codex ask the user
			// (approval policy on-request) whatever its sandbox can do.
			m["sandbox_permissions"] = "require_escalated"
			m["justification"] = "Create a marker file"
		}
		b, _ := json.Marshal(a)
		return t.Name, string(b)
	}
	return "", ""
}

// users returns the text of each user message, oldest first, each
// clipped as Record.Users says.
func (r responsesRequest) users() []string {
	var out []string
	for _, raw := range r.Input {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil || it.Role != "user" {
			continue
		}
		var b strings.Builder
		for _, c := range it.Content {
			b.WriteString(c.Text)
			b.WriteByte('\n')
		}
		out = append(out, clipUser(b.String()))
	}
	return out
}

// results returns the tool outputs the request carries back after its
// last user message (last), or all of them, oldest first.
func (r responsesRequest) results(last bool) []ToolResult {
	var out []ToolResult
	for _, raw := range r.Input {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			out = append(out, ToolResult{ToolUseID: it.CallID, Text: resultText(it.Output)})
		case it.Role == "user" && last:
			out = nil
		}
	}
	return out
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		s.record(Record{Path: r.URL.Path, Status: http.StatusBadRequest})
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "mockapi: "+err.Error())
		return
	}
	text, toolResult, toolAsked := req.scan(TriggerTool)
	rec := Record{Path: r.URL.Path, Model: req.Model, Stream: req.Stream, Results: req.results(true), AllResults: req.results(false), Users: req.users()}
	for _, t := range req.Tools {
		name := t.Name
		if name == "" {
			name = t.Type // a built-in tool (web_search)
		}
		rec.Tools = append(rec.Tools, name)
	}
	for _, t := range triggers {
		if strings.Contains(text, t) {
			rec.Trigger = t
			break
		}
	}
	if rec.Trigger == "" && toolResult && toolAsked {
		rec.Trigger = TriggerTool
	}
	_, _, escalate := req.scan(TriggerEscalate)
	tool, _ := req.shellTool(escalate, ToolCommand)
	switch rec.Trigger {
	case TriggerHang:
		if tool == "" {
			break
		}
		s.hang(r.Context(), rec)
		rec.Status = http.StatusInternalServerError
		s.record(rec)
		writeOpenAIError(w, http.StatusInternalServerError, "server_error", "mockapi: released")
		return
	case TriggerRateLimit:
		rec.Status = http.StatusTooManyRequests
		s.record(rec)
		s.mu.Lock()
		reset := s.resetAt
		s.mu.Unlock()
		w.Header().Set("retry-after", "3600")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"type": "usage_limit_reached", "code": "usage_limit_reached",
			"message": "You've hit your usage limit.", "resets_at": reset.Unix(),
			"resets_in_seconds": int(time.Until(reset).Seconds()),
		}})
		return
	case TriggerOverloaded:
		rec.Status = http.StatusServiceUnavailable
		s.record(rec)
		writeOpenAIError(w, http.StatusServiceUnavailable, "server_overloaded", "Overloaded")
		return
	}
	rec.Status = http.StatusOK
	rec.Tool = rec.Trigger == TriggerTool && tool != "" && !toolResult
	var item map[string]any
	if rec.Tool {
		_, args := req.shellTool(escalate, s.nextToolCommand())
		rec.ToolName, rec.ToolID = tool, s.nextID("call")
		item = map[string]any{"type": "function_call", "id": s.nextID("fc"), "call_id": rec.ToolID, "name": tool, "arguments": args, "status": "completed"}
	}
	s.record(rec)
	respID := s.nextID("resp")
	if item == nil {
		item = map[string]any{"type": "message", "id": s.nextID("msg"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": ReplyText, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": OpenAIInputTokens, "input_tokens_details": map[string]int{"cached_tokens": OpenAICachedTokens},
		"output_tokens": OpenAIOutputTokens, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": OpenAIInputTokens + OpenAIOutputTokens}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if fl != nil {
			fl.Flush()
		}
	}
	model := req.Model
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "response", "model": model, "status": "in_progress", "output": []any{}}})
	send(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if item["type"] == "message" {
		send(map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": ReplyText})
	}
	send(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	send(map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "object": "response", "model": model, "status": "completed", "output": []any{item}, "usage": usage}})
}

func writeOpenAIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"type": code, "code": code, "message": msg}})
}
