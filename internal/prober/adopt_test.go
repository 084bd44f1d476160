package prober

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/liveness"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/tmux"
	"herd/internal/store"
)

// startSleep starts a real `sleep 300` carrying marker and returns its
// identity; it is killed when the test ends.
func startSleep(t *testing.T, marker string) herd.Identity {
	t.Helper()
	boot, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), herd.EnvIncarnation+"="+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	herdtest.AwaitExec(t, cmd.Process.Pid)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := proc.Real().Identify(cmd.Process.Pid, boot)
	if err != nil || id.Marker != marker {
		t.Fatalf("identify: %+v, %v", id, err)
	}
	return id
}

// events returns the events of kind recorded for session.
func events(t *testing.T, st interface {
	Store() store.Store
}, session, kind string) []herd.Event {
	t.Helper()
	var out []herd.Event
	err := st.Store().View(context.Background(), func(tx store.Tx) (err error) {
		out, err = tx.Events(store.EventFilter{Session: session, Kind: kind})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDroppedWatcherNotAdoptedAgain: regression — a watcher that could
// not read its agent's identity for a moment (here /proc shows its
// environment without the marker, as a read across an exec did) is
// dropped and the prober reads the agent again; the agent is this
// daemon's already, so it is watched again with no second `adopted`
// event (before, one launched agent got one, and after a restart two).
func TestDroppedWatcherNotAdoptedAgain(t *testing.T) {
	p, st := newStatusProber(t)
	id := startSleep(t, "inc-d")
	inc := herd.Incarnation{ID: "inc-d", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: time.Now().UTC()}
	seedSession(t, st, "w-0", inc)

	// The fixture /proc shows the agent's pid and start time, without
	// the marker in its environment: unknown, so the watcher steps back.
	root := t.TempDir()
	dir := filepath.Join(root, fmt.Sprint(id.PID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := make([]string, 52)
	for i := range stat {
		stat[i] = "0"
	}
	stat[0], stat[1], stat[2], stat[19], stat[21] = fmt.Sprint(id.PID), "(sleep)", "S", "1", fmt.Sprint(id.StartTime)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(strings.Join(stat, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environ"), []byte("PATH=/bin\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.o.Proc = proc.FS{Root: root}
	p.Watch("w-0", inc, nil) // as the launch does
	deadline := time.Now().Add(10 * time.Second)
	for p.isWatched(inc) {
		if time.Now().After(deadline) {
			t.Fatal("expected the watcher to step back from an unreadable identity")
		}
		time.Sleep(time.Millisecond)
	}
	p.o.Proc = proc.Real() // /proc reads whole again

	// The next round finds it unwatched and alive.
	s, err := st.Session(context.Background(), "w-0")
	if err != nil {
		t.Fatal(err)
	}
	p.actTmux(context.Background(), tmuxVerdict{s: s, inc: inc, v: decideAlive(t, p, s, inc)})
	if !p.isWatched(inc) {
		t.Error("expected the agent watched again")
	}
	if got := events(t, st, "w-0", herd.EventAdopted); len(got) != 0 {
		t.Errorf("expected no adopted event for an agent this daemon launched, got %d: %+v", len(got), got)
	}

	// A daemon that never held it (a restart) adopts it, once.
	p2 := New(p.o)
	t.Cleanup(p2.Close)
	p2.actTmux(context.Background(), tmuxVerdict{s: s, inc: inc, v: decideAlive(t, p2, s, inc)})
	p2.actTmux(context.Background(), tmuxVerdict{s: s, inc: inc, v: decideAlive(t, p2, s, inc)})
	if got := events(t, st, "w-0", herd.EventAdopted); len(got) != 1 {
		t.Errorf("[restart] expected one adopted event, got %d", len(got))
	}
}

// decideAlive is the verdict of a round that lists the pane alive.
func decideAlive(t *testing.T, p *Prober, s herd.Session, inc herd.Incarnation) liveness.Verdict {
	t.Helper()
	snap := runtime.Snapshot{Panes: map[string][]runtime.Pane{s.Name: {{Session: s.Name, ID: "%1", PID: inc.Root.PID}}}}
	d := p.decideTmux(context.Background(), s, inc, snap)
	if d.v.State != herd.StateRunning {
		t.Fatalf("expected a running verdict, got %+v", d.v)
	}
	return d.v
}

// TestConfirmDeathRefusesLiveAgent: regression — a pidfd "death" of a
// tmux agent that /proc shows alive (pid, start time, marker) is never
// accounted. Before, the confirmation waited for tmux to report the pane
// dead, and after 2 s accounted the death anyway ("tmux did not report
// its pane"), and the live agent was killed and relaunched.
func TestConfirmDeathRefusesLiveAgent(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	c := &tmux.Client{Socket: fmt.Sprintf("herd-prober-live-%d", os.Getpid()), Timeout: 5 * time.Second}
	t.Cleanup(func() { c.KillServer(context.Background()) })
	rt := tmux.New(c)
	p, st := newStatusProber(t)
	p.o.Tmux = rt
	ctx := context.Background()
	started, err := rt.Start(ctx, runtime.Spec{Session: "w-0", Incarnation: "inc-l", Argv: []string{"sleep", "300"}, Workdir: t.TempDir(),
		Env: map[string]string{herd.EnvIncarnation: "inc-l"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var who herd.Identity
	deadline := time.Now().Add(10 * time.Second)
	for {
		who, err = proc.Real().Identify(started.RootPID, p.o.BootID)
		if err == nil && who.Marker == "inc-l" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("identify the pane's agent: %+v, %v", who, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	inc := herd.Incarnation{ID: "inc-l", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: who, Identity: who, StartedAt: time.Now().UTC()}
	seedSession(t, st, "w-0", inc)

	p.confirmDeath("w-0", inc, who) // a watcher said it exited; it did not

	s, err := st.Session(ctx, "w-0")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != herd.StateRunning || s.Exit != nil {
		t.Errorf("expected the live agent left running, got %s %+v", s.State, s.Exit)
	}
	if got := events(t, st, "w-0", herd.EventCrashed); len(got) != 0 {
		t.Errorf("expected no crash, got %+v", got)
	}
	if err := proc.Signal(proc.Real(), who, p.o.BootID, 0); err != nil {
		t.Errorf("expected the agent alive, got %v", err)
	}
}
