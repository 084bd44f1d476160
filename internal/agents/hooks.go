package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"herd"
)

// Claude Code hook events (hook_event_name). Codex uses the same names
// for the events it has.
const (
	HookSessionStart       = "SessionStart"
	HookUserPromptSubmit   = "UserPromptSubmit"
	HookPreToolUse         = "PreToolUse"
	HookPostToolUse        = "PostToolUse"
	HookPostToolUseFailure = "PostToolUseFailure"
	HookPermissionRequest  = "PermissionRequest"
	HookNotification       = "Notification"
	HookStop               = "Stop"
	HookStopFailure        = "StopFailure"
	HookSubagentStart      = "SubagentStart"
	HookSubagentStop       = "SubagentStop"
	HookPreCompact         = "PreCompact"
	HookPostCompact        = "PostCompact"
	HookSessionEnd         = "SessionEnd"
	// HookInterrupt is Codex's: a turn ended by Esc (no Stop follows).
	HookInterrupt = "Interrupt"
)

// Gemini CLI hook events.
const (
	GeminiBeforeAgent = "BeforeAgent"
	GeminiAfterAgent  = "AfterAgent"
	GeminiBeforeModel = "BeforeModel"
	GeminiAfterModel  = "AfterModel"
	GeminiBeforeTool  = "BeforeTool"
	GeminiAfterTool   = "AfterTool"
	GeminiPreCompress = "PreCompress"
)

// HookEvents returns the hook events herd installs for kind, in lifecycle
// order; nil for generic.
func HookEvents(kind string) []string {
	switch kind {
	case herd.AgentClaude:
		return []string{
			HookSessionStart, HookUserPromptSubmit, HookPreToolUse, HookPostToolUse,
			HookPostToolUseFailure, HookPermissionRequest, HookNotification, HookSubagentStart,
			HookSubagentStop, HookPreCompact, HookPostCompact, HookStop, HookStopFailure, HookSessionEnd,
		}
	case herd.AgentCodex:
		// Codex 0.171 has no StopFailure: a rate limit reaches herd
		// through its screen and rollout.
		return []string{HookSessionStart, HookUserPromptSubmit, HookPreToolUse, HookPermissionRequest, HookPostToolUse, HookStop, HookInterrupt}
	case herd.AgentGemini:
		return []string{
			HookSessionStart, GeminiBeforeAgent, GeminiBeforeModel, GeminiAfterModel, GeminiBeforeTool,
			GeminiAfterTool, HookNotification, GeminiPreCompress, GeminiAfterAgent, HookSessionEnd,
		}
	}
	return nil
}

// hookPayload holds the hook fields of all three agents that herd reads.
// Unknown fields are ignored.
type hookPayload struct {
	SessionID        string `json:"session_id"`
	TranscriptPath   string `json:"transcript_path"`
	Cwd              string `json:"cwd"`
	HookEventName    string `json:"hook_event_name"`
	ToolName         string `json:"tool_name"`
	NotificationType string `json:"notification_type"`
	Message          string `json:"message"`
	Source           string `json:"source"`  // SessionStart: startup, resume, clear, compact
	Trigger          string `json:"trigger"` // PreCompact, PostCompact: manual, auto
	Error            string `json:"error"`   // StopFailure: rate_limit, server_error, ...
	ErrorDetails     string `json:"error_details"`
	LastAssistant    string `json:"last_assistant_message"`
}

// maxEventName bounds the event name so a hostile payload cannot bloat logs.
const maxEventName = 64

