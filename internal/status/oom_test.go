package status

import (
	"testing"

	"herd"
)

// TestOOMReason: a death the cgroup counted an OOM kill for is recorded
// with reason oom, whichever path saw it; a death herd caused on purpose
// keeps its reason, and without an OOM kill nothing changes.
func TestOOMReason(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		oom    bool
		want   string
	}{
		{"signal, oom counted", herd.ReasonSignal, true, herd.ReasonOOM},
		{"process gone, oom counted", herd.ReasonProcessGone, true, herd.ReasonOOM},
		{"pane gone, oom counted", herd.ReasonPaneGone, true, herd.ReasonOOM},
		{"exit code, oom counted", herd.ReasonExitCode, true, herd.ReasonOOM},
		{"signal, no oom", herd.ReasonSignal, false, herd.ReasonSignal},
		{"stall kill keeps its reason", herd.ReasonStallKilled, true, herd.ReasonStallKilled},
		{"memory_max keeps its reason", herd.ReasonMemoryMax, true, herd.ReasonMemoryMax},
		{"launch failure keeps its reason", herd.ReasonLaunchFailed, true, herd.ReasonLaunchFailed},
	}
	for _, tt := range tests {
		asked := ""
		m := &Manager{OOMKilled: func(inc string) bool { asked = inc; return tt.oom }}
		exit, msg := m.oom(Death{Incarnation: "inc-1", Exit: herd.Exit{Reason: tt.reason}, Message: "seen"})
		if exit.Reason != tt.want {
			t.Errorf("[%s] expected reason %s … got %s", tt.name, tt.want, exit.Reason)
		}
		if tt.want == herd.ReasonOOM && (msg == "seen" || asked != "inc-1") {
			t.Errorf("[%s] expected an oom message about inc-1 … got %q (asked %q)", tt.name, msg, asked)
		}
	}
	var m Manager // no cgroups: nothing is an OOM kill
	if exit, _ := m.oom(Death{Exit: herd.Exit{Reason: herd.ReasonSignal}}); exit.Reason != herd.ReasonSignal {
		t.Errorf("[no OOMKilled] expected signal … got %s", exit.Reason)
	}
}
