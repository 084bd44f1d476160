package cgroup

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestContainmentMemory: Memory measures a hog's tree in each mode — by
// its cgroup's members when it started inside one, by one scan for its
// marker otherwise — and an incarnation with no process reads zero.
func TestContainmentMemory(t *testing.T) {
	boot := bootID(t)
	for mode, c := range containments(t) {
		t.Run(string(mode), func(t *testing.T) {
			marker := "inc-mem-" + string(mode)
			cleanupMarked(t, boot, marker)
			var attr *syscall.SysProcAttr
			if mode == ModeCgroup {
				l, err := c.Prepare(marker, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				attr = &syscall.SysProcAttr{}
				l.Apply(attr)
				defer l.Close()
				defer func() { _ = c.Release(t.Context(), marker) }()
			}
			const mb = 80
			h := startHog(t, marker, attr, mb)
			var mem TreeMemory
			waitFor(t, "the hog to reach its size", 30*time.Second, func() bool {
				got, err := c.Memory([]string{marker, "inc-mem-none"})
				if err != nil {
					t.Fatal(err)
				}
				if n := got["inc-mem-none"]; n.RSS != 0 || n.Procs != 0 {
					t.Fatalf("[no process] expected nothing measured … got %+v", n)
				}
				mem = got[marker]
				return mem.RSS >= mb<<20
			})
			if mem.Procs != 1 {
				t.Errorf("expected one process measured … got %d", mem.Procs)
			}
			h.cmd.Process.Signal(os.Kill)
			<-h.reaped
		})
	}
}
