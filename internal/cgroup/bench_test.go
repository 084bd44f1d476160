package cgroup

import (
	"syscall"
	"testing"
	"time"

	"herd/internal/proc"
)

// benchStop starts the 52-process tree and times stopping it with no
// grace period: the cost of finding and killing a detached tree.
func benchStop(b *testing.B, c *Containment) {
	boot, err := proc.BootID()
	if err != nil {
		b.Skip(err)
	}
	fsys := proc.Real()
	b.Cleanup(func() {
		// A failed run must not leave the tree behind.
		_, _ = StopMarked(b.Context(), fsys, boot, "inc-bench-"+string(c.Mode()), 0)
	})
	for b.Loop() {
		b.StopTimer()
		inc := "inc-bench-" + string(c.Mode())
		l, err := c.Prepare(inc, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		attr := &syscall.SysProcAttr{}
		l.Apply(attr)
		s := startB(b, inc, attr)
		l.Close()
		deadline := time.Now().Add(15 * time.Second)
		for {
			ids, _ := Marked(fsys, boot, inc)
			if len(ids) == treeSize {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("tree not up: %d", len(ids))
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
		if _, err := c.Stop(b.Context(), inc, 0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		<-s
		b.StartTimer()
	}
}

// startB starts the tree for a benchmark and returns a channel closed once
// the agent is reaped.
func startB(b *testing.B, inc string, attr *syscall.SysProcAttr) <-chan struct{} {
	cmd := newTreeCmd(inc, attr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return done
}

func BenchmarkStopTreeMarker(b *testing.B) {
	boot, _ := proc.BootID()
	benchStop(b, &Containment{fs: proc.Real(), bootID: boot})
}

func BenchmarkStopTreeCgroup(b *testing.B) {
	m, err := Detect(Options{Name: "herd-bench"})
	if err != nil {
		b.Skipf("no writable cgroup: %v", err)
	}
	b.Cleanup(func() { _ = syscall.Rmdir(m.Root()) })
	boot, _ := proc.BootID()
	benchStop(b, &Containment{cg: m, fs: proc.Real(), bootID: boot})
}
