package slots

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/herdtest"
	"herd/internal/proc"
)

// TestCrashCleanupSharesOneScan: 50 deaths accounted at once, each with a
// child that outlived its agent (marker containment), are cleaned up by
// the scans of one death — the pass that ends the children and the two
// that confirm they are gone — not by 50 scans of /proc; every child is
// ended, and a process carrying no marker is not touched.
func TestCrashCleanupSharesOneScan(t *testing.T) {
	e := newEnv(t)
	boot := e.sl.o.BootID
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.sl.o.Contain = cgroup.New(log, cgroup.Options{Off: "test"}, boot)
	// The first pass waits a second for the deaths that come together,
	// so a loaded machine accounts all 50 before it.
	e.sl.cleanup = cgroup.NewSweeper(cgroup.SweeperOptions{FS: proc.Real(), BootID: boot, Settle: time.Second, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.sl.cleanup.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	canary := startMarked(t, "", "sleep", "300")
	const deaths = 50
	var children []*child
	for i := range deaths {
		children = append(children, startMarked(t, fmt.Sprintf("inc-dead-%d", i), "sleep", "300"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := range deaths {
		for {
			id, err := proc.Real().Identify(children[i].cmd.Process.Pid, boot)
			if err == nil && id.Marker == fmt.Sprintf("inc-dead-%d", i) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d never showed its marker", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range deaths {
		e.sl.Ended(fmt.Sprintf("inc-dead-%d", i))
	}
	for _, c := range children {
		select {
		case <-c.reaped:
		case <-time.After(10 * time.Second):
			t.Fatalf("expected pid %d ended by the crash cleanup", c.cmd.Process.Pid)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for e.sl.cleanup.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("expected every death's cleanup done … %d pending", e.sl.cleanup.Pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 3 passes; one more when a child was slow to die under load.
	if got := e.sl.cleanup.Passes(); got < 3 || got > 4 {
		t.Errorf("expected %d deaths to cost 3 scans of /proc … got %d", deaths, got)
	}
	if err := canary.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("expected the unmarked canary untouched … %v", err)
	}
}

// child is a process a test started and reaps.
type child struct {
	cmd    *exec.Cmd
	reaped chan struct{}
}

// startMarked starts argv carrying HERD_INCARNATION=marker (none when
// empty), reaps it in the background and kills it when the test ends.
func startMarked(t *testing.T, marker string, argv ...string) *child {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	if marker != "" {
		cmd.Env = append(cmd.Env, herd.EnvIncarnation+"="+marker)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	herdtest.AwaitExec(t, cmd.Process.Pid)
	c := &child{cmd: cmd, reaped: make(chan struct{})}
	go func() { cmd.Wait(); close(c.reaped) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.reaped
	})
	return c
}
