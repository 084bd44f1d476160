package status

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	policy := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Hour, MaxRestarts: 2}
	m := New(st, "h", policy, slog.New(slog.NewTextHandler(io.Discard, nil)))
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"x"}, Runtime: herd.RuntimeExec, Restart: policy}); err != nil {
			return err
		}
		now := time.Now().UTC()
		if err := tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", State: herd.StateRunning, Incarnation: "inc-1", StateSince: now}); err != nil {
			return err
		}
		return tx.PutIncarnation(herd.Incarnation{ID: "inc-1", Session: "w-0", Host: "h", StartedAt: now.Add(-time.Second)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func events(t *testing.T, m *Manager, kind string) []herd.Event {
	t.Helper()
	var evs []herd.Event
	m.Store().View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: "w-0", Kind: kind})
		return err
	})
	return evs
}

// witness is a watchdog that saw one stall of every incarnation.
type witness struct{}

func (witness) Summary(string) map[string]any { return map[string]any{"stalls": 1} }

// TestRecordDeathOnce: the same death reported by many paths at once is
// accounted exactly once, and subscribers hear of it once.
func TestRecordDeathOnce(t *testing.T) {
	m := newManager(t)
	m.SetWitness(witness{})
	changes, cancel := m.Subscribe()
	defer cancel()
	reasons := []string{herd.ReasonProcessGone, herd.ReasonPaneGone, herd.ReasonSignal, herd.ReasonExitCode, herd.ReasonProcessGone}
	var wg sync.WaitGroup
	var accounted sync.Map
	for i, r := range reasons {
		wg.Go(func() {
			ok, err := m.RecordDeath(context.Background(), Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: r}})
			if err != nil {
				t.Errorf("[path %d] %v", i, err)
			}
			accounted.Store(i, ok)
		})
	}
	wg.Wait()
	n := 0
	accounted.Range(func(_, v any) bool {
		if v.(bool) {
			n++
		}
		return true
	})
	var ended []string
	for len(ended) == 0 {
		select {
		case c := <-changes:
			if c.What.Has(ChangeDied) {
				ended = append(ended, c.Incarnation)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("expected the death published")
		}
	}
	select {
	case c := <-changes:
		t.Errorf("expected one change published, got a second: %+v", c)
	case <-time.After(50 * time.Millisecond):
	}
	if n != 1 || len(ended) != 1 || ended[0] != "inc-1" {
		t.Fatalf("expected one path to account the death and one died change … got %d and %v", n, ended)
	}
	s, _ := m.Session(context.Background(), "w-0")
	if s.State != herd.StateBackoff || s.Restarts != 1 || s.BackoffUntil == nil {
		t.Errorf("expected backoff with 1 restart … got %s, %d", s.State, s.Restarts)
	}
	if c, sum := events(t, m, herd.EventCrashed), events(t, m, herd.EventSummary); len(c) != 1 || len(sum) != 1 || sum[0].Data["stalls"] != float64(1) {
		t.Errorf("expected one crashed and one summary event with what the watchdog saw … got %d, %+v", len(c), sum)
	}
}

// TestTakedownsOwnTheirDeaths: while the stop path takes an incarnation
// down, no death of it is a crash; while a stall kill does, only the
// kill's own report (stall_killed) is.
func TestTakedownsOwnTheirDeaths(t *testing.T) {
	for _, c := range []struct {
		name    string
		owner   string
		reason  string
		account bool
	}{
		{"stop owns every death", "", herd.ReasonProcessGone, false},
		{"stop owns even a stall_killed report", "", herd.ReasonStallKilled, false},
		{"stall kill leaves others' reports", herd.ReasonStallKilled, herd.ReasonPaneGone, false},
		{"stall kill records its own", herd.ReasonStallKilled, herd.ReasonStallKilled, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t)
			if !m.BeginTakedown("inc-1", c.owner) {
				t.Fatal("first takedown refused")
			}
			ok, err := m.RecordDeath(context.Background(), Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: c.reason}})
			if err != nil || ok != c.account {
				t.Errorf("expected accounted %v … got %v, %v", c.account, ok, err)
			}
			m.EndTakedown("inc-1", c.owner)
			if !c.account {
				if ok, _ := m.RecordDeath(context.Background(), Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: c.reason}}); !ok {
					t.Errorf("expected the death accounted once the takedown ended")
				}
			}
		})
	}
	m := newManager(t)
	if !m.BeginTakedown("inc-1", herd.ReasonStallKilled) || m.BeginTakedown("inc-1", herd.ReasonStallKilled) {
		t.Errorf("expected a second stall kill of the same incarnation refused")
	}
}

