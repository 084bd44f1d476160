package watchdog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/config"
	"herd/internal/prober"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/runtime/tmux"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

var (
	_ Listings = (*prober.Prober)(nil)
	_ Screens  = (*tmux.Runtime)(nil)
	_ Outputs  = (*execrt.Runtime)(nil)
)

// fakeListings stands for the prober's last listing.
type fakeListings struct {
	mu   sync.Mutex // guards snap
	snap runtime.Snapshot
}

func (f *fakeListings) Last() runtime.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}

// fakeScreens answers every capture with screen, and counts them.
type fakeScreens struct {
	mu       sync.Mutex // guards the fields below
	screen   string
	captured int
}

func (f *fakeScreens) CapturePane(context.Context, string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.captured++
	return []byte(f.screen), nil
}

func (f *fakeScreens) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.captured
}

// fakeOutputs puts exec output files in a directory of the test's.
type fakeOutputs struct{ dir string }

func (f fakeOutputs) Paths(session, inc string) (string, string) {
	return filepath.Join(f.dir, inc+".out"), filepath.Join(f.dir, inc+".err")
}
func (fakeOutputs) Flushed(string) <-chan struct{} { return nil }
func (fakeOutputs) LogCap() int64                  { return execrt.DefaultMaxLogBytes }

// seamWatchdog is a watchdog over a real store whose runtimes are fakes.
type seamWatchdog struct {
	w       *Watchdog
	st      *status.Manager
	listing *fakeListings
	screens *fakeScreens
	t0      time.Time // when the agent was launched
}

// newSeamWatchdog seeds one running tmux session w-0 of agent kind, with
// activity act, launched at t0, whose pane pid is 4000000 (its identity
// reads dead in /proc, so no sample succeeds: the watchdog must decide
// without one).
func newSeamWatchdog(t testing.TB, kind string, act herd.Activity) *seamWatchdog {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := status.New(db, "h", herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Minute, MaxBackoff: time.Hour}, log)
	cfg := config.Default()
	cfg.Watchdog.StallAfter, cfg.Watchdog.StallRepeat = 5*time.Minute, time.Hour
	boot, _ := proc.BootID()
	sw := &seamWatchdog{st: st, listing: &fakeListings{}, screens: &fakeScreens{}, t0: time.Now().Add(-time.Hour).Truncate(time.Second)}
	sw.w = New(Options{Status: st, Prober: sw.listing, Tmux: sw.screens, Exec: fakeOutputs{t.TempDir()}, Config: cfg,
		Proc: proc.Real(), BootID: boot, StateDir: t.TempDir(), Log: log})
	id := herd.Identity{BootID: boot, PID: 4000000, StartTime: 1}
	inc := herd.Incarnation{ID: "inc-w-0", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: sw.t0.UTC()}
	err = st.Store().Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"x"}, Runtime: herd.RuntimeTmux, Agent: kind}); err != nil {
			return err
		}
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		return tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning,
			Runtime: herd.Alive, Process: herd.Alive, Activity: act, Incarnation: inc.ID, StateSince: sw.t0.UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
	sw.pane(time.Time{})
	return sw
}

// pane lists w-0's pane with window_activity at (zero: none).
func (sw *seamWatchdog) pane(at time.Time) {
	sw.listing.mu.Lock()
	defer sw.listing.mu.Unlock()
	sw.listing.snap = tmux.Parse([]tmux.Pane{{Session: "w-0", PaneID: "%1", PID: 4000000, WindowActivity: at}}, nil, 0)
}

func (sw *seamWatchdog) session(t *testing.T) herd.Session {
	t.Helper()
	s, err := sw.st.Session(context.Background(), "w-0")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (sw *seamWatchdog) events(t *testing.T, kind string) []herd.Event {
	t.Helper()
	var evs []herd.Event
	sw.st.Store().View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Session: "w-0", Kind: kind})
		return err
	})
	return evs
}

