package prober

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/runtime/tmux"
	"herd/internal/store"
)

var _ Tmux = (*tmux.Runtime)(nil)

// fakeTmux is a tmux runtime that answers each full listing with the next
// snapshot of its script (the last one again once the script is spent).
type fakeTmux struct {
	mu      sync.Mutex // guards the fields below
	script  []runtime.Snapshot
	listed  int // full listings taken
	one     int // listings of one session taken
	nudged  int
	session runtime.Snapshot // answer of ObserveSession
}

func (f *fakeTmux) Observe(context.Context) runtime.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.listed, len(f.script)-1)
	f.listed++
	return f.script[i]
}

func (f *fakeTmux) ObserveSession(context.Context, string) runtime.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.one++
	return f.session
}

func (f *fakeTmux) Nudge() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nudged++
}

// liveAgent starts a process that stands for a live agent and returns its
// verified identity.
func liveAgent(t *testing.T) herd.Identity {
	t.Helper()
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
	return id
}

// deadAgent is the identity of an agent that is gone: no process has that
// start time.
func deadAgent(t *testing.T) herd.Identity {
	boot, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	return herd.Identity{BootID: boot, PID: 4000000, StartTime: 1}
}

// TestProbeThroughFakeListing: the prober alone, fed listings by a fake
// tmux: a failed, garbled or unattributed listing never reads as a death
// (the session is unknown, nothing is accounted), while a pane gone with
// its process dead is accounted once, however many rounds see it.
func TestProbeThroughFakeListing(t *testing.T) {
	sig := 9
	for _, c := range []struct {
		name        string
		agentAlive  bool
		panes       func(pid int) []tmux.Pane
		listErr     error
		wantState   herd.State
		wantCrashed int
		wantExit    string
	}{
		{name: "listing failed, agent alive", agentAlive: true, listErr: errors.New("tmux: timed out"),
			wantState: herd.StateUnknown},
		{name: "garbled row of the session, agent alive", agentAlive: true,
			panes: func(pid int) []tmux.Pane {
				return []tmux.Pane{{Session: "w-0", PaneID: "%1", PID: pid, Err: errors.New("garbled pane_dead")}}
			},
			wantState: herd.StateUnknown},
		{name: "session missing beside a row of no name, agent alive", agentAlive: true,
			panes:     func(int) []tmux.Pane { return []tmux.Pane{{Err: errors.New("empty session_name")}} },
			wantState: herd.StateUnknown},
		{name: "pane gone, agent alive: unknown, never a second launch", agentAlive: true,
			panes:     func(int) []tmux.Pane { return nil },
			wantState: herd.StateUnknown},
		{name: "pane listed alive, agent alive", agentAlive: true,
			panes:     func(pid int) []tmux.Pane { return []tmux.Pane{{Session: "w-0", PaneID: "%1", PID: pid}} },
			wantState: herd.StateRunning},
		{name: "pane gone, agent dead: one death", panes: func(int) []tmux.Pane { return nil },
			wantCrashed: 1, wantExit: herd.ReasonPaneGone},
		{name: "pane dead by signal, agent dead: one death with the signal",
			panes: func(pid int) []tmux.Pane {
				return []tmux.Pane{{Session: "w-0", PaneID: "%1", PID: pid, Dead: true, DeadSignal: &sig}}
			},
			wantCrashed: 1, wantExit: herd.ReasonSignal},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, st := newStatusProber(t)
			id := deadAgent(t)
			if c.agentAlive {
				id = liveAgent(t)
			}
			var panes []tmux.Pane
			if c.panes != nil {
				panes = c.panes(id.PID)
			}
			ft := &fakeTmux{script: []runtime.Snapshot{tmux.Parse(panes, c.listErr, 0)}}
			p.o.Tmux = ft
			inc := herd.Incarnation{ID: "inc-w-0", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: time.Now().UTC()}
			seedSession(t, st, "w-0", inc)
			ctx := context.Background()
			for range 4 {
				p.Kick() // a full listing every round
				p.Once(ctx)
			}
			s, err := st.Session(ctx, "w-0")
			if err != nil {
				t.Fatal(err)
			}
			crashed := 0
			st.Store().View(ctx, func(tx store.Tx) error {
				evs, _ := tx.Events(store.EventFilter{Session: "w-0", Kind: herd.EventCrashed})
				crashed = len(evs)
				return nil
			})
			if crashed != c.wantCrashed {
				t.Errorf("[%s] expected %d crashed event(s) … got %d (state %s)", c.name, c.wantCrashed, crashed, s.State)
			}
			if c.wantCrashed == 0 && s.State != c.wantState {
				t.Errorf("[%s] expected state %s … got %s", c.name, c.wantState, s.State)
			}
			if c.wantExit != "" && (s.Exit == nil || s.Exit.Reason != c.wantExit) {
				t.Errorf("[%s] expected exit reason %s … got %+v", c.name, c.wantExit, s.Exit)
			}
			if c.wantCrashed == 0 && ft.listed < 4 { // a dead session is listed no more
				t.Errorf("[%s] expected a listing each kicked round … got %d", c.name, ft.listed)
			}
		})
	}
}

