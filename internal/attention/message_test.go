package attention

import (
	"strings"
	"testing"
	"time"

	"herd"
)

func TestCompose(t *testing.T) {
	code := 1
	sig := 11
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tmux := herd.Session{Name: "worker-0", Role: "worker", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux}
	exec := tmux
	exec.RuntimeKind = herd.RuntimeExec
	failed := tmux
	failed.Exit = &herd.Exit{Code: &code, Reason: herd.ReasonExitCode}
	crashed := tmux
	crashed.Exit = &herd.Exit{Signal: &sig, Reason: herd.ReasonSignal}
	cases := []struct {
		name   string
		s      herd.Session
		need   Rule
		cause  Cause
		title  string
		reason string
		body   []string
		action string
	}{
		{"permission", tmux, RuleWaiting, Cause{Reason: "hook", Data: map[string]any{"tool": "Bash"}},
			"worker-0 needs permission", "permission_prompt", []string{"permission to use Bash"}, "herd attach worker-0"},
		{"permission on exec", exec, RuleWaiting, Cause{}, "worker-0 needs permission", "permission_prompt",
			[]string{"asks for permission and waits"}, "herd logs worker-0"},
		{"startup prompt", tmux, RuleWaiting, Cause{Reason: "startup_prompt"}, "worker-0 waits at a startup prompt",
			"startup_prompt", []string{"startup dialog"}, "herd attach worker-0"},
		{"startup prompt seen on screen", tmux, RuleWaiting, Cause{Reason: "screen", Data: map[string]any{"reason": "startup_prompt"}},
			"worker-0 waits at a startup prompt", "startup_prompt", []string{"startup dialog"}, "herd attach worker-0"},
		{"rate limited with reset", tmux, RuleBlocked, Cause{Reason: "rate_limited", Data: map[string]any{
			"error": "5-hour limit reached", "reset_at": "2026-01-02T08:00:00Z"}},
			"worker-0 is rate limited", "rate_limited", []string{"5-hour limit reached", "resets at 08:00 UTC"}, "herd attach worker-0"},
		{"api error", tmux, RuleBlocked, Cause{Reason: "api_error", Data: map[string]any{"error": "overloaded"}},
			"worker-0 is blocked by an API error", "api_error", []string{"overloaded"}, "herd attach worker-0"},
		{"stalled", tmux, RuleStalled, Cause{Message: "no output for 5m; cpu 0%, 1 tcp"},
			"worker-0 is stalled", "stalled", []string{"no output for 5m; cpu 0%, 1 tcp", "herd attach worker-0"}, "herd restart worker-0"},
		{"failed exit code", failed, RuleFailed, Cause{}, "worker-0 failed", herd.ReasonExitCode,
			[]string{"Last exit: exit code 1", "restart budget"}, "herd restart worker-0"},
		{"failed signal", crashed, RuleFailed, Cause{}, "worker-0 failed", herd.ReasonSignal,
			[]string{"Last exit: signal 11"}, "herd restart worker-0"},
	}
	for _, c := range cases {
		m := Compose(c.s, c.need, c.cause, since)
		if m.Title != c.title || m.Reason != c.reason || m.Action != c.action {
			t.Errorf("[%s] expected (%q, %q, %q), got (%q, %q, %q)", c.name, c.title, c.reason, c.action, m.Title, m.Reason, m.Action)
		}
		for _, w := range c.body {
			if !strings.Contains(m.Body, w) {
				t.Errorf("[%s] expected body to contain %q, got %q", c.name, w, m.Body)
			}
		}
		if !strings.Contains(m.Text(), "Run: "+c.action) {
			t.Errorf("[%s] expected the text to name the action, got %q", c.name, m.Text())
		}
		if m.Session != "worker-0" || m.Need != c.need || !m.Since.Equal(since) {
			t.Errorf("[%s] expected session, need and since kept, got %+v", c.name, m)
		}
	}
}
