package proc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
)

// BenchmarkWaitExitIdle parks N waiters on N live processes and measures,
// over a window, this process's CPU time (utime+stime) and its OS threads:
// the pidfds on the netpoller (WaitExit) beside the same waiters each
// polling a blocking pidfd every 100 ms (waitPolling, the fallback for
// kernels without PIDFD_NONBLOCK). HERD_BENCH_WAITERS overrides N (200).
func BenchmarkWaitExitIdle(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("HERD_BENCH_WAITERS")); err == nil && v > 0 {
		n = v
	}
	boot, err := BootID()
	if err != nil {
		b.Skipf("no boot id: %v", err)
	}
	ids := sleepers(b, n, boot)
	modes := []struct {
		name string
		wait func(context.Context, FS, herd.Identity, string) error
	}{
		{"netpoll", WaitExit},
		{"poll-100ms", waitPolling},
	}
	for _, m := range modes {
		b.Run(fmt.Sprintf("%s/n=%d", m.name, n), func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var early sync.Once
				for _, id := range ids {
					wg.Go(func() {
						if err := m.wait(ctx, Real(), id, boot); err != context.Canceled {
							early.Do(func() { b.Errorf("expected the waiter to end by cancellation, got %v", err) })
						}
					})
				}
				time.Sleep(300 * time.Millisecond) // let every waiter park: this is the measured idle state
				window := 2 * time.Second
				cpu0 := cpuTime(b)
				time.Sleep(window)
				cpu := cpuTime(b) - cpu0
				threads := threadCount(b)
				cancel()
				wg.Wait()
				b.ReportMetric(float64(cpu.Milliseconds())/window.Seconds()*60/1000, "cpu-s/min")
				b.ReportMetric(float64(threads), "threads")
			}
		})
	}
}

// sleepers starts n sleeping processes (grandchildren, so that no wait4
// goroutine of ours holds a thread for them) and returns their identities.
func sleepers(b *testing.B, n int, boot string) []herd.Identity {
	b.Helper()
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt "$1" ]; do sleep 3600 & i=$((i+1)); done; echo up; wait`, "sh", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "HERD_INCARNATION=bench-wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		b.Fatalf("expected the sleepers up, got %q, %v", line, err)
	}
	kids, err := Real().Children(cmd.Process.Pid)
	if err != nil || len(kids) != n {
		b.Fatalf("expected %d sleepers, got %d (%v)", n, len(kids), err)
	}
	ids := make([]herd.Identity, 0, n)
	for _, pid := range kids {
		id, err := Real().Identify(pid, boot)
		if err != nil {
			b.Fatalf("identify %d: %v", pid, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCount is this process's number of OS threads.
func threadCount(b *testing.B) int {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range bytes.Lines(raw) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no Threads line in /proc/self/status")
	return 0
}
