package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/herdtest"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// testConfig is the config of a test daemon: the defaults, but a private
// tmux socket and a tmux binary that fails, so that a test daemon never
// reaches the default socket, where a user's own herd runs. A test that
// needs tmux names its own socket and binary.
func testConfig() *config.Config {
	cfg := config.Default()
	cfg.Tmux.Socket = herdtest.Run + "-daemon"
	cfg.Tmux.Binary = "/bin/false"
	cfg.Web.Listen = "" // no console: test daemons side by side would all want its port
	return cfg
}

// newTestDaemon returns a daemon over a fresh store, not running.
func newTestDaemon(t *testing.T) *Daemon {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := testConfig()
	cfg.Restart = herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Hour, MaxRestarts: 2}
	d, err := New(Options{StateDir: dir, Config: cfg, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.slots.Close(); d.prober.Close(); d.tmux.Close(context.Background()) })
	return d
}

// seed records a running session with one open incarnation.
func seed(t *testing.T, d *Daemon, inc string) {
	t.Helper()
	now := time.Now().UTC()
	err := d.status.Store().Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"x"}, Runtime: herd.RuntimeExec, Restart: d.cfg.Restart}); err != nil {
			return err
		}
		s, err := tx.Session("w-0")
		if err != nil {
			s = herd.Session{Name: "w-0", Role: "w", Host: d.host}
		}
		s.State, s.Incarnation, s.StartedAt = herd.StateRunning, inc, &now
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.PutIncarnation(herd.Incarnation{ID: inc, Session: "w-0", Host: d.host, StartedAt: now.Add(-time.Second)})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func session(t *testing.T, d *Daemon) (s herd.Session, events []herd.Event) {
	t.Helper()
	d.status.Store().View(context.Background(), func(tx store.Tx) (err error) {
		if s, err = tx.Session("w-0"); err != nil {
			return err
		}
		events, err = tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventCrashed})
		return err
	})
	return s, events
}

// TestOneDeathManyPaths: the same death reported by every detection path,
// concurrently, is accounted once; each new death bumps the same counter,
// whatever path saw it, until the budget fails the slot.
func TestOneDeathManyPaths(t *testing.T) {
	d := newTestDaemon(t)
	sig := 9
	code := 1
	paths := []herd.Exit{
		{Signal: &sig, Reason: herd.ReasonSignal}, // the child's wait status
		{Reason: herd.ReasonProcessGone},          // a pidfd / /proc check
		{Reason: herd.ReasonPaneGone},             // the tmux listing
		{Reason: herd.ReasonStallKilled},          // the watchdog
		{Code: &code, Reason: herd.ReasonExitCode},
	}
	for round, inc := range []string{"inc-a", "inc-b", "inc-c"} {
		seed(t, d, inc)
		var wg sync.WaitGroup
		accounted := make(chan bool, len(paths))
		for _, exit := range paths {
			wg.Go(func() {
				ok, err := d.status.RecordDeath(context.Background(), status.Death{Session: "w-0", Incarnation: inc, Exit: exit})
				if err != nil {
					t.Error(err)
				}
				accounted <- ok
			})
		}
		wg.Wait()
		close(accounted)
		n := 0
		for ok := range accounted {
			if ok {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("[round %d] expected the death accounted once, got %d", round, n)
		}
		s, crashes := session(t, d)
		if len(crashes) != round+1 {
			t.Errorf("[round %d] expected %d crashed events, got %d", round, round+1, len(crashes))
		}
		switch round {
		case 0, 1:
			if s.State != herd.StateBackoff || s.Restarts != round+1 || s.BackoffUntil == nil {
				t.Errorf("[round %d] expected backoff with restarts %d, got %s restarts %d", round, round+1, s.State, s.Restarts)
			}
		case 2:
			if s.State != herd.StateFailed || s.Restarts != 2 {
				t.Errorf("[round %d] expected failed after 2 restarts, got %s restarts %d", round, s.State, s.Restarts)
			}
		}
		if s.Exit == nil {
			t.Errorf("[round %d] expected a crashed marker", round)
		}
	}
	// A late report of an old death changes nothing.
	before, _ := session(t, d)
	if ok, _ := d.status.RecordDeath(context.Background(), status.Death{Session: "w-0", Incarnation: "inc-a", Exit: paths[0]}); ok {
		t.Error("expected a stale death ignored")
	}
	if after, _ := session(t, d); after.Restarts != before.Restarts || after.State != before.State {
		t.Errorf("expected no change, got %+v", after)
	}
}

// TestStoppingIsNotACrash: a death the stop path is causing is not a crash.
func TestStoppingIsNotACrash(t *testing.T) {
	d := newTestDaemon(t)
	seed(t, d, "inc-a")
	d.status.BeginTakedown("inc-a", "")
	if ok, _ := d.status.RecordDeath(context.Background(), status.Death{Session: "w-0", Incarnation: "inc-a", Exit: herd.Exit{Reason: herd.ReasonProcessGone}}); ok {
		t.Error("expected the stop path's death not to be accounted as a crash")
	}
	if s, crashes := session(t, d); len(crashes) != 0 || s.State != herd.StateRunning {
		t.Errorf("expected no crash, got %s with %d crashes", s.State, len(crashes))
	}
}