// ParseHook decodes one hook payload of kind and maps it through kind's
// activity table. fallback names the event when the payload does not
// (the EVENT argument of `herd hook EVENT`); now anchors a reset time
// named relative to the present. Payloads over MaxPayload, anything but
// one JSON object, and a missing or malformed event name are errors. An
// invalid session id is dropped with a note; the rest still counts.
func ParseHook(kind string, data []byte, fallback string, now time.Time) (Signal, error) {
	if len(data) > MaxPayload {
		return Signal{}, fmt.Errorf("agents: hook payload is %d bytes, limit %d", len(data), MaxPayload)
	}
	var p hookPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return Signal{}, fmt.Errorf("agents: decode hook payload: %w", err)
	}
	if p.HookEventName == "" {
		p.HookEventName = fallback
	}
	if err := validEventName(p.HookEventName); err != nil {
		return Signal{}, err
	}
	s := Signal{Event: p.HookEventName, TranscriptPath: p.TranscriptPath, Cwd: p.Cwd,
		Tool: clip(p.ToolName, MaxToolName), Message: clip(p.Message, MaxMessage)}
	s.takeID(p.SessionID)
	switch kind {
	case herd.AgentGemini:
		geminiHook(&s, p)
	default: // Claude; Codex hooks use Claude's names and fields
		claudeHook(&s, p, now)
	}
	return s, nil
}

func validEventName(name string) error {
	if name == "" {
		return errors.New("agents: empty hook_event_name")
	}
	if len(name) > maxEventName {
		return fmt.Errorf("agents: hook_event_name longer than %d bytes", maxEventName)
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return fmt.Errorf("agents: invalid hook_event_name %s", clipQuote(name))
		}
	}
	return nil
}

// claudeHook is Claude Code's activity table (Codex's hooks are a subset):
//
//	SessionStart (startup, resume, clear)                -> idle
//	SessionStart (compact)                               -> unchanged
//	PostCompact manual (/compact)                        -> idle
//	PostCompact auto                                     -> working
//	UserPromptSubmit, PreToolUse, PostToolUse(Failure),
//	SubagentStart, PreCompact                            -> working
//	SubagentStop                                         -> unchanged (the main turn goes on)
//	PermissionRequest, Notification/permission_prompt,
//	Notification/elicitation_dialog                      -> waiting
//	Notification/idle_prompt                             -> unchanged, no progress
//	Stop, Interrupt (Codex: Esc ended the turn)          -> idle
//	StopFailure                                          -> blocked, with the error and reset time
//	SessionEnd                                           -> ended (idle)
func claudeHook(s *Signal, p hookPayload, now time.Time) {
	s.Progress = true
	switch p.HookEventName {
	case HookSessionStart:
		// After a compaction the session starts again: mid-turn for an
		// automatic one, whose turn goes on (PostCompact says which).
		if p.Source != "compact" {
			s.Activity = herd.ActivityIdle
		}
	case HookUserPromptSubmit, HookSubagentStart, HookPreCompact:
		s.Activity = herd.ActivityWorking
	case HookPostCompact:
		// /compact ends at the prompt; an automatic compaction goes on
		// with its turn.
		s.Activity = herd.ActivityWorking
		if p.Trigger == "manual" {
			s.Activity = herd.ActivityIdle
		}
	case HookPreToolUse:
		s.Activity, s.InTool = herd.ActivityWorking, true
	case HookPostToolUse, HookPostToolUseFailure:
		s.Activity = herd.ActivityWorking
	case HookSubagentStop:
	case HookPermissionRequest:
		s.Activity, s.Reason = herd.ActivityWaiting, ReasonPermission
	case HookNotification:
		switch notificationKind(p) {
		case "permission":
			s.Activity, s.Reason = herd.ActivityWaiting, ReasonPermission
		case "input":
			s.Activity = herd.ActivityWaiting
		case "idle":
			s.Progress = false
		default:
			s.Progress = false
		}
	case HookStop, HookInterrupt:
		s.Activity = herd.ActivityIdle
	case HookStopFailure:
		s.Activity = herd.ActivityBlocked
		s.Error = clip(joinNonEmpty(": ", p.Error, p.ErrorDetails, p.LastAssistant), MaxMessage)
		s.Reason = ReasonAPIError
		if p.Error == "rate_limit" || IsRateLimit(p.LastAssistant) {
			s.Reason = ReasonRateLimited
		}
		if t, ok := ParseResetTime(p.LastAssistant+" "+p.ErrorDetails, now); ok {
			s.ResetAt = t
		}
	case HookSessionEnd:
		s.Activity, s.Ended = herd.ActivityIdle, true
	default:
		s.Progress = false // a future event: remembered, never a state change
	}
}

