package hosts

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestFleetMask(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := NewFleet("a", 30*time.Second, now, []herd.Host{
		{Name: "a", HeartbeatAt: now.Add(-time.Hour)}, // ourselves: answering, whatever the row says
		{Name: "b", HeartbeatAt: now.Add(-10 * time.Second)},
		{Name: "c", HeartbeatAt: now.Add(-31 * time.Second)},
	})
	backoff := now.Add(time.Minute)
	cases := []struct {
		name       string
		host       string
		state      herd.State
		wantState  herd.State
		wantMasked bool
	}{
		{"own host running", "a", herd.StateRunning, herd.StateRunning, false},
		{"up host running", "b", herd.StateRunning, herd.StateRunning, false},
		{"stale host running", "c", herd.StateRunning, herd.StateUnknown, true},
		{"stale host stalled", "c", herd.StateStalled, herd.StateUnknown, true},
		{"stale host pending", "c", herd.StatePending, herd.StateUnknown, true},
		{"stale host backoff", "c", herd.StateBackoff, herd.StateUnknown, true},
		{"stale host stopped stays stopped", "c", herd.StateStopped, herd.StateStopped, false},
		{"stale host failed stays failed", "c", herd.StateFailed, herd.StateFailed, false},
		{"stale host succeeded", "c", herd.StateSucceeded, herd.StateSucceeded, false},
		{"unrecorded host running", "d", herd.StateRunning, herd.StateUnknown, true},
	}
	for _, c := range cases {
		s := herd.Session{Name: "w-0", Host: c.host, State: c.state, Runtime: herd.Alive, Process: herd.Alive,
			Activity: herd.ActivityWorking, BackoffUntil: &backoff}
		got, masked := f.Mask(s)
		if got.State != c.wantState || masked != c.wantMasked {
			t.Errorf("[%s] expected %s (masked %v), got %s (masked %v)", c.name, c.wantState, c.wantMasked, got.State, masked)
		}
		if masked && (got.Runtime != herd.Unknown || got.Process != herd.Unknown || got.Activity != herd.ActivityUnknown || got.BackoffUntil != nil) {
			t.Errorf("[%s] expected both axes and activity unknown and no backoff, got %+v", c.name, got)
		}
		if !masked && !cmp.Equal(got, s) {
			t.Errorf("[%s] expected the session unchanged, got %+v", c.name, got)
		}
	}
}

func TestFleetRows(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := herd.Host{Name: "a", BootID: "boot-a", HeartbeatAt: now}
	c := herd.Host{Name: "c", BootID: "boot-c", HeartbeatAt: now.Add(-time.Minute)}
	f := NewFleet("a", 30*time.Second, now, []herd.Host{c, a})
	got := f.Rows([]herd.Session{
		{Name: "w-0", Host: "a", State: herd.StateRunning},
		{Name: "w-1", Host: "a", State: herd.StateStopped},
		{Name: "w-2", Host: "c", State: herd.StateBackoff},
		{Name: "w-3", Host: "z", State: herd.StateRunning},
	})
	want := []Row{
		{Host: a, Daemon: Up, Sessions: 1, Recorded: true},
		{Host: c, Daemon: Stale, Sessions: 1, Recorded: true},
		{Host: herd.Host{Name: "z"}, Daemon: Stale, Sessions: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("[rows] expected (-want +got):\n%s", diff)
	}
}
