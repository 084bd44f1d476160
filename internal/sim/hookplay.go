package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// hookTimeout bounds one `herd hook` call.
const hookTimeout = 5 * time.Second

// hookStep is one element of a --hooks script: an event and its argument
// (the tool name, or for Notification the notification_type).
type hookStep struct {
	Event string
	Arg   string
}

// parseScript parses "SessionStart,PreToolUse:Bash,Notification:idle_prompt".
func parseScript(s string) ([]hookStep, error) {
	var steps []hookStep
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ev, arg, _ := strings.Cut(part, ":")
		if !validWord(ev) {
			return nil, fmt.Errorf("sim: --hooks: invalid event %q", ev)
		}
		if arg != "" && !validWord(arg) {
			return nil, fmt.Errorf("sim: --hooks: invalid argument %q of %s", arg, ev)
		}
		steps = append(steps, hookStep{Event: ev, Arg: arg})
	}
	return steps, nil
}

func validWord(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// hookPayload is the Claude Code hook JSON the sim sends.
type hookPayload struct {
	SessionID        string `json:"session_id"`
	TranscriptPath   string `json:"transcript_path"`
	Cwd              string `json:"cwd"`
	HookEventName    string `json:"hook_event_name"`
	ToolName         string `json:"tool_name,omitempty"`
	NotificationType string `json:"notification_type,omitempty"`
	Message          string `json:"message,omitempty"`
	Error            string `json:"error,omitempty"`
	LastAssistant    string `json:"last_assistant_message,omitempty"`
}

// notificationMessages are what Claude Code says for each notification type.
var notificationMessages = map[string]string{
	"permission_prompt": "Claude needs your permission to use Bash",
	"idle_prompt":       "Claude is waiting for your input",
}

// payload is the hook JSON of one step. resetIn, when set, is how far
// ahead the rate limit of a StopFailure step resets, named in its message
// ("try again in N seconds").
func (st hookStep) payload(sessionID, cwd string, resetIn time.Duration) hookPayload {
	p := hookPayload{
		SessionID:      sessionID,
		TranscriptPath: filepath.Join(os.TempDir(), "herd-sim", sessionID+".jsonl"),
		Cwd:            cwd,
		HookEventName:  st.Event,
	}
	switch {
	case st.Event == "Notification":
		p.NotificationType = st.Arg
		p.Message = notificationMessages[st.Arg]
	case st.Event == "StopFailure":
		p.Error = st.Arg
		p.LastAssistant = "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."
		if resetIn > 0 {
			p.LastAssistant = fmt.Sprintf("API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again in %d seconds.", int(resetIn.Round(time.Second)/time.Second))
		}
	default:
		p.ToolName = st.Arg
	}
	return p
}

// playHook runs `<herd> hook <event>` with the payload on stdin, as Claude
// Code would. Its failure is returned for logging only: like a real agent,
// the sim carries on.
func playHook(ctx context.Context, herd string, st hookStep, sessionID, cwd string, resetIn time.Duration) error {
	body, err := json.Marshal(st.payload(sessionID, cwd, resetIn))
	if err != nil {
		return fmt.Errorf("sim: hook %s: %w", st.Event, err)
	}
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, herd, "hook", st.Event)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sim: hook %s: %w: %s", st.Event, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
