package budget

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// spending is a ledger with fixed spends per role, counting since when it
// was asked.
type spending struct {
	mu    sync.Mutex
	spent map[string]float64
	since []time.Time
}

func (s *spending) RoleCostSince(role string, since time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = append(s.since, since)
	return s.spent[role]
}

// stopper records the stops and runs their guard against the session as
// the writer has it.
type stopper struct {
	m     *status.Manager
	mu    sync.Mutex
	reqs  []slots.StopRequest
	calls int
}

func (f *stopper) BoundedStop(ctx context.Context, req slots.StopRequest) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if req.Guard != nil {
		s, err := f.m.Session(ctx, req.Name)
		if err != nil {
			return err
		}
		if err := req.Guard(s); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	return nil
}

func (f *stopper) stopped() map[string]slots.StopRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]slots.StopRequest{}
	for _, r := range f.reqs {
		out[r.Name] = r
	}
	return out
}

type notifier struct {
	mu  sync.Mutex
	got []Reached
}

func (n *notifier) BudgetReached(_ context.Context, r Reached) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, r)
}

func setup(t *testing.T) *status.Manager {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	err = st.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range []herd.Role{
			{Name: "soft", Replicas: 2, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, DailyBudgetUSD: 5},
			{Name: "hard", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, DailyBudgetUSD: 5, BudgetHard: true},
			{Name: "under", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux, DailyBudgetUSD: 100},
			{Name: "free", Replicas: 1, Command: []string{"claude"}, Workdir: "/", Runtime: herd.RuntimeTmux},
		} {
			if err := tx.PutRole(r); err != nil {
				return err
			}
		}
		for _, s := range []struct {
			name, role string
			act        herd.Activity
		}{
			{"soft-0", "soft", herd.ActivityIdle}, {"soft-1", "soft", herd.ActivityWorking},
			{"hard-0", "hard", herd.ActivityWorking}, {"under-0", "under", herd.ActivityIdle}, {"free-0", "free", herd.ActivityIdle},
		} {
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

// TestOnceStopsAtIdle: a spent budget stops an idle session at once, a
// working one only at its next idle moment, and with budget_hard at once;
// roles under their budget, or with none, are left alone; the person is
// told once a day.
func TestOnceStopsAtIdle(t *testing.T) {
	m := setup(t)
	ctx := context.Background()
	loc := time.FixedZone("Z", -7*3600)
	now := time.Date(2026, 5, 4, 15, 30, 0, 0, loc)
	sp := &spending{spent: map[string]float64{"soft": 6, "hard": 5.01, "under": 99, "free": 1e6}}
	st := &stopper{m: m}
	nt := &notifier{}
	b := New(Options{Status: m, Spending: sp, Stopper: st, Notifier: nt, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)})
	if err := b.Once(ctx); err != nil {
		t.Fatal(err)
	}
	b.group.Wait()
	got := st.stopped()
	if len(got) != 2 || got["soft-0"].Reason != herd.ReasonBudget || got["hard-0"].Reason != herd.ReasonBudget {
		t.Fatalf("[first look] expected soft-0 (idle) and hard-0 (hard) stopped for the budget, got %v", got)
	}
	if r := got["soft-0"]; r.DropReplica || r.Incarnation != "i-soft-0" || r.Data["resumes_at"] != "2026-05-05T07:00:00Z" {
		t.Errorf("[resumable] expected a stop of the incarnation that keeps the replica and resumes at the next local midnight, got %+v", r)
	}
	for _, since := range sp.since {
		if !since.Equal(time.Date(2026, 5, 4, 0, 0, 0, 0, loc)) {
			t.Errorf("[today] expected spend counted from local midnight, got %s", since)
		}
	}
	// soft-1 ends its turn: the next look stops it.
	if _, err := m.Activity(ctx, status.Seen{Session: "soft-1", Incarnation: "i-soft-1", Activity: herd.ActivityIdle, Source: "hook"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Once(ctx); err != nil {
		t.Fatal(err)
	}
	b.group.Wait()
	if _, ok := st.stopped()["soft-1"]; !ok {
		t.Errorf("[idle] expected soft-1 stopped at its idle moment, got %v", st.stopped())
	}
	nt.mu.Lock()
	if len(nt.got) != 2 {
		t.Errorf("[told] expected soft and hard told once each, got %+v", nt.got)
	}
	nt.mu.Unlock()
}

// TestGuardKeepsATurnBegun: a session idle at the look whose turn began
// before its stop is kept (not hard), and stopped when hard.
func TestGuardKeepsATurnBegun(t *testing.T) {
	m := setup(t)
	ctx := context.Background()
	st := &stopper{m: m}
	b := New(Options{Status: m, Spending: &spending{spent: map[string]float64{"soft": 6}}, Stopper: st, Log: slog.New(slog.DiscardHandler)})
	s, err := m.Session(ctx, "soft-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Activity(ctx, status.Seen{Session: "soft-0", Incarnation: "i-soft-0", Activity: herd.ActivityWorking, Source: "hook"}); err != nil {
		t.Fatal(err)
	}
	b.stop(ctx, s, Reached{Role: "soft", Spent: 6, Budget: 5})
	b.group.Wait()
	if len(st.stopped()) != 0 || st.calls != 1 {
		t.Errorf("[soft] expected the stop called off, got %v", st.stopped())
	}
	b.stop(ctx, s, Reached{Role: "soft", Spent: 6, Budget: 5, Hard: true})
	b.group.Wait()
	if _, ok := st.stopped()["soft-0"]; !ok {
		t.Errorf("[hard] expected soft-0 stopped in its turn, got %v", st.stopped())
	}
}

func TestLaunchHeld(t *testing.T) {
	loc := time.FixedZone("Z", 2*3600)
	now := time.Date(2026, 5, 4, 23, 0, 0, 0, loc)
	sp := &spending{spent: map[string]float64{"soft": 6}}
	b := New(Options{Spending: sp, Now: func() time.Time { return now }})
	soft := herd.Role{Name: "soft", DailyBudgetUSD: 5}
	if until, why := b.LaunchHeld(soft, now); !until.Equal(time.Date(2026, 5, 5, 0, 0, 0, 0, loc)) || why == "" {
		t.Errorf("[spent] expected held until local midnight, got %s %q", until, why)
	}
	if until, _ := b.LaunchHeld(herd.Role{Name: "soft", DailyBudgetUSD: 7}, now); !until.IsZero() {
		t.Errorf("[under] expected not held, got %s", until)
	}
	if until, _ := b.LaunchHeld(herd.Role{Name: "soft"}, now); !until.IsZero() {
		t.Errorf("[no budget] expected not held, got %s", until)
	}
	if until, _ := New(Options{}).LaunchHeld(soft, now); !until.IsZero() {
		t.Errorf("[no ledger] expected not held, got %s", until)
	}
}