// TestQuietRoundsListNothing: with every agent running and watched by a
// pidfd, rounds between two full listings call tmux not at all.
func TestQuietRoundsListNothing(t *testing.T) {
	p, st := newStatusProber(t)
	id := liveAgent(t)
	ft := &fakeTmux{script: []runtime.Snapshot{tmux.Parse([]tmux.Pane{{Session: "w-0", PaneID: "%1", PID: id.PID}}, nil, 0)}}
	p.o.Tmux = ft
	inc := herd.Incarnation{ID: "inc-w-0", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: time.Now().UTC()}
	seedSession(t, st, "w-0", inc)
	ctx := context.Background()
	p.Once(ctx) // lists, adopts and watches
	if !p.isWatched(inc) {
		t.Fatal("expected the agent watched after the first round")
	}
	listed := ft.listed
	for range 3 {
		p.Once(ctx)
	}
	if ft.listed != listed {
		t.Errorf("expected no listing in quiet rounds … got %d more", ft.listed-listed)
	}
	p.Kick()
	p.Once(ctx)
	if ft.listed != listed+1 {
		t.Errorf("expected a kicked round to list … got %d more", ft.listed-listed)
	}
}

// BenchmarkOnceQuiet: one probe round over 100 running tmux agents, each
// watched by a pidfd, between two full listings: the cost an idle fleet
// pays every probe interval.
func BenchmarkOnceQuiet(b *testing.B) {
	p, st := newStatusProber(b)
	boot, err := proc.BootID()
	if err != nil {
		b.Skipf("no boot id: %v", err)
	}
	var panes []tmux.Pane
	for i := range 100 {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		id, err := proc.Real().Identify(cmd.Process.Pid, boot)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("w-%d", i)
		inc := herd.Incarnation{ID: "inc-" + name, Session: name, Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id,
			StartedAt: time.Now().UTC(), Argv: []string{"claude", "--model", "opus"}, Workdir: "/src/app"}
		seedSession(b, st, name, inc)
		panes = append(panes, tmux.Pane{Session: name, PaneID: fmt.Sprintf("%%%d", i), PID: id.PID})
	}
	ft := &fakeTmux{script: []runtime.Snapshot{tmux.Parse(panes, nil, 0)}}
	p.o.Tmux = ft
	ctx := context.Background()
	p.Once(ctx) // adopts and watches every agent
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		p.tmux.listedAt = time.Now() // a quiet round: no listing due
		p.mu.Unlock()
		p.Once(ctx)
	}
}

// TestUnmanagedThroughFakeListing: a herd-named tmux session with no
// record is reported unmanaged; one whose record is not live (stopped,
// its pane left open) is not, nor are the live sessions.
func TestUnmanagedThroughFakeListing(t *testing.T) {
	p, st := newStatusProber(t)
	id := liveAgent(t)
	inc := herd.Incarnation{ID: "inc-w-0", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux, Root: id, Identity: id, StartedAt: time.Now().UTC()}
	seedSession(t, st, "w-0", inc)
	stopped := herd.Incarnation{ID: "inc-w-1", Session: "w-1", Host: "h", RuntimeKind: herd.RuntimeTmux, StartedAt: time.Now().UTC()}
	seedSession(t, st, "w-1", stopped)
	err := st.Store().Update(context.Background(), func(tx store.Tx) error {
		s, err := tx.Session("w-1")
		if err != nil {
			return err
		}
		s.State = herd.StateStopped
		return tx.PutSession(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		panes []tmux.Pane
		want  []string
	}{
		{"live sessions only", []tmux.Pane{{Session: "w-0", PaneID: "%1", PID: id.PID}}, nil},
		{"a stopped session's pane and one of no record", []tmux.Pane{
			{Session: "w-0", PaneID: "%1", PID: id.PID},
			{Session: "w-1", PaneID: "%2", PID: 12},
			{Session: "w-5", PaneID: "%3", PID: 13},
			{Session: "scratch", PaneID: "%4", PID: 14}, // not herd-named
		}, []string{"w-5"}},
	} {
		p.o.Tmux = &fakeTmux{script: []runtime.Snapshot{tmux.Parse(c.panes, nil, 0)}}
		p.Kick()
		p.Once(context.Background())
		var got []string
		for _, u := range p.Unmanaged() {
			got = append(got, u.Session)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("[%s] expected unmanaged %v … got %v", c.name, c.want, got)
		}
	}
}
