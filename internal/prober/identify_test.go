package prober

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/proc"
)

// fakeExits reports fixed exits by pid.
type fakeExits map[int]proc.Exit

func (f fakeExits) Lookup(_ context.Context, pid int, _ time.Time, _ time.Duration) (proc.Exit, bool) {
	x, ok := f[pid]
	return x, ok
}

// TestAgentExit: the exit accounted for an incarnation is its agent's own
// when the agent is not the launched root and its exit is known (the
// kernel's report, or the zombie its watcher read); else what the pane or
// the launcher said.
func TestAgentExit(t *testing.T) {
	one, eleven, nine, oneNineNine := 1, 11, 9, 199
	launcherSaid := herd.Exit{Code: &one, Reason: herd.ReasonExitCode}
	root := herd.Identity{PID: 100, StartTime: 5}
	child := herd.Identity{PID: 101, StartTime: 6}
	other := herd.Identity{PID: 102, StartTime: 7}
	zombied := herd.Identity{PID: 103, StartTime: 8}
	p := New(Options{Proc: proc.FS{Root: t.TempDir()}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Exits: fakeExits{101: {Signal: 11, Core: true}, 100: {Code: 1}, 102: {Code: 199}}})
	defer p.cancel()
	p.watched["inc"] = &watchSet{pids: map[int]bool{}, zombies: map[int]proc.Exit{103: {Signal: 9}}}
	tests := []struct {
		name     string
		identity herd.Identity
		want     herd.Exit
	}{
		{"the agent is the root: the pane's word", root, launcherSaid},
		{"not identified: the pane's word", herd.Identity{}, launcherSaid},
		{"the agent under a launcher, killed by SIGSEGV", child, herd.Exit{Signal: &eleven, Reason: herd.ReasonSignal}},
		{"the agent under a launcher, exit 199", other, herd.Exit{Code: &oneNineNine, Reason: herd.ReasonExitCode}},
		{"read from its zombie", zombied, herd.Exit{Signal: &nine, Reason: herd.ReasonSignal}},
		{"not reported: the pane's word", herd.Identity{PID: 104}, launcherSaid},
	}
	for _, tc := range tests {
		got, _ := p.agentExit(herd.Incarnation{ID: "inc", Root: root, Identity: tc.identity}, launcherSaid)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("[%s] expected %+v, got %+v (-want +got):\n%s", tc.name, tc.want, got, diff)
		}
	}
}