// notificationKind classifies a Claude Notification: "permission",
// "input" (an MCP elicitation), "idle" (the reminder sent about a minute
// after every finished turn) or "" (anything else, auth success, ...).
// Older versions send only the message.
func notificationKind(p hookPayload) string {
	switch p.NotificationType {
	case "permission_prompt":
		return "permission"
	case "elicitation_dialog":
		return "input"
	case "idle_prompt":
		return "idle"
	case "":
	default:
		return ""
	}
	msg := strings.ToLower(p.Message)
	switch {
	case strings.Contains(msg, "needs your permission"):
		return "permission"
	case strings.Contains(msg, "waiting for your input"):
		return "idle"
	}
	return ""
}

// geminiHook is Gemini CLI's activity table:
//
//	SessionStart                                  -> idle
//	BeforeAgent, AfterModel, BeforeTool,
//	AfterTool, PreCompress                        -> working
//	BeforeModel                                   -> working, no progress
//	                                                 (it repeats for every retry)
//	Notification/ToolPermission                   -> waiting
//	AfterAgent                                    -> idle
//	SessionEnd                                    -> ended (idle)
func geminiHook(s *Signal, p hookPayload) {
	s.Progress = true
	switch p.HookEventName {
	case HookSessionStart:
		s.Activity = herd.ActivityIdle
	case GeminiBeforeAgent, GeminiAfterModel, GeminiPreCompress, GeminiAfterTool:
		s.Activity = herd.ActivityWorking
	case GeminiBeforeModel:
		// Gemini CLI retries a failing model call (429, 503) ten times
		// over minutes, with a BeforeModel each time and no AfterModel:
		// a request going out is no progress.
		s.Activity, s.Progress = herd.ActivityWorking, false
	case GeminiBeforeTool:
		s.Activity, s.InTool = herd.ActivityWorking, true
	case HookNotification:
		if p.NotificationType == "ToolPermission" {
			s.Activity, s.Reason = herd.ActivityWaiting, ReasonPermission
		} else {
			s.Progress = false
		}
	case GeminiAfterAgent:
		s.Activity = herd.ActivityIdle
	case HookSessionEnd:
		s.Activity, s.Ended = herd.ActivityIdle, true
	default:
		s.Progress = false
	}
}

// codexNotify is the JSON Codex passes as the last argument of its
// `notify` program.
type codexNotify struct {
	Type          string `json:"type"`
	ThreadID      string `json:"thread-id"`
	TurnID        string `json:"turn-id"`
	Cwd           string `json:"cwd"`
	LastAssistant string `json:"last-assistant-message"`
}

// ParseCodexNotify decodes the JSON argument of Codex's notify program:
// agent-turn-complete -> idle; an approval request -> waiting; other
// types are kept as events without a state change. Codex (0.169) also
// notifies the end of the side thread that titles a new session, under
// that thread's id: the id is weak (see Signal.WeakID).
func ParseCodexNotify(arg []byte) (Signal, error) {
	if len(arg) > MaxPayload {
		return Signal{}, fmt.Errorf("agents: notify payload is %d bytes, limit %d", len(arg), MaxPayload)
	}
	var n codexNotify
	if err := json.Unmarshal(arg, &n); err != nil {
		return Signal{}, fmt.Errorf("agents: decode codex notify: %w", err)
	}
	if err := validEventName(n.Type); err != nil {
		return Signal{}, err
	}
	s := Signal{Event: n.Type, Cwd: n.Cwd, Progress: true, WeakID: true}
	s.takeID(n.ThreadID)
	switch {
	case n.Type == "agent-turn-complete":
		s.Activity = herd.ActivityIdle
	case strings.Contains(n.Type, "approval"):
		s.Activity, s.Reason = herd.ActivityWaiting, ReasonPermission
	default:
		s.Progress = false
	}
	return s, nil
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
