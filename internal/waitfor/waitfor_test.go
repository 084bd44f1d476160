package waitfor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
)

func TestParseGoal(t *testing.T) {
	cases := []struct {
		in   string
		want Goal
		err  bool
	}{
		{in: "idle", want: Goal{Activity: herd.ActivityIdle}},
		{in: "stopped", want: Goal{State: herd.StateStopped}},
		{in: "unknown", want: Goal{State: herd.StateUnknown}},
		{in: "activity=unknown", want: Goal{Activity: herd.ActivityUnknown}},
		{in: "state=running", want: Goal{State: herd.StateRunning}},
		{in: "state=idle", err: true},
		{in: "asleep", err: true},
		{in: "", err: true},
	}
	for _, tc := range cases {
		g, err := ParseGoal(tc.in)
		if (err != nil) != tc.err || g != tc.want {
			t.Errorf("[%q] expected %+v (error %v), got %+v, %v", tc.in, tc.want, tc.err, g, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	views := []api.SessionView{
		{Name: "a", State: herd.StateRunning, Activity: herd.ActivityIdle},
		{Name: "b", State: herd.StateRunning, Activity: herd.ActivityWorking},
		{Name: "c", State: herd.StateStopped, Activity: herd.ActivityIdle},
	}
	cases := []struct {
		name    string
		goal    Goal
		names   []string
		lagging []string
	}{
		{name: "idle", goal: Goal{Activity: herd.ActivityIdle}, names: []string{"a", "b"}, lagging: []string{"b"}},
		{name: "a stopped session is never idle", goal: Goal{Activity: herd.ActivityIdle}, names: []string{"a", "c"}, lagging: []string{"c"}},
		{name: "stopped", goal: Goal{State: herd.StateStopped}, names: []string{"c"}},
		{name: "gone lags", goal: Goal{State: herd.StateStopped}, names: []string{"c", "d"}, lagging: []string{"d"}},
		{name: "running", goal: Goal{State: herd.StateRunning}, names: []string{"a", "b"}},
	}
	for _, tc := range cases {
		_, lagging := Evaluate(views, tc.names, tc.goal, map[string]api.WaitTarget{})
		if d := cmp.Diff(tc.lagging, lagging); d != "" {
			t.Errorf("[%s] lagging (-expected +got):\n%s", tc.name, d)
		}
	}
	from := map[string]api.WaitTarget{}
	Evaluate(views, []string{"b"}, Goal{Activity: herd.ActivityIdle}, from)
	views[1].Activity = herd.ActivityIdle
	out, lagging := Evaluate(views, []string{"b"}, Goal{Activity: herd.ActivityIdle}, from)
	if len(lagging) != 0 || out[0].FromActivity != "working" || out[0].Activity != "idle" {
		t.Errorf("[from] expected b working -> idle, reached, got %+v lagging %v", out, lagging)
	}
}

// fleet is a Source whose sessions a test changes.
type fleet struct {
	mu    sync.Mutex
	views []api.SessionView
}

func (f *fleet) Sessions(context.Context) ([]api.SessionView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.SessionView(nil), f.views...), nil
}

func (f *fleet) set(i int, a herd.Activity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.views[i].Activity = a
}

func TestWait(t *testing.T) {
	idle := Goal{Activity: herd.ActivityIdle}
	newFleet := func() *fleet {
		return &fleet{views: []api.SessionView{
			{Name: "w-0", Role: "w", State: herd.StateRunning, Activity: herd.ActivityWorking},
			{Name: "w-1", Role: "w", State: herd.StateRunning, Activity: herd.ActivityIdle},
			{Name: "w-2", Role: "w", State: herd.StateStopped, Activity: herd.ActivityWorking},
		}}
	}
	t.Run("reached", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet()
			go func() {
				time.Sleep(time.Second)
				f.set(0, herd.ActivityIdle)
			}()
			start := time.Now()
			res, err := Wait(t.Context(), f, Poll(DefaultPoll), api.Targets{Role: "w"}, idle, time.Minute)
			if err != nil || !res.Reached || len(res.Sessions) != 2 {
				t.Fatalf("expected w-0 and w-1 (not the stopped w-2) reached, got %+v, %v", res, err)
			}
			if took := time.Since(start); took > time.Second+DefaultPoll {
				t.Errorf("expected the wake-up within one poll, took %s", took)
			}
		})
	})
	t.Run("timeout names the laggards", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			res, err := Wait(t.Context(), newFleet(), Poll(DefaultPoll), api.Targets{Names: []string{"w-0", "w-1"}}, idle, 5*time.Second)
			if err != nil || res.Reached || !cmp.Equal(res.Lagging, []string{"w-0"}) {
				t.Fatalf("expected a timeout with w-0 lagging, got %+v, %v", res, err)
			}
		})
	})
	t.Run("missing", func(t *testing.T) {
		_, err := Wait(t.Context(), newFleet(), Poll(DefaultPoll), api.Targets{Names: []string{"nope"}}, idle, time.Second)
		if !errors.Is(err, ErrMissing) {
			t.Fatalf("expected ErrMissing, got %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err := Wait(ctx, newFleet(), Poll(DefaultPoll), api.Targets{Role: "w"}, idle, time.Hour)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("expected the caller's end, got %v", err)
			}
		})
	})
}

// TestNotified: a notification wakes a wait at once and takes the queued
// ones with it; without one the backstop does; a subscription that ended
// leaves the backstop, never a busy loop.
func TestNotified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := make(chan int, 4)
		n := &Notified[int]{C: c, Backstop: time.Second}
		start := time.Now()
		c <- 1
		c <- 2
		c <- 3
		if err := n.Next(t.Context()); err != nil || time.Since(start) != 0 {
			t.Fatalf("[notified] expected an immediate wake … got %v after %s", err, time.Since(start))
		}
		if len(c) != 0 {
			t.Errorf("[notified] expected the queued notifications taken … got %d left", len(c))
		}
		start = time.Now()
		if err := n.Next(t.Context()); err != nil || time.Since(start) != time.Second {
			t.Errorf("[quiet] expected the backstop after 1s … got %v after %s", err, time.Since(start))
		}
		close(c)
		if err := n.Next(t.Context()); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := n.Next(t.Context()); err != nil || time.Since(start) != time.Second {
			t.Errorf("[closed] expected the backstop alone … got %v after %s", err, time.Since(start))
		}
	})
}

// TestNotifiedHint: a hint (another host's events committed) wakes a wait
// at once; one broadcast while the caller looks ends the next wait at
// once; without one the backstop does.
func TestNotifiedHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ch := make(chan struct{})
		hint := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return ch }
		broadcast := func() { mu.Lock(); defer mu.Unlock(); close(ch); ch = make(chan struct{}) }
		n := &Notified[int]{C: make(chan int), Hint: hint, Backstop: time.Second}
		start := time.Now()
		go func() {
			time.Sleep(100 * time.Millisecond)
			broadcast()
		}()
		if err := n.Next(t.Context()); err != nil || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("[hint] expected a wake at the broadcast (100ms) … got %v after %s", err, time.Since(start))
		}
		broadcast() // while the caller looks
		start = time.Now()
		if err := n.Next(t.Context()); err != nil || time.Since(start) != 0 {
			t.Errorf("[during the look] expected an immediate wake … got %v after %s", err, time.Since(start))
		}
		start = time.Now()
		if err := n.Next(t.Context()); err != nil || time.Since(start) != time.Second {
			t.Errorf("[quiet] expected the backstop after 1s … got %v after %s", err, time.Since(start))
		}
	})
}
