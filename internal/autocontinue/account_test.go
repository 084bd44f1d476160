package autocontinue

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/config"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// fleet is one session per entry: name, role, activity.
type fleetSession struct {
	name, role string
	act        herd.Activity
}

// setupFleet stores roles a (account team: a-0 .. a-3) and b (account
// other) and the sessions given, all running on host h.
func setupFleet(t *testing.T, sessions []fleetSession) *status.Manager {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	err = st.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range []herd.Role{
			{Name: "a", Replicas: 3, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude, Account: "team"},
			{Name: "a2", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude,
				Env: map[string]string{"CLAUDE_CONFIG_DIR": "team"}},
			{Name: "b", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude, Account: "other"},
			{Name: "x", Replicas: 1, Command: []string{"codex"}, Workdir: "/", Runtime: herd.RuntimeTmux, Agent: herd.AgentCodex, Account: "team"},
		} {
			if err := tx.PutRole(r); err != nil {
				return err
			}
		}
		for _, s := range sessions {
			inc := "i-" + s.name
			if err := tx.PutIncarnation(herd.Incarnation{ID: inc, Session: s.name, Host: "h", RuntimeKind: herd.RuntimeTmux, StartedAt: now}); err != nil {
				return err
			}
			if err := tx.PutSession(herd.Session{Name: s.name, Role: s.role, Host: "h", Incarnation: inc, RuntimeKind: herd.RuntimeTmux,
				State: herd.StateRunning, Activity: s.act, StateSince: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return status.New(st, "h", herd.RestartPolicy{}, slog.New(slog.DiscardHandler))
}

func lastActivity(t *testing.T, m *status.Manager, session string) herd.Event {
	t.Helper()
	var evs []herd.Event
	err := m.Store().View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: session, Kind: herd.EventActivity, Limit: 1})
		return err
	})
	if err != nil || len(evs) != 1 {
		t.Fatalf("[%s] expected an activity event, got %v %v", session, evs, err)
	}
	return evs[0]
}

