package agents

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"herd"
)

// Stream line types ParseLine reports besides a line's own type.
const (
	LineText = "text" // not a JSON object: still output, still progress
	LineJSON = "json" // a JSON object without a "type"
)

// maxTypeLen bounds the event type copied out of a line.
const maxTypeLen = 64

// streamLine holds the fields of the three stream formats ParseLine reads.
type streamLine struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"` // Claude, Gemini
	SessionI2 string          `json:"sessionId"`  // Gemini, some versions
	ThreadID  string          `json:"thread_id"`  // Codex
	ToolName  string          `json:"tool_name"`  // Gemini tool_use
	Message   json.RawMessage `json:"message"`    // Claude: object; Codex, Gemini error: string
	Item      *codexItem      `json:"item"`       // Codex item.*
	Error     json.RawMessage `json:"error"`      // Claude api_retry: string; Codex turn.failed: object
	Status    string          `json:"status"`     // Gemini result
	Severity  string          `json:"severity"`   // Gemini error
	IsError   bool            `json:"is_error"`   // Claude result
	Result    string          `json:"result"`     // Claude result text
	APIStatus *int            `json:"api_error_status"`
}

type codexItem struct {
	Type     string `json:"type"`
	ItemType string `json:"item_type"` // older Codex releases
	Tool     string `json:"tool"`      // mcp_tool_call
}

type claudeMessage struct {
	Content []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"content"`
}

// nonToolItems are Codex item types that are not tool calls.
var nonToolItems = map[string]bool{
	"agent_message": true, "assistant_message": true, "reasoning": true,
	"todo_list": true, "error": true, "": true,
}

// ParseLine maps one line of an agent's stdout (Claude `-p
// --output-format stream-json --verbose`, Codex `exec --json`, Gemini
// `-o stream-json`) to a Signal. It never fails: a line that is not JSON
// is output (LineText) and counts as progress. Retry notices (Claude
// system/api_retry, Codex "Reconnecting..." errors, Gemini warnings) are
// not progress: an agent that cannot reach its API is not moving on.
//
// A run of a headless agent is one turn: its start is working, a
// successful result idle, a failed one blocked.
func ParseLine(kind string, b []byte, now time.Time) Signal {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || len(b) > MaxPayload {
		return Signal{Event: LineText, Progress: true}
	}
	var l streamLine
	if err := json.Unmarshal(b, &l); err != nil {
		return Signal{Event: LineText, Progress: true}
	}
	s := Signal{Event: clip(l.Type, maxTypeLen), Progress: true}
	if s.Event == "" {
		s.Event = LineJSON
	}
	switch {
	case l.SessionID != "":
		s.takeID(l.SessionID)
	case l.SessionI2 != "":
		s.takeID(l.SessionI2)
	case l.ThreadID != "":
		s.takeID(l.ThreadID)
	}
	if kind != herd.AgentClaude && kind != herd.AgentCodex && kind != herd.AgentGemini {
		kind = lineKind(l)
	}
	switch kind {
	case herd.AgentCodex:
		codexLine(&s, l, now)
	case herd.AgentGemini:
		geminiLine(&s, l, now)
	default:
		claudeLine(&s, l, now)
	}
	return s
}

// lineKind guesses which agent wrote a line, for a generic command that
// runs one of them: Codex types are dotted, Gemini's are its own.
func lineKind(l streamLine) string {
	switch {
	case strings.Contains(l.Type, "."):
		return herd.AgentCodex
	case l.Type == "init" || l.Type == "message" || l.Type == "tool_use" || l.Type == "tool_result" || l.Status != "" || l.Severity != "":
		return herd.AgentGemini
	case l.Type == "error":
		return herd.AgentCodex
	}
	return herd.AgentClaude
}

func claudeLine(s *Signal, l streamLine, now time.Time) {
	switch l.Type {
	case "system":
		s.Event = clip(l.Type+"/"+l.Subtype, maxTypeLen)
		switch {
		case strings.Contains(l.Subtype, "retry"):
			s.Progress = false
			s.Message = clip(rawText(l.Error), MaxMessage)
		case l.Subtype == "init":
			s.Activity = herd.ActivityWorking
		}
	case "assistant":
		s.Activity = herd.ActivityWorking
		if len(l.Message) > 0 && l.Message[0] == '{' {
			var m claudeMessage
			if json.Unmarshal(l.Message, &m) == nil {
				for _, c := range m.Content {
					if c.Type == "tool_use" && c.Name != "" {
						s.Tool, s.InTool = clip(c.Name, MaxToolName), true
					}
				}
			}
		}
	case "user":
		s.Activity = herd.ActivityWorking
	case "result":
		s.Final = true
		if l.IsError || (l.Subtype != "" && l.Subtype != "success") {
			blocked(s, l.Result, now)
		} else {
			s.Activity = herd.ActivityIdle
		}
	}
}

func codexLine(s *Signal, l streamLine, now time.Time) {
	switch l.Type {
	case "thread.started", "turn.started":
		s.Activity = herd.ActivityWorking
	case "item.started", "item.updated", "item.completed":
		s.Activity = herd.ActivityWorking
		if l.Item != nil {
			t := l.Item.Type
			if t == "" {
				t = l.Item.ItemType
			}
			if !nonToolItems[t] {
				s.Tool = t
				if l.Item.Tool != "" {
					s.Tool = l.Item.Tool
				}
				s.Tool = clip(s.Tool, MaxToolName)
				s.InTool = l.Type != "item.completed"
			}
		}
	case "turn.completed":
		s.Activity, s.Final = herd.ActivityIdle, true
	case "turn.failed":
		s.Final = true
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(l.Error, &e)
		blocked(s, e.Message, now)
	case "error":
		// Codex reports stream retries as errors ("Reconnecting... 2/5");
		// a fatal one is followed by turn.failed.
		s.Progress = false
		s.Message = clip(rawText(l.Message), MaxMessage)
	}
}

func geminiLine(s *Signal, l streamLine, now time.Time) {
	switch l.Type {
	case "init", "message", "tool_result":
		s.Activity = herd.ActivityWorking
	case "tool_use":
		s.Activity, s.InTool = herd.ActivityWorking, true
		s.Tool = clip(l.ToolName, MaxToolName)
	case "error":
		// Warnings and retried errors; a fatal one ends in result/error.
		s.Progress = false
		s.Message = clip(rawText(l.Message), MaxMessage)
	case "result":
		if l.Status == "" || l.Status == "success" {
			s.Activity, s.Final = herd.ActivityIdle, true
		} else if l.Status == "error" {
			s.Final = true
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(l.Error, &e)
			blocked(s, e.Message, now)
		}
	}
}

// blocked marks s as a turn ended by an error.
func blocked(s *Signal, text string, now time.Time) {
	s.Activity = herd.ActivityBlocked
	s.Error = clip(text, MaxMessage)
	s.Reason = ReasonAPIError
	if IsRateLimit(text) {
		s.Reason = ReasonRateLimited
	}
	if t, ok := ParseResetTime(text, now); ok {
		s.ResetAt = t
	}
}

// rawText returns a JSON string's value, or the raw JSON of anything else.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
