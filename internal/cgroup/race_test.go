package cgroup

import (
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestConcurrentStopsOfOneGroup is the regression test of the false
// leftover logged at every crash: the crash cleanup (StopGroup) and the
// takedown of what the death left (Stop) end the same incarnation's group
// at once; the one that removed the group made the other's read of its
// files fail with ENODEV ("cgroup.procs: no such device"), reported as
// left behind and "removed on retry 1" half a second later. Neither may
// fail: a group another stop removed is gone, which is what both want.
func TestConcurrentStopsOfOneGroup(t *testing.T) {
	c, ok := containments(t)[ModeCgroup]
	if !ok {
		t.Skip("no cgroup mode on this host")
	}
	for round := range 20 {
		inc := "inc-race-" + string(rune('a'+round))
		l, err := c.Prepare(inc, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		attr := &syscall.SysProcAttr{}
		l.Apply(attr)
		// A member that ends at its TERM, as most agents' leftovers do.
		start(t, inc, attr, "sleep", "1000")
		l.Close()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					_, errs[i] = c.StopGroup(t.Context(), inc, time.Second)
				} else {
					_, errs[i] = c.Stop(t.Context(), inc, time.Second)
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("[round %d, stop %d] expected the group gone without error, got %v", round, i, err)
			}
		}
		if _, err := c.cg.Open(inc); err == nil {
			t.Errorf("[round %d] the group is still there", round)
		}
	}
}