// TestAccountLimitBlocksAndStaggers: a limit one session meets blocks the
// other sessions of its account (not another account's, not another
// provider's, not one waiting for a person), holds the account's
// launches, and at the reset the sessions are continued one turn apart:
// "continue" typed only into the one whose own turn ended on the limit,
// the others back to what they were doing.
func TestAccountLimitBlocksAndStaggers(t *testing.T) {
	m := setupFleet(t, []fleetSession{
		{"a-0", "a", herd.ActivityWorking}, {"a-1", "a", herd.ActivityIdle}, {"a-2", "a", herd.ActivityWaiting},
		{"a2-0", "a2", herd.ActivityWorking}, {"b-0", "b", herd.ActivityWorking}, {"x-0", "x", herd.ActivityWorking},
	})
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := m.Activity(ctx, status.Seen{Session: "a-0", Incarnation: "i-a-0", Activity: herd.ActivityBlocked, Source: "hook",
		Reason: reasonRateLimited, Data: map[string]any{"reset_at": reset.UTC().Format(time.RFC3339), "error": "rate_limit"}}); err != nil {
		t.Fatal(err)
	}
	holds := accounts.NewHolds(nil)
	inj := &injector{}
	spacing := 10 * time.Second
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler), Holds: holds,
		Stagger: func() config.AutoContinue { return config.AutoContinue{Spacing: spacing} }})

	if wait, err := c.Tick(ctx, reset.Add(-time.Minute)); err != nil || wait != time.Minute {
		t.Fatalf("[first look] expected the first turn in 1m, got %s %v", wait, err)
	}
	want := map[string]herd.Activity{
		"a-0": herd.ActivityBlocked, "a-1": herd.ActivityBlocked, "a-2": herd.ActivityWaiting,
		"a2-0": herd.ActivityBlocked, "b-0": herd.ActivityWorking, "x-0": herd.ActivityWorking,
	}
	for name, act := range want {
		if s, err := m.Session(ctx, name); err != nil || s.Activity != act {
			t.Errorf("[before the reset: %s] expected %s, got %s (%v)", name, act, s.Activity, err)
		}
	}
	if ev := lastActivity(t, m, "a-1"); ev.Reason != reasonRateLimited || ev.Data["limited_by"] != "a-0" || ev.Data["prior"] != "idle" ||
		ev.Data["reset_at"] != reset.UTC().Format(time.RFC3339) || ev.Data["account"] != "team" {
		t.Errorf("[mark] expected a rate_limited event naming a-0, the prior activity and the reset, got %+v", ev)
	}
	if until, _ := holds.LaunchHeld(herd.Role{Agent: herd.AgentClaude, Account: "team"}, reset.Add(-time.Second)); !until.Equal(reset) {
		t.Errorf("[hold] expected the account's launches held until %s, got %s", reset, until)
	}
	// The marks kicked a second look: it changes nothing (once per limit).
	if wait, err := c.Tick(ctx, reset.Add(-time.Minute)); err != nil || wait != time.Minute {
		t.Fatalf("[second look] expected the next turn in 1m, got %s %v", wait, err)
	}

	// Turns: a-0 at the reset, a-1 10 s later, a2-0 20 s later.
	for i, step := range []struct {
		at   time.Duration
		name string
		want herd.Activity
	}{{0, "a-0", herd.ActivityBlocked}, {spacing, "a-1", herd.ActivityIdle}, {2 * spacing, "a2-0", herd.ActivityWorking}} {
		if _, err := c.Tick(ctx, reset.Add(step.at-time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if got := inj.count(); (i == 0 && got != 0) || (i > 0 && got != 1) {
			t.Fatalf("[just before turn %d] expected %d typed, got %v", i, min(i, 1), inj.texts)
		}
		if s, _ := m.Session(ctx, step.name); s.Activity != herd.ActivityBlocked {
			t.Errorf("[just before turn %d] expected %s still blocked, got %s", i, step.name, s.Activity)
		}
		if _, err := c.Tick(ctx, reset.Add(step.at)); err != nil {
			t.Fatal(err)
		}
		if s, _ := m.Session(ctx, step.name); s.Activity != step.want {
			t.Errorf("[turn %d] expected %s %s, got %s", i, step.name, step.want, s.Activity)
		}
	}
	if inj.count() != 1 || inj.texts[0] != "i-a-0:continue" {
		t.Errorf("[typed] expected continue into a-0 only, got %v", inj.texts)
	}
	if ev := lastActivity(t, m, "a-1"); ev.Reason != Reason || ev.Data["released"] != true {
		t.Errorf("[released] expected an auto_continue event that releases a-1, got %+v", ev)
	}
}

// TestAccountMarkYieldsToHooks: a marked session a hook moves on before
// its turn is left as the hook says, and is not marked again by the same
// limit.
func TestAccountMarkYieldsToHooks(t *testing.T) {
	m := setupFleet(t, []fleetSession{{"a-0", "a", herd.ActivityWorking}, {"a-1", "a", herd.ActivityWorking}})
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := m.Activity(ctx, status.Seen{Session: "a-0", Incarnation: "i-a-0", Activity: herd.ActivityBlocked, Source: "hook",
		Reason: reasonRateLimited, Data: map[string]any{"reset_at": reset.UTC().Format(time.RFC3339)}}); err != nil {
		t.Fatal(err)
	}
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: &injector{}}, Log: slog.New(slog.DiscardHandler)})
	if _, err := c.Tick(ctx, reset.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Session(ctx, "a-1"); s.Activity != herd.ActivityBlocked {
		t.Fatalf("expected a-1 blocked by its account, got %s", s.Activity)
	}
	if _, err := m.Activity(ctx, status.Seen{Session: "a-1", Incarnation: "i-a-1", Activity: herd.ActivityIdle, Source: "hook"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tick(ctx, reset.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Session(ctx, "a-1"); s.Activity != herd.ActivityIdle {
		t.Errorf("[after a hook] expected a-1 idle as its hook says, got %s", s.Activity)
	}
}

// TestAccountLimitWithoutAutoContinue: a role with auto_continue = false
// still blocks its account and has the marks lifted at the reset; only
// the typing is left out.
func TestAccountLimitWithoutAutoContinue(t *testing.T) {
	m := setupFleet(t, []fleetSession{{"a-0", "a", herd.ActivityWorking}, {"a-1", "a", herd.ActivityIdle}})
	ctx := context.Background()
	err := m.Store().Update(ctx, func(tx store.Tx) error {
		r, err := tx.Role("a")
		if err != nil {
			return err
		}
		r.AutoContinue = herd.Bool(false)
		return tx.PutRole(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Invalidate()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := m.Activity(ctx, status.Seen{Session: "a-0", Incarnation: "i-a-0", Activity: herd.ActivityBlocked, Source: "hook",
		Reason: reasonRateLimited, Data: map[string]any{"reset_at": reset.UTC().Format(time.RFC3339)}}); err != nil {
		t.Fatal(err)
	}
	inj := &injector{}
	holds := accounts.NewHolds(nil)
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler), Holds: holds})
	if _, err := c.Tick(ctx, reset.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Session(ctx, "a-1"); s.Activity != herd.ActivityBlocked {
		t.Fatalf("expected a-1 blocked by its account, got %s", s.Activity)
	}
	if until, _ := holds.LaunchHeld(herd.Role{Agent: herd.AgentClaude, Account: "team"}, reset.Add(-time.Second)); !until.Equal(reset) {
		t.Errorf("[hold] expected the launches held until %s, got %s", reset, until)
	}
	for range 2 {
		if _, err := c.Tick(ctx, reset.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := m.Session(ctx, "a-1"); s.Activity != herd.ActivityIdle {
		t.Errorf("[reset] expected a-1's mark lifted, got %s", s.Activity)
	}
	if inj.count() != 0 {
		t.Errorf("[auto_continue = false] expected nothing typed, got %v", inj.texts)
	}
}

// TestAccountLimitPastNotSpread: a limit whose reset has passed when it is
// first looked at (met before a daemon restart) blocks no one else.
func TestAccountLimitPastNotSpread(t *testing.T) {
	m := setupFleet(t, []fleetSession{{"a-0", "a", herd.ActivityWorking}, {"a-1", "a", herd.ActivityIdle}})
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := m.Activity(ctx, status.Seen{Session: "a-0", Incarnation: "i-a-0", Activity: herd.ActivityBlocked, Source: "hook",
		Reason: reasonRateLimited, Data: map[string]any{"reset_at": reset.UTC().Format(time.RFC3339)}}); err != nil {
		t.Fatal(err)
	}
	inj := &injector{}
	c := New(Options{Status: m, Runtimes: map[string]Injector{herd.RuntimeTmux: inj}, Log: slog.New(slog.DiscardHandler)})
	if _, err := c.Tick(ctx, reset.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Session(ctx, "a-1"); s.Activity != herd.ActivityIdle {
		t.Errorf("expected a-1 left idle by a limit already reset, got %s", s.Activity)
	}
	if inj.count() != 1 {
		t.Errorf("expected a-0 itself continued, got %v", inj.texts)
	}
}
