package prober

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/tmux"
	"herd/internal/status"
	"herd/internal/store"
)

// TestPidfdDeathListsItsSessionAlone: a SIGKILL of a tmux agent that a
// pidfd watches is accounted from a listing of its own session, with the
// pane's signal, while no probe round runs (nor lists the whole server);
// the other agents are neither listed nor touched.
func TestPidfdDeathListsItsSessionAlone(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	c := &tmux.Client{Socket: fmt.Sprintf("herd-prober-%d", os.Getpid()), Timeout: 5 * time.Second}
	t.Cleanup(func() { c.KillServer(context.Background()) })
	rt := tmux.New(c)
	p, st := newStatusProber(t)
	p.o.Tmux = rt
	boot, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	ctx := context.Background()
	var incs []herd.Incarnation
	for i := range 3 {
		name := fmt.Sprintf("w-%d", i)
		id := fmt.Sprintf("inc-%d", i)
		started, err := rt.Start(ctx, runtime.Spec{Session: name, Incarnation: id, Argv: []string{"sleep", "300"}, Workdir: t.TempDir(),
			Env: map[string]string{herd.EnvIncarnation: id}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		herdtest.AwaitExec(t, started.RootPID)
		who, err := proc.Real().Identify(started.RootPID, boot)
		if err != nil {
			t.Fatal(err)
		}
		inc := herd.Incarnation{ID: id, Session: name, Host: "h", RuntimeKind: herd.RuntimeTmux, Root: who, Identity: who, StartedAt: time.Now().UTC()}
		seedSession(t, st, name, inc)
		p.Watch(name, inc, nil)
		incs = append(incs, inc)
	}
	killed := time.Now()
	if err := syscall.Kill(incs[1].Identity.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var got herd.Session
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err = st.Session(ctx, "w-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != herd.StateRunning || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(killed)
	if got.Exit == nil || got.Exit.Signal == nil || *got.Exit.Signal != int(syscall.SIGKILL) {
		t.Fatalf("expected w-1 accounted with the pane's signal 9, got %s %+v", got.State, got.Exit)
	}
	t.Logf("SIGKILL -> accounted in %v", took)
	p.mu.Lock()
	full := p.tmux.observed
	p.mu.Unlock()
	if full != 0 {
		t.Errorf("expected no full listing, got %d", full)
	}
	for _, name := range []string{"w-0", "w-2"} {
		s, _ := st.Session(ctx, name)
		if s.State != herd.StateRunning {
			t.Errorf("expected %s untouched (running), got %s", name, s.State)
		}
	}
	var crashed []herd.Event
	st.Store().View(ctx, func(tx store.Tx) (err error) {
		crashed, err = tx.Events(store.EventFilter{Kind: herd.EventCrashed})
		return err
	})
	if len(crashed) != 1 || crashed[0].Session != "w-1" {
		t.Errorf("expected one crashed event, of w-1, got %+v", crashed)
	}
}

// TestQuietListings: while a pidfd watches every live tmux agent, the
// full listing runs every quietListings intervals only; a kick, a session
// no pidfd watches, or the end of the quiet period makes it due.
func TestQuietListings(t *testing.T) {
	p, _ := newStatusProber(t)
	boot, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := proc.Real().Identify(cmd.Process.Pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	watched := herd.Incarnation{ID: "inc-w", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id}
	p.Watch("w-0", watched, nil)
	running := status.Live{S: herd.Session{Name: "w-0", State: herd.StateRunning}, Inc: watched}
	pending := status.Live{S: herd.Session{Name: "w-1", State: herd.StatePending}, Inc: herd.Incarnation{ID: "inc-p"}}
	unwatched := status.Live{S: herd.Session{Name: "w-2", State: herd.StateRunning}, Inc: herd.Incarnation{ID: "inc-u", Identity: id}}
	cases := []struct {
		name     string
		listedAt time.Duration // ago
		kicked   bool
		failed   bool
		sessions []status.Live
		want     bool
	}{
		{"all watched, listed just now", 0, false, false, []status.Live{running}, false},
		{"all watched, quiet period over", quietListings * time.Second, false, false, []status.Live{running}, true},
		{"kicked", 0, true, false, []status.Live{running}, true},
		{"last listing failed", 0, false, true, []status.Live{running}, true},
		{"a pending session", 0, false, false, []status.Live{running, pending}, true},
		{"a session no pidfd watches", 0, false, false, []status.Live{running, unwatched}, true},
	}
	for _, c := range cases {
		p.mu.Lock()
		p.tmux.listedAt, p.tmux.kicked, p.tmux.failed = time.Now().Add(-c.listedAt), c.kicked, c.failed
		p.mu.Unlock()
		if got := p.listingDue(c.sessions); got != c.want {
			t.Errorf("[%s] expected due %v, got %v", c.name, c.want, got)
		}
	}
}
