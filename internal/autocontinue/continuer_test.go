package autocontinue

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func TestPlan(t *testing.T) {
	reset := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	blocked := herd.Session{Name: "w-0", Incarnation: "i1", State: herd.StateRunning, Activity: herd.ActivityBlocked}
	ev := herd.Event{Kind: herd.EventActivity, Incarnation: "i1", Reason: "rate_limited", Data: map[string]any{"reset_at": reset.Format(time.RFC3339)}}
	with := func(f func(*herd.Session, *herd.Role, *herd.Event)) (herd.Session, herd.Role, herd.Event) {
		s, r, e := blocked, herd.Role{Name: "w"}, ev
		e.Data = map[string]any{"reset_at": reset.Format(time.RFC3339)}
		f(&s, &r, &e)
		return s, r, e
	}
	cases := []struct {
		name string
		f    func(*herd.Session, *herd.Role, *herd.Event)
		ok   bool
	}{
		{"rate limited with a reset time", func(*herd.Session, *herd.Role, *herd.Event) {}, true},
		{"auto_continue = false", func(_ *herd.Session, r *herd.Role, _ *herd.Event) { r.AutoContinue = herd.Bool(false) }, false},
		{"auto_continue = true", func(_ *herd.Session, r *herd.Role, _ *herd.Event) { r.AutoContinue = herd.Bool(true) }, true},
		{"no reset time named", func(_ *herd.Session, _ *herd.Role, e *herd.Event) { delete(e.Data, "reset_at") }, false},
		{"garbled reset time", func(_ *herd.Session, _ *herd.Role, e *herd.Event) { e.Data["reset_at"] = "3pm" }, false},
		{"api error, not a rate limit", func(_ *herd.Session, _ *herd.Role, e *herd.Event) { e.Reason = "api_error" }, false},
		{"no longer blocked", func(s *herd.Session, _ *herd.Role, _ *herd.Event) { s.Activity = herd.ActivityWorking }, false},
		{"dead", func(s *herd.Session, _ *herd.Role, _ *herd.Event) { s.State = herd.StateBackoff }, false},
		{"event of an older incarnation", func(_ *herd.Session, _ *herd.Role, e *herd.Event) { e.Incarnation = "i0" }, false},
		{"already continued (last event is ours)", func(_ *herd.Session, _ *herd.Role, e *herd.Event) { e.Reason = Reason }, false},
	}
	for _, c := range cases {
		s, r, e := with(c.f)
		at, ok := Plan(s, r, e)
		if ok != c.ok || (ok && !at.Equal(reset)) {
			t.Errorf("[%s] expected ok=%v at %s, got %v at %s", c.name, c.ok, reset, ok, at)
		}
	}
}

// injector records what was typed.
type injector struct {
	mu    sync.Mutex
	typed string   // typed, Enter not yet pressed
	texts []string // lines sent with Enter
}

func (f *injector) Inject(_ context.Context, inc herd.Incarnation, text string, enter bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case text != "" && enter:
		f.texts = append(f.texts, "text and Enter at once")
	case text != "":
		f.typed = inc.ID + ":" + text
	case enter:
		f.texts = append(f.texts, f.typed)
		f.typed = ""
	}
	return nil
}

// Capture shows what was typed and not yet sent.
func (f *injector) Capture(context.Context, herd.Incarnation, int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []byte("> " + f.typed), nil
}

func (f *injector) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.texts)
}

func setup(t *testing.T, resetAt time.Time) (*status.Manager, *injector, *Continuer) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux}); err != nil {
			return err
		}
		if err := tx.PutIncarnation(herd.Incarnation{ID: "i1", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, StartedAt: now}); err != nil {
			return err
		}
		if err := tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux,
			State: herd.StateRunning, Activity: herd.ActivityBlocked, StateSince: now}); err != nil {
			return err
		}
		return tx.AppendEvent(&herd.Event{Time: now, Host: "h", Session: "w-0", Incarnation: "i1", Kind: herd.EventActivity,
			Reason: "rate_limited", Data: map[string]any{"reset_at": resetAt.UTC().Format(time.RFC3339)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	m := status.New(st, "h", herd.RestartPolicy{}, slog.New(slog.DiscardHandler))
	inj := &injector{}
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler)})
	return m, inj, c
}

