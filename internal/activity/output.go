package activity

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Output types that ParseLine produces besides an event's own "type" value.
const (
	// OutputText is any line that is not a JSON object: still activity.
	OutputText = "text"
	// OutputJSON is a JSON object without a "type" field.
	OutputJSON = "json"
)

// maxTypeLen bounds the Type string copied out of a line; MaxToolName
// bounds Tool.
const maxTypeLen = 64

// Output is what one line of agent stdout tells about the agent.
//
// Type is the line's own event type: Claude stream-json ("system",
// "assistant", "user", "result"), Codex exec --json ("thread.started",
// "turn.started", "item.started", "item.completed", "turn.completed", ...),
// Gemini stream-json ("init", "message", "tool_use", "tool_result",
// "result"), or OutputText / OutputJSON.
type Output struct {
	Type           string
	Tool           string // tool being used, when the line starts or requests a tool call
	AgentSessionID string // the agent's own session or thread id, when the line carries a valid one (ValidAgentSessionID)
	Final          bool   // the turn or run finished (result, turn.completed, turn.failed)
}

// line holds the fields of all three stream formats that ParseLine looks at.
type line struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"` // Claude, Gemini
	SessionI2 string          `json:"sessionId"`  // Gemini, some versions
	ThreadID  string          `json:"thread_id"`  // Codex
	ToolName  string          `json:"tool_name"`  // Gemini tool_use
	Message   json.RawMessage `json:"message"`    // Claude: object; Gemini error: string
	Item      *codexItem      `json:"item"`       // Codex item.*
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

// ParseLine interprets one line of agent stdout (Claude stream-json, Codex
// exec --json or Gemini stream-json). It never fails: a line that is not a
// JSON object is still activity, of Type OutputText.
func ParseLine(b []byte) Output {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return Output{Type: OutputText}
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return Output{Type: OutputText}
	}
	o := Output{Type: clip(l.Type, maxTypeLen)}
	if o.Type == "" {
		o.Type = OutputJSON
	}
	var sid string
	switch {
	case l.SessionID != "":
		sid = l.SessionID
	case l.SessionI2 != "":
		sid = l.SessionI2
	case l.ThreadID != "":
		sid = l.ThreadID
	}
	// An id that could be read as a flag of the resume command is dropped;
	// the line is still activity.
	if sid != "" && ValidAgentSessionID(sid) {
		o.AgentSessionID = sid
	}
	switch l.Type {
	case "assistant": // Claude: tool calls are content blocks of the message
		if len(l.Message) > 0 && l.Message[0] == '{' {
			var m claudeMessage
			if json.Unmarshal(l.Message, &m) == nil {
				for _, c := range m.Content {
					if c.Type == "tool_use" && c.Name != "" {
						o.Tool = clip(c.Name, MaxToolName)
					}
				}
			}
		}
	case "tool_use": // Gemini
		o.Tool = clip(l.ToolName, MaxToolName)
	case "item.started", "item.completed", "item.updated": // Codex
		if l.Item != nil {
			t := l.Item.Type
			if t == "" {
				t = l.Item.ItemType
			}
			if !nonToolItems[t] {
				o.Tool = t
				if l.Item.Tool != "" {
					o.Tool = l.Item.Tool
				}
				o.Tool = clip(o.Tool, MaxToolName)
			}
		}
	case "result", "turn.completed", "turn.failed":
		o.Final = true
	}
	return o
}

// clip cuts s to at most n bytes and keeps it valid UTF-8: a character cut
// in two is dropped.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
