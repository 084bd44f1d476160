package notify

import (
	"strings"
	"testing"
	"time"

	"herd"
)

func TestNeedOf(t *testing.T) {
	cases := []struct {
		state    herd.State
		activity herd.Activity
		want     Need
	}{
		{herd.StateRunning, herd.ActivityWaiting, NeedWaiting},
		{herd.StateRunning, herd.ActivityBlocked, NeedBlocked},
		{herd.StateRunning, herd.ActivityWorking, ""},
		{herd.StateRunning, herd.ActivityIdle, ""},
		{herd.StateUnknown, herd.ActivityWaiting, NeedWaiting},
		{herd.StateStalled, herd.ActivityWorking, NeedStalled},
		{herd.StateFailed, herd.ActivityUnknown, NeedFailed},
		{herd.StateBackoff, herd.ActivityWaiting, ""}, // dead: nothing to answer
		{herd.StateStopped, herd.ActivityWaiting, ""},
		{herd.StateSucceeded, herd.ActivityIdle, ""},
	}
	for _, c := range cases {
		got := NeedOf(herd.Session{State: c.state, Activity: c.activity})
		if got != c.want {
			t.Errorf("[%s/%s] expected %q, got %q", c.state, c.activity, c.want, got)
		}
	}
}

func TestEvaluate(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fired := t0.Add(time.Second)
	open := &Episode{Incarnation: "i1", Need: NeedWaiting, Since: t0}
	done := &Episode{Incarnation: "i1", Need: NeedWaiting, Since: t0, FiredAt: &fired}
	cases := []struct {
		name      string
		need      Need
		inc       string
		ep        *Episode
		now       time.Time
		after     time.Duration
		wantNil   bool
		wantFire  bool
		wantSince time.Time
	}{
		{"nothing needed", "", "i1", nil, t0, 0, true, false, time.Time{}},
		{"need gone closes", "", "i1", done, t0, 0, true, false, time.Time{}},
		{"fires at once with after 0", NeedWaiting, "i1", nil, t0, 0, false, true, t0},
		{"debounced", NeedWaiting, "i1", nil, t0, 2 * time.Second, false, false, t0},
		{"debounce not over", NeedWaiting, "i1", open, t0.Add(1999 * time.Millisecond), 2 * time.Second, false, false, t0},
		{"debounce over, inclusive", NeedWaiting, "i1", open, t0.Add(2 * time.Second), 2 * time.Second, false, true, t0},
		{"fires once", NeedWaiting, "i1", done, t0.Add(time.Hour), 0, false, false, t0},
		{"new need is a new episode", NeedBlocked, "i1", done, t0.Add(time.Hour), 0, false, true, t0.Add(time.Hour)},
		{"new incarnation is a new episode", NeedWaiting, "i2", done, t0.Add(time.Hour), 0, false, true, t0.Add(time.Hour)},
	}
	for _, c := range cases {
		next, fire := Evaluate(c.need, c.inc, c.ep, c.now, c.after)
		if (next == nil) != c.wantNil || fire != c.wantFire {
			t.Errorf("[%s] expected (nil=%v, fire=%v), got (%+v, %v)", c.name, c.wantNil, c.wantFire, next, fire)
			continue
		}
		if next != nil && !next.Since.Equal(c.wantSince) {
			t.Errorf("[%s] expected since %s, got %s", c.name, c.wantSince, next.Since)
		}
	}
}

func TestEpisodeDue(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ep := &Episode{FiredAt: &t0, Channels: map[string]*Delivery{
		"a": {Done: true},
		"b": {Next: t0.Add(4 * time.Second)},
		"c": {Next: t0.Add(2 * time.Second)},
	}}
	if at, ok := ep.Due(); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("expected due at +2s, got %s %v", at, ok)
	}
	ep.Channels["b"].Done, ep.Channels["c"].Done = true, true
	if _, ok := ep.Due(); ok {
		t.Error("expected nothing due once every channel is done")
	}
	if _, ok := (&Episode{}).Due(); ok {
		t.Error("expected nothing due before the episode fires")
	}
}

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
		need   Need
		cause  Cause
		title  string
		reason string
		body   []string
		action string
	}{
		{"permission", tmux, NeedWaiting, Cause{Reason: "hook", Data: map[string]any{"tool": "Bash"}},
			"worker-0 needs permission", "permission_prompt", []string{"permission to use Bash"}, "herd attach worker-0"},
		{"permission on exec", exec, NeedWaiting, Cause{}, "worker-0 needs permission", "permission_prompt",
			[]string{"asks for permission and waits"}, "herd logs worker-0"},
		{"startup prompt", tmux, NeedWaiting, Cause{Reason: "startup_prompt"}, "worker-0 waits at a startup prompt",
			"startup_prompt", []string{"startup dialog"}, "herd attach worker-0"},
		{"startup prompt seen on screen", tmux, NeedWaiting, Cause{Reason: "screen", Data: map[string]any{"reason": "startup_prompt"}},
			"worker-0 waits at a startup prompt", "startup_prompt", []string{"startup dialog"}, "herd attach worker-0"},
		{"rate limited with reset", tmux, NeedBlocked, Cause{Reason: "rate_limited", Data: map[string]any{
			"error": "5-hour limit reached", "reset_at": "2026-01-02T08:00:00Z"}},
			"worker-0 is rate limited", "rate_limited", []string{"5-hour limit reached", "resets at 08:00 UTC"}, "herd attach worker-0"},
		{"api error", tmux, NeedBlocked, Cause{Reason: "api_error", Data: map[string]any{"error": "overloaded"}},
			"worker-0 is blocked by an API error", "api_error", []string{"overloaded"}, "herd attach worker-0"},
		{"stalled", tmux, NeedStalled, Cause{Message: "no output for 5m; cpu 0%, 1 tcp"},
			"worker-0 is stalled", "stalled", []string{"no output for 5m; cpu 0%, 1 tcp", "herd attach worker-0"}, "herd restart worker-0"},
		{"failed exit code", failed, NeedFailed, Cause{}, "worker-0 failed", herd.ReasonExitCode,
			[]string{"Last exit: exit code 1", "restart budget"}, "herd restart worker-0"},
		{"failed signal", crashed, NeedFailed, Cause{}, "worker-0 failed", herd.ReasonSignal,
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
