package tmux

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/proc"
	"herd/internal/runtime/tmux/serverproof"
)

// envCanary makes the test binary run as a canary: a process that is not
// tmux and records every signal it gets, one name per line, in the file the
// variable names.
const envCanary = "HERD_TEST_TMUX_CANARY"

func TestMain(m *testing.M) {
	if path := os.Getenv(envCanary); path != "" {
		runCanary(path)
		return
	}
	if path := os.Getenv(envInputAgent); path != "" {
		runInputAgent(path, os.Getenv(envInputMode))
		return
	}
	os.Exit(m.Run())
}

// runCanary records signals until SIGTERM or a minute has passed.
func runCanary(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(2)
	}
	ch := make(chan os.Signal, 64)
	signal.Notify(ch, syscall.SIGCHLD, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP,
		syscall.SIGINT, syscall.SIGTERM, syscall.SIGCONT, syscall.SIGWINCH)
	fmt.Println("ready")
	deadline := time.After(time.Minute)
	for {
		select {
		case s := <-ch:
			fmt.Fprintln(f, unix.SignalName(s.(syscall.Signal)))
			_ = f.Sync()
			if s == syscall.SIGTERM {
				os.Exit(0)
			}
		case <-deadline:
			os.Exit(0)
		}
	}
}

// canary is a running canary process.
type canary struct {
	cmd  *exec.Cmd
	path string
	sync int // control signals sent so far
}

// startCanary starts a canary and waits until it records signals.
func startCanary(t *testing.T) *canary {
	t.Helper()
	path := filepath.Join(t.TempDir(), "signals")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envCanary+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("canary did not start: %q, %v", line, err)
	}
	return &canary{cmd: cmd, path: path}
}

// signals returns what the canary has recorded.
func (c *canary) signals() []string {
	b, _ := os.ReadFile(c.path)
	return strings.Fields(string(b))
}

// count returns how many times the canary recorded name.
func (c *canary) count(name string) int {
	n := 0
	for _, s := range c.signals() {
		if s == name {
			n++
		}
	}
	return n
}

// settle sends the canary two control signals, one after the other, and
// waits for each to be recorded: any signal sent before settle is then
// recorded too (one still pending with the first control signal is
// delivered before the second is sent).
func (c *canary) settle(t *testing.T) {
	t.Helper()
	for range 2 {
		c.sync++
		want := c.sync
		// Our own child, not yet waited for: its pid cannot be reused.
		if err := c.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			t.Fatalf("control signal to the canary: %v", err)
		}
		poll(t, "the canary's control signal", func() bool { return c.count("SIGUSR2") >= want })
	}
}

// lyingTmux writes a tmux stand-in that answers list-panes with one dead
// pane whose exit tmux has "not reported", naming serverPID as the server.
func lyingTmux(t *testing.T, serverPID int) string {
	t.Helper()
	row := strings.Join([]string{"x", "%1", "4194300", "1", "", "", "0", "1700000000", "1700000000", fmt.Sprint(serverPID)}, "\t")
	script := "#!/bin/sh\nprintf '%s\\n' '" + row + "'\n"
	path := filepath.Join(t.TempDir(), "tmux")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestListPanesNeverNudgesAStranger: regression — when a listing's
// server-pid field named a process that is not the tmux server, ListPanes
// sent it SIGCHLD on tmux's word alone (45–76 signals in 3 s from a daemon
// probing every tick). Now nothing is sent to a pid not proven to be the
// server of the client's socket.
func TestListPanesNeverNudgesAStranger(t *testing.T) {
	can := startCanary(t)
	// The canary records a SIGCHLD when one is sent.
	if err := can.cmd.Process.Signal(syscall.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	poll(t, "the canary's first SIGCHLD", func() bool { return can.count("SIGCHLD") == 1 })

	c := &Client{Binary: lyingTmux(t, can.cmd.Process.Pid), Socket: "herd-test-canary", Timeout: 5 * time.Second}
	for range 20 {
		panes, err := c.ListPanes(context.Background())
		if err != nil || len(panes) != 1 || panes[0].ServerPID != can.cmd.Process.Pid {
			t.Fatalf("expected the lying listing … got %+v, %v", panes, err)
		}
	}
	can.settle(t)
	if n := can.count("SIGCHLD"); n != 1 {
		t.Errorf("expected no SIGCHLD from ListPanes to a process that is not the tmux server … the canary got %d (%v)", n-1, can.signals())
	}
}

// TestVerifyServer: only the tmux server listening on the client's own
// socket is accepted, judged from /proc, not from what tmux says.
func TestVerifyServer(t *testing.T) {
	c := newClient(t)
	other := newClient(t)
	ctx := ctxT(t)
	for _, cl := range []*Client{c, other} {
		if _, err := cl.NewSession(ctx, "s", "", nil, []string{"sleep", "100"}); err != nil {
			t.Fatal(err)
		}
	}
	server, _ := findPane(t, c, "s")
	otherServer, _ := findPane(t, other, "s")
	can := startCanary(t)
	fs, boot := realProc(t)

	tests := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"the server of this socket", server.ServerPID, true},
		{"the tmux server of another socket", otherServer.ServerPID, false},
		{"a process that is not tmux", can.cmd.Process.Pid, false},
		{"the pane's process", server.PID, false},
		{"the caller itself", os.Getpid(), false},
		{"no pid", 0, false},
		{"a pid that does not exist", 4194304, false},
	}
	for _, tt := range tests {
		id, err := serverproof.Verify(fs, c.label(), tt.pid, boot)
		if (err == nil) != tt.ok {
			t.Errorf("[%s] expected accepted=%v … got %v", tt.name, tt.ok, err)
			continue
		}
		if tt.ok && (id.PID != tt.pid || id.StartTime == 0 || id.BootID != boot) {
			t.Errorf("[%s] expected an identity of pid %d … got %+v", tt.name, tt.pid, id)
		}
	}
	// The nudge itself reaches the proven server, and refuses the others.
	if err := c.NudgeServer(server.ServerPID); err != nil {
		t.Errorf("expected the nudge to reach the server … got %v", err)
	}
	if err := c.NudgeServer(otherServer.ServerPID); err == nil {
		t.Errorf("expected no nudge to the server of another socket")
	}
	if err := c.NudgeServer(can.cmd.Process.Pid); err == nil {
		t.Errorf("expected no nudge to the canary")
	}
	// The proven server is remembered and nudged again without its fd
	// table read; a remembered pid that is another process now (another
	// start time) is proven again, and refused.
	if id, ok := c.server.get(server.ServerPID, boot); !ok || id.StartTime == 0 {
		t.Errorf("expected the proven server remembered … got %+v", id)
	}
	if err := c.NudgeServer(server.ServerPID); err != nil {
		t.Errorf("expected the nudge to reach the remembered server … got %v", err)
	}
	st, err := fs.Stat(can.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	c.server.set(herd.Identity{BootID: boot, PID: can.cmd.Process.Pid, StartTime: st.StartTime + 1})
	if err := c.NudgeServer(can.cmd.Process.Pid); err == nil {
		t.Errorf("expected no nudge to the canary under a remembered pid")
	}
	if _, ok := c.server.get(can.cmd.Process.Pid, boot); ok {
		t.Errorf("expected the wrong identity forgotten")
	}
	can.settle(t)
	if sig := can.signals(); len(sig) != 2 {
		t.Errorf("expected the canary to get only the two control signals … got %v", sig)
	}
}

// realProc returns the running system's /proc and boot id.
func realProc(t *testing.T) (proc.FS, string) {
	t.Helper()
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Real(), boot
}
