// Package activity parses what agents emit (hook payloads, stream output) and maps it to activity.
package activity

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"herd"
)

// MaxHookSize is the largest hook payload ParseHook accepts.
const MaxHookSize = 1 << 20

// Hook event names (Claude Code's hook_event_name values).
const (
	HookSessionStart       = "SessionStart"
	HookUserPromptSubmit   = "UserPromptSubmit"
	HookPreToolUse         = "PreToolUse"
	HookPostToolUse        = "PostToolUse"
	HookPostToolUseFailure = "PostToolUseFailure"
	HookPermissionRequest  = "PermissionRequest"
	HookNotification       = "Notification"
	HookStop               = "Stop"
	HookSubagentStop       = "SubagentStop"
	HookSessionEnd         = "SessionEnd"
)

// HookEvents returns the hook events herd listens to, in lifecycle order.
func HookEvents() []string {
	return []string{
		HookSessionStart, HookUserPromptSubmit, HookPreToolUse, HookPostToolUse,
		HookPostToolUseFailure, HookPermissionRequest, HookNotification, HookStop,
		HookSubagentStop, HookSessionEnd,
	}
}

// Hook is an agent hook payload (Claude Code field names). Unknown fields are ignored.
type Hook struct {
	SessionID        string `json:"session_id"`
	TranscriptPath   string `json:"transcript_path"`
	Cwd              string `json:"cwd"`
	HookEventName    string `json:"hook_event_name"`
	ToolName         string `json:"tool_name"`
	NotificationType string `json:"notification_type"`
	Message          string `json:"message"`

	// Notes say what ParseHookEvent dropped from the payload and why, one
	// line each, for the caller to log. Never read from the payload.
	Notes []string `json:"-"`
}

// MaxToolName bounds a tool name taken from a hook or a stream line, in bytes.
const MaxToolName = 128

// agentSessionIDRE is what an agent's own session id may look like. It ends
// up as an argument of the resume command (claude --resume <id>), so it must
// never start with '-' nor hold anything a program could read as syntax.
var agentSessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidAgentSessionID reports whether id may be kept as an agent's own
// session id: 1 to 128 characters of [A-Za-z0-9._:-], starting with a
// letter or digit. Claude and Gemini UUIDs and Codex thread ids qualify.
func ValidAgentSessionID(id string) bool { return agentSessionIDRE.MatchString(id) }

// maxEventName bounds the event name so a hostile payload cannot bloat logs.
const maxEventName = 64

// ParseHook decodes one hook payload. It rejects payloads over MaxHookSize,
// anything that is not a single JSON object, and a missing or malformed
// hook_event_name.
func ParseHook(data []byte) (Hook, error) {
	return ParseHookEvent(data, "")
}

// ParseHookEvent is ParseHook with a fallback event name (for example the
// EVENT argument of `herd hook EVENT`), used only when the payload has none.
//
// A session_id that fails ValidAgentSessionID is dropped, with a note in
// Hook.Notes; the rest of the event still counts. tool_name is cut to
// MaxToolName bytes.
func ParseHookEvent(data []byte, fallback string) (Hook, error) {
	if len(data) > MaxHookSize {
		return Hook{}, fmt.Errorf("hook: payload is %d bytes, limit %d", len(data), MaxHookSize)
	}
	var h Hook
	if err := json.Unmarshal(data, &h); err != nil {
		return Hook{}, fmt.Errorf("hook: decode payload: %w", err)
	}
	if h.HookEventName == "" {
		h.HookEventName = fallback
	}
	if err := validEventName(h.HookEventName); err != nil {
		return Hook{}, err
	}
	if h.SessionID != "" && !ValidAgentSessionID(h.SessionID) {
		h.Notes = append(h.Notes, fmt.Sprintf("hook: session_id %.64q dropped: want 1-128 of [A-Za-z0-9._:-], not starting with '-'", h.SessionID))
		h.SessionID = ""
	}
	h.ToolName = clip(h.ToolName, MaxToolName)
	return h, nil
}

func validEventName(name string) error {
	if name == "" {
		return errors.New("hook: empty hook_event_name")
	}
	if len(name) > maxEventName {
		return fmt.Errorf("hook: hook_event_name longer than %d bytes", maxEventName)
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return fmt.Errorf("hook: invalid hook_event_name %q", name)
		}
	}
	return nil
}

// State is the activity of one agent session as derived from its hooks.
type State struct {
	Activity       herd.Activity
	InTool         bool   // between PreToolUse and PostToolUse(Failure)
	Tool           string // tool in use, or the last one used
	AgentSessionID string // the agent's own session id (for resume)
	Ended          bool   // SessionEnd seen
	LastEvent      string // last hook event name applied
}

// attentionTypes are Claude notification_type values that mean a person is needed.
var attentionTypes = map[string]bool{
	"permission_prompt":  true,
	"idle_prompt":        true,
	"elicitation_dialog": true, // an MCP server asks the user for input
}

// attentionPhrases identify such notifications by message when the type is absent
// (older Claude Code versions send only the message).
var attentionPhrases = []string{"needs your permission", "waiting for your input"}

// NeedsAttention reports whether a Notification hook means the agent waits
// for a person (permission or input).
func NeedsAttention(h Hook) bool {
	if attentionTypes[h.NotificationType] {
		return true
	}
	msg := strings.ToLower(h.Message)
	for _, p := range attentionPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// Apply maps hook event h onto prev and returns the next state.
//
// waiting is sticky: only a real activity event (SessionStart,
// UserPromptSubmit, tool use, Stop, SessionEnd) clears it; other
// notifications and the passing of time never do.
//
// SubagentStop never makes the session idle: a subagent runs inside the main
// agent's Task tool call, and the main agent's turn goes on (its own Stop
// follows). It marks the session working unless it is waiting.
//
// Unknown events (PreCompact, future ones) only update LastEvent and the
// session id. A session id that fails ValidAgentSessionID is never taken,
// even from a Hook that did not come through ParseHookEvent.
func Apply(prev State, h Hook) State {
	next := prev
	next.LastEvent = h.HookEventName
	if h.SessionID != "" && ValidAgentSessionID(h.SessionID) {
		next.AgentSessionID = h.SessionID
	}
	switch h.HookEventName {
	case HookSessionStart:
		next.Activity = herd.ActivityWorking
		next.InTool, next.Tool, next.Ended = false, "", false
	case HookUserPromptSubmit:
		next.Activity = herd.ActivityWorking
		next.InTool = false
	case HookPreToolUse:
		next.Activity = herd.ActivityWorking
		next.InTool = true
		next.Tool = h.ToolName
	case HookPostToolUse, HookPostToolUseFailure:
		next.Activity = herd.ActivityWorking
		next.InTool = false
		if h.ToolName != "" {
			next.Tool = h.ToolName
		}
	case HookPermissionRequest:
		next.Activity = herd.ActivityWaiting
		if h.ToolName != "" {
			next.Tool = h.ToolName
		}
	case HookNotification:
		if NeedsAttention(h) {
			next.Activity = herd.ActivityWaiting
		}
	case HookStop:
		next.Activity = herd.ActivityIdle
		next.InTool = false
	case HookSubagentStop:
		if prev.Activity != herd.ActivityWaiting {
			next.Activity = herd.ActivityWorking
		}
	case HookSessionEnd:
		next.Activity = herd.ActivityIdle
		next.InTool = false
		next.Ended = true
	}
	return next
}
