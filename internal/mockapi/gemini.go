package mockapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Gemini API (POST /v1beta/models/<model>:generateContent and
// :streamGenerateContent), as Gemini CLI speaks it: the same triggers,
// answered as Gemini responses.

type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             string          `json:"text"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// scan returns the last text part of the last user turn (what was typed
// last: Gemini CLI appends the words typed after a refused call to the
// turn of the prompt, dropping the call), whether the turn is a function
// response, and whether any user turn holds word.
func (r geminiRequest) scan(word string) (last string, toolResult, anyHas bool) {
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		last, toolResult = "", false
		for _, p := range c.Parts {
			if p.Text != "" {
				last = p.Text
			}
			if len(p.FunctionResponse) > 0 {
				toolResult = true
			}
			if strings.Contains(p.Text, word) {
				anyHas = true
			}
		}
	}
	return last, toolResult, anyHas
}

// users returns the text of each user turn, oldest first, each clipped
// as Record.Users says.
func (r geminiRequest) users() []string {
	var out []string
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		var b strings.Builder
		for _, p := range c.Parts {
			b.WriteString(p.Text)
		}
		out = append(out, clipUser(b.String()))
	}
	return out
}

// results returns the function responses of the last user turn (last),
// or of every turn, oldest first: the call's id when the agent gave one,
// and the response as JSON.
func (r geminiRequest) results(last bool) []ToolResult {
	var out []ToolResult
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		if last {
			out = nil
		}
		for _, p := range c.Parts {
			var fr struct {
				ID       string          `json:"id"`
				Response json.RawMessage `json:"response"`
			}
			if len(p.FunctionResponse) == 0 || json.Unmarshal(p.FunctionResponse, &fr) != nil {
				continue
			}
			out = append(out, ToolResult{ToolUseID: fr.ID, Text: string(fr.Response)})
		}
	}
	return out
}

func (r geminiRequest) hasFunction(name string) bool {
	for _, t := range r.Tools {
		for _, f := range t.FunctionDeclarations {
			if f.Name == name {
				return true
			}
		}
	}
	return false
}

// geminiShellTool is Gemini CLI's shell tool.
const geminiShellTool = "run_shell_command"

func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, stream bool) {
	var req geminiRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		s.record(Record{Path: r.URL.Path, Status: http.StatusBadRequest})
		writeGeminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "mockapi: "+err.Error())
		return
	}
	text, toolResult, toolAsked := req.scan(TriggerTool)
	rec := Record{Path: r.URL.Path, Stream: stream, Results: req.results(true), AllResults: req.results(false), Users: req.users()}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, f.Name)
		}
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
	shell := req.hasFunction(geminiShellTool)
	switch rec.Trigger {
	case TriggerHang:
		if !shell {
			break
		}
		s.hang(r.Context(), rec)
		rec.Status = http.StatusInternalServerError
		s.record(rec)
		writeGeminiError(w, http.StatusInternalServerError, "INTERNAL", "mockapi: released")
		return
	case TriggerRateLimit:
		rec.Status = http.StatusTooManyRequests
		s.record(rec)
		// A daily quota with a long retry delay: Gemini CLI gives up at
		// once instead of retrying for minutes.
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
			"code": http.StatusTooManyRequests, "status": "RESOURCE_EXHAUSTED",
			"message": "You exceeded your current quota. Please retry in 7200s.",
			"details": []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
					"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId":     "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
				}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7200s"},
			},
		}})
		return
	case TriggerOverloaded:
		rec.Status = http.StatusServiceUnavailable
		s.record(rec)
		writeGeminiError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.")
		return
	}
	var part map[string]any
	if rec.Trigger == TriggerTool && shell && !toolResult {
		rec.Tool, rec.ToolName = true, geminiShellTool
		cmd := s.nextToolCommand()
		part = map[string]any{"functionCall": map[string]any{"name": geminiShellTool,
			"args": map[string]any{"command": cmd, "description": describe(cmd)}}}
	} else {
		part = map[string]any{"text": ReplyText}
	}
	rec.Status = http.StatusOK
	s.record(rec)
	resp := map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]int{"promptTokenCount": GeminiPromptTokens, "cachedContentTokenCount": GeminiCachedTokens,
			"candidatesTokenCount": GeminiOutputTokens, "totalTokenCount": GeminiPromptTokens + GeminiOutputTokens},
		"modelVersion": "gemini-mock",
	}
	if !stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	b, _ := json.Marshal(resp)
	fmt.Fprintf(w, "data: %s\r\n\r\n", b)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

func writeGeminiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "status": code, "message": msg}})
}
