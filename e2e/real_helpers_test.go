package e2e

import (
	"context"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"herd/internal/mockapi"
)

// startMock runs the loopback mock API for the test; it stops with it.
func startMock(t *testing.T) (*mockapi.Server, net.Listener) {
	t.Helper()
	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mock := mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	return mock, ln
}

// endAgents ends e's agents, which outlive the daemon by design, and
// waits for them, so nothing writes into the test's directories once they
// are removed.
func (e *env) endAgents() {
	_ = exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		pids := e.agentPIDs()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}
