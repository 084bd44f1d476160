package agents

import (
	"strings"
	"time"

	"herd"
)

// Signal is what one hook payload, notify call or stream line tells about
// an agent, already mapped through the kind's activity table.
type Signal struct {
	// Event is the agent's own name for what happened: a hook event
	// ("PreToolUse", "BeforeTool"), a notify type ("agent-turn-complete")
	// or a stream line type ("system/api_retry", "turn.completed").
	Event string
	// Activity is the activity the event sets; "" leaves it as it was.
	Activity herd.Activity
	// Progress reports whether the event shows the agent moving on (for
	// stall detection). Retries, idle reminders and unknown events do not.
	Progress bool
	// Ended: the agent's session ended (the process may still exit).
	Ended bool
	// Final: the turn or run finished (stream result lines).
	Final bool
	// InTool: between a tool's start and its end.
	InTool bool
	Tool   string // the tool named by the event, cut to MaxToolName bytes

	AgentSessionID string // the agent's own session id, when valid (ValidSessionID)
	// WeakID: AgentSessionID may name another conversation of the same
	// agent (Codex's notify also reports the side threads that title a
	// session); Apply takes it only when no id is known yet.
	WeakID         bool
	TranscriptPath string // Claude and Gemini hooks: the conversation file
	Cwd            string

	// Reason qualifies Activity: ReasonPermission, ReasonRateLimited,
	// ReasonAPIError, ReasonStartupPrompt.
	Reason string
	// Error is the error that blocked the turn (blocked only).
	Error string
	// ResetAt is when a rate limit resets, when the error names it.
	ResetAt time.Time
	// Message is the human text of a notification, cut to MaxMessage.
	Message string
	// Notes say what was dropped from the input and why, one line each,
	// for the caller to log.
	Notes []string
}

// Size limits of what a Signal carries.
const (
	MaxToolName = 128
	MaxMessage  = 1024
	MaxPayload  = 1 << 20 // the largest hook payload or stream line parsed
)

// State is the activity of one agent session as derived from its signals.
type State struct {
	Activity herd.Activity
	Reason   string
	InTool   bool
	// Tool is the tool of the running turn: the one in use, or the last
	// one the turn used; a turn's end or a new prompt clears it, so the
	// next turn's events do not carry it.
	Tool string
	// LastTool is the last tool used in any turn (for summaries).
	LastTool       string
	AgentSessionID string
	TranscriptPath string
	Error          string    // blocked: the error
	ResetAt        time.Time // blocked: when the limit resets, if known
	Ended          bool
	LastEvent      string
}

// Apply folds s into prev. An empty Activity keeps the previous one (and
// its reason); a new activity replaces reason, error and reset time.
func Apply(prev State, s Signal) State {
	next := prev
	if s.Event != "" {
		next.LastEvent = s.Event
	}
	if s.AgentSessionID != "" && ValidSessionID(s.AgentSessionID) && (!s.WeakID || next.AgentSessionID == "") {
		next.AgentSessionID = s.AgentSessionID
	}
	if s.TranscriptPath != "" {
		next.TranscriptPath = s.TranscriptPath
	}
	switch {
	case s.Tool != "":
		next.Tool, next.LastTool = s.Tool, s.Tool
	case endsTurn(s) || startsTurn(s.Event):
		next.Tool = ""
	}
	if s.Activity != "" {
		next.Activity = s.Activity
		next.Reason, next.Error, next.ResetAt = s.Reason, s.Error, s.ResetAt
		next.InTool = s.InTool
		next.Ended = s.Ended
	}
	return next
}

// endsTurn reports whether s ends the turn: idle (Stop, AfterAgent, a
// session starting or ending) or blocked (a turn ended by an error).
func endsTurn(s Signal) bool {
	return s.Activity == herd.ActivityIdle || s.Activity == herd.ActivityBlocked || s.Ended
}

// startsTurn reports whether event submits a new prompt: a turn whose
// end no hook reported (interrupted with Esc) ends here.
func startsTurn(event string) bool {
	return event == HookUserPromptSubmit || event == GeminiBeforeAgent
}

// CanStall reports whether a session with activity a may be declared
// stalled: only a running turn (working), or an agent herd cannot read
// (unknown). idle, waiting and blocked never stall.
func CanStall(a herd.Activity) bool {
	return a == herd.ActivityWorking || a == herd.ActivityUnknown || a == ""
}

// clip cuts s to at most n bytes and keeps it valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// takeID sets sig's session id from id when it is valid, and notes why
// when it is not.
func (s *Signal) takeID(id string) {
	if id == "" {
		return
	}
	if !ValidSessionID(id) {
		s.Notes = append(s.Notes, "session id "+clipQuote(id)+" dropped: want 1-128 of [A-Za-z0-9._:-], not starting with '-'")
		return
	}
	s.AgentSessionID = id
}

func clipQuote(s string) string {
	return `"` + clip(strings.ToValidUTF8(s, "?"), 64) + `"`
}