// TestStallThroughFakes: the watchdog alone, its runtimes fakes: an idle
// or waiting agent is never stalled however long it is silent; a working
// (or unknown) silent one is stalled once stall_after has passed, not
// before; output its pane showed (window_activity) counts.
func TestStallThroughFakes(t *testing.T) {
	for _, c := range []struct {
		name     string
		act      herd.Activity
		silent   time.Duration // since the launch, at the tick
		window   time.Duration // window_activity this long before the tick; 0: none
		wantStop bool
	}{
		{name: "idle, silent a day", act: herd.ActivityIdle, silent: 24 * time.Hour},
		{name: "waiting, silent a day", act: herd.ActivityWaiting, silent: 24 * time.Hour},
		{name: "working, silent under stall_after", act: herd.ActivityWorking, silent: 4 * time.Minute},
		{name: "working, silent past stall_after", act: herd.ActivityWorking, silent: 5*time.Minute + time.Second, wantStop: true},
		{name: "unknown, silent past stall_after", act: herd.ActivityUnknown, silent: time.Hour, wantStop: true},
		{name: "working, its pane printed a minute ago", act: herd.ActivityWorking, silent: time.Hour, window: time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			sw := newSeamWatchdog(t, herd.AgentGeneric, c.act)
			now := sw.t0.Add(c.silent)
			if c.window > 0 {
				sw.pane(now.Add(-c.window))
			}
			for range 3 { // a stall is marked once, whatever the ticks
				sw.w.Tick(context.Background(), now)
				now = now.Add(time.Second)
			}
			s := sw.session(t)
			stalled := len(sw.events(t, herd.EventStalled))
			if got := s.State == herd.StateStalled; got != c.wantStop || stalled != map[bool]int{true: 1}[c.wantStop] {
				t.Errorf("[%s] expected stalled=%v (one event) … got state %s, %d stalled event(s)", c.name, c.wantStop, s.State, stalled)
			}
		})
	}
}

// TestScreenReadFromFakeCapture: an agent herd reads (Claude) is read from
// a capture of its own pane: a startup dialog is waiting, a spinner
// working; a pane whose window did not move is not captured again before
// quietCaptureEvery.
func TestScreenReadFromFakeCapture(t *testing.T) {
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "agents", "testdata", "claude", "2.1.330", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		name, screen string
		from         herd.Activity
		want         herd.Activity
		wantReason   string
	}{
		{"trust dialog", fixture("screen-trust.txt"), herd.ActivityUnknown, herd.ActivityWaiting, agents.ReasonStartupPrompt},
		{"spinner", fixture("screen-spinner-start.txt"), herd.ActivityIdle, herd.ActivityWorking, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sw := newSeamWatchdog(t, herd.AgentClaude, c.from)
			sw.screens.screen = c.screen
			now := time.Now()
			sw.w.Tick(context.Background(), now)
			if n := sw.screens.count(); n != 1 {
				t.Fatalf("[%s] expected one capture … got %d", c.name, n)
			}
			if s := sw.session(t); s.Activity != c.want {
				t.Errorf("[%s] expected activity %s … got %s", c.name, c.want, s.Activity)
			}
			evs := sw.events(t, herd.EventActivity)
			if len(evs) != 1 || evs[0].Reason != firstNonEmpty(c.wantReason, screenSource) {
				t.Errorf("[%s] expected one activity event, reason %q … got %+v", c.name, firstNonEmpty(c.wantReason, screenSource), evs)
			}
			for i := range 5 {
				sw.w.Tick(context.Background(), now.Add(time.Duration(i+1)*time.Second))
			}
			if n := sw.screens.count(); n != 1 {
				t.Errorf("[%s] expected no capture of a still window … got %d in all", c.name, n)
			}
		})
	}
}

// BenchmarkTickIdle: one watchdog tick over 100 idle tmux agents whose
// panes print nothing: the cost an idle fleet pays every second.
func BenchmarkTickIdle(b *testing.B) {
	sw := newSeamWatchdog(b, herd.AgentGeneric, herd.ActivityIdle)
	var panes []tmux.Pane
	err := sw.st.Store().Update(context.Background(), func(tx store.Tx) error {
		for i := 1; i < 100; i++ {
			name := fmt.Sprintf("w-%d", i)
			inc := herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", RuntimeKind: herd.RuntimeTmux,
				Root: herd.Identity{PID: 4000000 + i}, Identity: herd.Identity{PID: 4000000 + i, StartTime: 1}, StartedAt: sw.t0.UTC(),
				Argv: []string{"claude", "--model", "opus"}, Workdir: "/src/app"}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			if err := tx.PutSession(herd.Session{Name: name, Role: "w", Host: "h", RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning,
				Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityIdle, Incarnation: inc.ID, StateSince: sw.t0.UTC()}); err != nil {
				return err
			}
			panes = append(panes, tmux.Pane{Session: name, PaneID: fmt.Sprintf("%%%d", i+1), PID: 4000000 + i, WindowActivity: sw.t0})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	panes = append(panes, tmux.Pane{Session: "w-0", PaneID: "%1", PID: 4000000, WindowActivity: sw.t0})
	sw.listing.snap = tmux.Parse(panes, nil, 0)
	ctx := context.Background()
	now := time.Now()
	sw.w.Tick(ctx, now)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		sw.w.Tick(ctx, now)
	}
}
