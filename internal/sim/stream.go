package sim

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
)

// tools are the tool names the simulated assistant cycles through.
var tools = []string{"Bash", "Read", "Edit", "Grep"}

// streamer produces Claude-style stream-json lines: system/init first, then
// rounds of assistant tool_use, user tool_result, assistant text.
type streamer struct {
	sessionID string
	cwd       string
	n         int // lines produced so far
}

func (s *streamer) next() []byte {
	defer func() { s.n++ }()
	if s.n == 0 {
		return mustJSON(map[string]any{
			"type": "system", "subtype": "init", "session_id": s.sessionID, "cwd": s.cwd,
			"tools": tools, "model": "sim", "permissionMode": "default",
		})
	}
	round, step := (s.n-1)/3, (s.n-1)%3
	tool := tools[round%len(tools)]
	toolID := fmt.Sprintf("toolu_sim%06d", round)
	switch step {
	case 0:
		return s.assistant([]map[string]any{{
			"type": "tool_use", "id": toolID, "name": tool, "input": map[string]any{"step": round},
		}})
	case 1:
		return mustJSON(map[string]any{
			"type": "user", "session_id": s.sessionID, "parent_tool_use_id": nil,
			"message": map[string]any{"role": "user", "content": []map[string]any{{
				"type": "tool_result", "tool_use_id": toolID, "content": fmt.Sprintf("%s finished step %d", tool, round),
			}}},
		})
	default:
		return s.text(fmt.Sprintf("Step %d done.", round))
	}
}

// text is an assistant line carrying plain text.
func (s *streamer) text(t string) []byte {
	return s.assistant([]map[string]any{{"type": "text", "text": t}})
}

func (s *streamer) assistant(content []map[string]any) []byte {
	return mustJSON(map[string]any{
		"type": "assistant", "session_id": s.sessionID, "parent_tool_use_id": nil,
		"message": map[string]any{
			"id": fmt.Sprintf("msg_sim%06d", s.n), "type": "message", "role": "assistant",
			"model": "sim", "content": content,
		},
	})
}

// result is the final line of a run that exits with code; a failed run
// with resetIn set ends on a rate limit that resets that far ahead.
func (s *streamer) result(code int, resetIn time.Duration) []byte {
	subtype, text := "success", fmt.Sprintf("simulated run ended with code %d", code)
	if code != 0 {
		subtype = "error_during_execution"
		if resetIn > 0 {
			text = fmt.Sprintf("API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again in %d seconds.",
				int(resetIn.Round(time.Second)/time.Second))
		}
	}
	return mustJSON(map[string]any{
		"type": "result", "subtype": subtype, "is_error": code != 0, "session_id": s.sessionID,
		"num_turns": s.n, "result": text,
	})
}

func mustJSON(v map[string]any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // the maps above hold only strings, numbers and nested maps
		return []byte(`{"type":"error"}`)
	}
	return b
}

// newSessionID returns a random UUID (version 4) like Claude's session ids.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
