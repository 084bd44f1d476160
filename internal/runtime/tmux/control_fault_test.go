package tmux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd/internal/runtime/tmux/tmuxfault"
)

// The test binary is also the fault proxy that tmuxfault's wrapper runs
// in front of `tmux -C`.
func init() { tmuxfault.RunIfProxy() }

// faultyControlClient is a control client whose connection goes through
// the fault proxy (its per-call tmux processes do not), with a short call
// timeout; it returns the mode file and the fault log too.
func faultyControlClient(t *testing.T) (c *Client, mode, log string) {
	t.Helper()
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, mode, log, err := tmuxfault.Install(t.TempDir(), real, self, "")
	if err != nil {
		t.Fatal(err)
	}
	c = newControlClient(t)
	c.Binary = bin
	c.Timeout = time.Second
	return c, mode, log
}

// TestControlFaults: whatever the control connection's answers suffer —
// noise, cut rows, an empty listing, answers out of order, late, missing
// or held, a client that dies mid-answer — a session that runs is never
// read as absent or dead (its state is right or unknown), a session that
// does not exist is never read as present, the agent is never killed, and
// the connection is kept while its answers can be trusted, else dropped,
// its calls going through tmux processes and the connection coming back
// once the fault ends.
func TestControlFaults(t *testing.T) {
	tests := []struct {
		mode string
		// drops: the connection must go (the answers cannot be trusted,
		// or a call timed out); else it must stay and answer.
		drops bool
		// parallel calls, so that answers can cross.
		parallel int
	}{
		{tmuxfault.Garble, false, 1},
		{tmuxfault.Truncate, false, 1},
		{tmuxfault.Empty, false, 1},
		{tmuxfault.Delay + " 100ms", false, 1},
		{tmuxfault.Delay + " 3s", true, 1},
		{tmuxfault.Reorder, true, 4},
		{tmuxfault.Drop, true, 1},
		{tmuxfault.Hang, true, 1},
		{tmuxfault.Crash, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			c, mode, log := faultyControlClient(t)
			r := New(c)
			connected(t, c)
			keep, ok := findPane(t, c, "keep")
			if !ok {
				t.Fatal("keep not listed")
			}
			if err := os.WriteFile(mode, []byte(tt.mode), 0o600); err != nil {
				t.Fatal(err)
			}
			before := c.Stats()
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				wrong []string
				right int
			)
			bad := func(format string, a ...any) {
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf(format, a...))
				mu.Unlock()
			}
			until := time.Now().Add(1500 * time.Millisecond)
			for w := range tt.parallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Now().Before(until) {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						s := r.List(ctx)
						has, herr := c.HasSession(ctx, "keep")
						nope, nerr := c.HasSession(ctx, fmt.Sprintf("nope-%d", w))
						cancel()
						switch {
						case s.NoServer:
							bad("listing read as no server")
						case s.Err == nil && s.Unattributed == nil:
							p, listed := s.Own("keep", keep.PID)
							rows := s.Panes["keep"]
							if !listed && len(rows) == 0 {
								bad("keep read as absent: %+v", s)
							}
							if listed && p.Dead {
								bad("keep read as dead: %+v", p)
							}
							if listed {
								mu.Lock()
								right++
								mu.Unlock()
							}
						}
						if herr == nil && !has {
							bad("has-session keep: absent")
						}
						if nerr == nil && nope {
							bad("has-session nope: present")
						}
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			os.Remove(mode)
			for _, w := range wrong {
				t.Error(w)
			}
			during := c.Stats()
			injected := tmuxfault.Injected(log)
			t.Logf("faults injected %v; calls over the connection %d, through tmux %d; connections %d, ended %d; keep read right %d times",
				injected, during.Control-before.Control, during.Exec-before.Exec, during.Connects-before.Connects, during.Closes-before.Closes, right)
			kind := tmuxfault.Kinds[0]
			for _, k := range tmuxfault.Kinds {
				if len(tt.mode) >= len(k) && tt.mode[:len(k)] == k {
					kind = k
				}
			}
			if injected[kind] == 0 {
				t.Fatalf("expected %s faults injected … got none: the test tested nothing", kind)
			}
			if during.Control == before.Control {
				t.Errorf("expected calls over the faulty connection … got none")
			}
			if tt.drops && during.Closes == before.Closes {
				t.Errorf("expected the connection dropped … it stayed")
			}
			if !tt.drops && (during.Closes != before.Closes || !c.Connected()) {
				t.Errorf("expected the connection kept … %d ended, connected %v", during.Closes-before.Closes, c.Connected())
			}
			if tt.drops && during.Exec == before.Exec {
				t.Errorf("expected calls through tmux processes while the connection was down … got none")
			}
			if err := syscall.Kill(keep.PID, 0); err != nil {
				t.Errorf("expected keep's process alive … %v", err)
			}
			// Once the fault ends, the connection answers, right.
			poll(t, "a right answer over the connection", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				n := c.Stats().Control
				p, err := c.ListSession(ctx, "keep")
				return err == nil && c.Stats().Control > n && len(p) == 1 && p[0].Err == nil && p[0].PID == keep.PID
			})
		})
	}
}