// TestUpdateOnlyCurrent: Update acts only on the current, live
// incarnation and writes only what changed.
func TestUpdateOnlyCurrent(t *testing.T) {
	m := newManager(t)
	called := false
	_, err := m.update(context.Background(), "w-0", "inc-old", func(store.Tx, *herd.Session) ([]*herd.Event, error) {
		called = true
		return nil, nil
	}, nil)
	if err != nil || called {
		t.Errorf("expected a superseded incarnation skipped … got called=%v, %v", called, err)
	}
	_, err = m.update(context.Background(), "w-0", "inc-1", func(_ store.Tx, s *herd.Session) ([]*herd.Event, error) {
		s.Activity = herd.ActivityIdle
		return []*herd.Event{m.Event(*s, "inc-1", herd.EventActivity, "", "x", nil)}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := m.Session(context.Background(), "w-0"); s.Activity != herd.ActivityIdle || len(events(t, m, herd.EventActivity)) != 1 {
		t.Errorf("expected the change and its event written … got %s", s.Activity)
	}
	unlock := m.Lock("w-0")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.update(ctx, "w-0", "inc-1", func(store.Tx, *herd.Session) ([]*herd.Event, error) { return nil, nil }, nil); err == nil {
		t.Errorf("expected a held session lock to end the update with its context")
	}
	unlock()
}

// TestRetentionPrunes: the retention loop deletes events beyond the
// newest MaxRows in batches, keeping the newest, and stops with its
// context.
func TestRetentionPrunes(t *testing.T) {
	m := newManager(t)
	err := m.Store().Update(context.Background(), func(tx store.Tx) error {
		for range 1200 {
			if err := tx.AppendEvent(m.Event(herd.Session{Name: "w-0"}, "inc-1", herd.EventActivity, "", "x", nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.RunRetention(ctx, store.Retention{MaxRows: 100})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(events(t, m, "")) != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("expected the log pruned to 100 events … got %d", len(events(t, m, "")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	evs := events(t, m, "")
	if evs[len(evs)-1].ID != 1200 {
		t.Errorf("expected the newest events kept … last id %d", evs[len(evs)-1].ID)
	}
}

// TestUpdateThenOnlyAfterCommit: then runs once the write committed with
// the incarnation current, and never after a rollback or a skipped write.
func TestUpdateThenOnlyAfterCommit(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name      string
		ctx       context.Context
		inc       string
		fnErr     bool
		wantAfter bool
		wantErr   bool
	}{
		{name: "committed", ctx: context.Background(), inc: "inc-1", wantAfter: true},
		{name: "fn fails: rolled back", ctx: context.Background(), inc: "inc-1", fnErr: true, wantErr: true},
		{name: "not the current incarnation", ctx: context.Background(), inc: "inc-0"},
		{name: "deadline already past", ctx: cancelled, inc: "inc-1", wantErr: true},
	}
	for _, c := range cases {
		m := newManager(t)
		after := 0
		_, err := m.update(c.ctx, "w-0", c.inc, func(tx store.Tx, s *herd.Session) ([]*herd.Event, error) {
			if c.fnErr {
				return nil, context.DeadlineExceeded
			}
			s.Process = herd.Unknown
			return nil, nil
		}, func() { after++ })
		if (err != nil) != c.wantErr {
			t.Errorf("[%s] expected error %v, got %v", c.name, c.wantErr, err)
		}
		if want := map[bool]int{true: 1, false: 0}[c.wantAfter]; after != want {
			t.Errorf("[%s] expected after called %d times, got %d", c.name, want, after)
		}
	}
}

// TestLiveOne reads one live session with its open incarnation, and
// nothing for a session that is not live or not there.
func TestLiveOne(t *testing.T) {
	m := newManager(t)
	l, ok, err := m.LiveOne(context.Background(), "w-0")
	if err != nil || !ok || l.S.Name != "w-0" || l.Inc.ID != "inc-1" {
		t.Fatalf("[live] expected w-0 with inc-1, got %+v %v %v", l, ok, err)
	}
	if _, ok, err := m.LiveOne(context.Background(), "w-9"); err != nil || ok {
		t.Errorf("[absent] expected nothing, got %v %v", ok, err)
	}
	if _, err := m.RecordDeath(context.Background(), Death{Session: "w-0", Incarnation: "inc-1", Exit: herd.Exit{Reason: herd.ReasonProcessGone}}); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := m.LiveOne(context.Background(), "w-0"); err != nil || ok {
		t.Errorf("[dead] expected nothing, got %+v %v %v", l, ok, err)
	}
}