func TestContinuesOnceAtTheReset(t *testing.T) {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	m, inj, c := setup(t, reset)
	ctx := context.Background()
	wait, err := c.Tick(ctx, reset.Add(-10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if inj.count() != 0 || wait != 10*time.Second {
		t.Errorf("[before the reset] expected nothing typed and a look in 10s, got %d typed, %s", inj.count(), wait)
	}
	for range 3 {
		if _, err := c.Tick(ctx, reset.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if inj.count() != 1 || inj.texts[0] != "i1:continue" {
		t.Errorf("[at the reset] expected one continue, got %v", inj.texts)
	}
	// Once per episode, even for a Continuer that never saw it (a
	// restarted daemon): the event says it was done.
	c2 := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler)})
	if _, err := c2.Tick(ctx, reset.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if inj.count() != 1 {
		t.Errorf("[restarted] expected no second continue, got %v", inj.texts)
	}
	var evs []herd.Event
	m.Store().View(ctx, func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventActivity})
		return err
	})
	if len(evs) != 2 || evs[1].Reason != Reason || evs[1].Data["text"] != Text {
		t.Errorf("expected an auto_continue activity event, got %+v", evs)
	}
}

func TestCancelledWhenNoLongerBlocked(t *testing.T) {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	m, inj, c := setup(t, reset)
	ctx := context.Background()
	if _, err := m.Activity(ctx, status.Seen{Session: "w-0", Incarnation: "i1", Activity: herd.ActivityWorking, Source: "hook"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tick(ctx, reset.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if inj.count() != 0 {
		t.Errorf("expected nothing typed into a session that left blocked, got %v", inj.texts)
	}
}

// TestKickedWhenBlocked: with an idle period far longer than the test,
// a session becoming blocked (a change status announces) is looked at
// at once and continued at its reset time.
func TestKickedWhenBlocked(t *testing.T) {
	reset := time.Now().Add(2 * time.Second).Truncate(time.Second)
	m, inj, _ := setup(t, reset)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	setActivity := func(a herd.Activity) {
		t.Helper()
		seen := status.Seen{Session: "w-0", Incarnation: "i1", Activity: a, Source: "hook"}
		if a == herd.ActivityBlocked {
			seen.Reason, seen.Data = "rate_limited", map[string]any{"reset_at": reset.UTC().Format(time.RFC3339)}
		}
		if _, err := m.Activity(ctx, seen); err != nil {
			t.Fatal(err)
		}
	}
	setActivity(herd.ActivityWorking)
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler),
		Tick: 20 * time.Millisecond, Idle: time.Hour})
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	setActivity(herd.ActivityBlocked)
	deadline := time.Now().Add(10 * time.Second)
	for inj.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if inj.count() != 1 {
		t.Fatalf("expected one continue at the reset, got %v", inj.texts)
	}
	if now := time.Now(); now.Before(reset) {
		t.Errorf("expected the continue at the reset %v, not before (now %v)", reset, now)
	}
}

// timedInjector records when the text was typed and when Enter came.
type timedInjector struct {
	injector
	typedAt, enterAt time.Time
}

func (f *timedInjector) Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error {
	if text != "" {
		f.typedAt = time.Now()
	} else if enter {
		f.enterAt = time.Now()
	}
	return f.injector.Inject(ctx, inc, text, enter)
}

// TestTypeLineWaitsFastReturn: Gemini CLI reads an Enter within its
// fast-return window of a typed key as a newline; the continue's Enter
// waits agents.SubmitSettle after the text shows. Claude's does not wait.
func TestTypeLineWaitsFastReturn(t *testing.T) {
	for _, c := range []struct {
		argv []string
		min  time.Duration
	}{
		{[]string{"gemini"}, agents.SubmitSettle(herd.AgentGemini)},
		{[]string{"claude"}, 0},
	} {
		f := &timedInjector{}
		if err := typeLine(context.Background(), f, herd.Incarnation{ID: "i1", Argv: c.argv}); err != nil {
			t.Fatal(err)
		}
		if gap := f.enterAt.Sub(f.typedAt); gap < c.min || (c.min == 0 && gap > time.Second) {
			t.Errorf("[%s] expected Enter at least %s after the text (and soon), got %s", c.argv[0], c.min, gap)
		}
		if len(f.texts) != 1 || f.texts[0] != "i1:"+Text {
			t.Errorf("[%s] expected one line sent, got %q", c.argv[0], f.texts)
		}
	}
	if agents.SubmitSettle(herd.AgentGemini) <= 0 {
		t.Fatal("expected a fast-return wait for Gemini CLI")
	}
}
