package status

import (
	"context"
	"testing"

	"herd"
)

// TestNeverStartedMeansNoProcess: a launch whose start was never recorded
// (the daemon gone between its write-ahead record and its process) ends
// as never_started only when its stop found no process of it; a process
// found (its marker, its cgroup) is adopted on the record, then stopped.
func TestNeverStartedMeansNoProcess(t *testing.T) {
	for _, c := range []struct {
		name        string
		ran         bool
		wantReason  string
		wantAdopted int
	}{
		{"nothing ran", false, herd.ReasonNeverStarted, 0},
		{"its process was found", true, herd.ReasonRoleDeleted, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t)
			unlock := m.Lock("w-0")
			err := m.Stopped(context.Background(), Stop{Name: "w-0", Incarnation: "inc-1", Reason: herd.ReasonRoleDeleted, Kind: herd.EventStopped, Ran: c.ran})
			unlock()
			if err != nil {
				t.Fatal(err)
			}
			sum := events(t, m, herd.EventSummary)
			if len(sum) != 1 || sum[0].Reason != c.wantReason {
				t.Errorf("expected one summary with reason %s … got %+v", c.wantReason, sum)
			}
			if n := len(events(t, m, herd.EventAdopted)); n != c.wantAdopted {
				t.Errorf("expected %d adopted event(s) … got %d", c.wantAdopted, n)
			}
		})
	}
}
