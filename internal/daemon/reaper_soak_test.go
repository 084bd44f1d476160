package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/reaper"
)

// TestReapSoak runs one pass over 200 sessions of mixed kinds and checks
// that exactly the expected ones are reaped, per reason, and nothing else.
func TestReapSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: 200 real sessions")
	}
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.IdleAfter = 3 * time.Second })

	orphDir := filepath.Join(t.TempDir(), "orph")
	if err := os.Mkdir(orphDir, 0o755); err != nil {
		t.Fatal(err)
	}
	busy := []string{"sh", "-c", "while :; do echo tick; sleep 0.5; done"}
	roles := []herd.Role{
		sleeper("idle", 80), // idle
		{Name: "exidle", Replicas: 20, Runtime: herd.RuntimeExec, Command: []string{"sleep", "3600"}}, // idle
		sleeper("att", 3),   // attached: kept
		sleeper("arch", 30), // archived
		{Name: "orph", Replicas: 20, Command: []string{"sleep", "3600"}, Workdir: orphDir}, // orphan
		{Name: "busy", Replicas: 25, Command: busy},                                        // output: kept
		sleeper("garb", 12), // garbled rows: skipped
	}
	const ghosts = 10 // unmanaged herd-named tmux sessions: orphan
	for i := range roles {
		if roles[i].Workdir == "" {
			roles[i].Workdir = t.TempDir()
		}
	}
	setup := time.Now()
	if err := e.d.ApplyRoles(e.ctx(), roles); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, r := range roles {
		want += r.Replicas
	}
	e.poll(fmt.Sprintf("%d sessions running", want), func() bool {
		n := 0
		for _, s := range e.sessions() {
			if s.State == herd.StateRunning {
				n++
			}
		}
		return n == want
	})
	for i := range ghosts {
		if _, err := e.tm.NewSession(e.ctx(), fmt.Sprintf("ghost-%d", i), t.TempDir(), nil, []string{"sleep", "3600"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		e.attach(fmt.Sprintf("att-%d", i))
	}
	for i := range 30 {
		if err := e.api.Do(e.ctx(), http.MethodPost, fmt.Sprintf("/v1/sessions/arch-%d/archive", i), nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(orphDir); err != nil {
		t.Fatal(err)
	}
	e.garble("^garb-")
	t.Logf("set up %d sessions in %v", want+ghosts, time.Since(setup).Round(time.Millisecond))

	wantReaped := map[string]int{herd.ReasonIdle: 100, herd.ReasonArchived: 30, herd.ReasonOrphan: 30}
	matches := func(rep api.ReapReport) bool {
		return len(rep.Candidates) == 200 && rep.Kept == 28 && rep.Skipped == 12 &&
			rep.Reaped[herd.ReasonIdle] == 100 && rep.Reaped[herd.ReasonArchived] == 30 && rep.Reaped[herd.ReasonOrphan] == 30
	}
	// Dry runs until the idle ones have been idle long enough.
	var dry api.ReapReport
	e.poll("a dry run to find every expected candidate", func() bool {
		dry = e.pass(reaper.PassOptions{DryRun: true})
		return matches(dry)
	})
	t.Logf("dry run over %d candidates: %dms", len(dry.Candidates), dry.DurationMS)

	start := time.Now()
	rep := e.pass(reaper.PassOptions{})
	took := time.Since(start)
	t.Logf("reap pass over %d candidates: %v (reaped %v, kept %d, skipped %d)", len(rep.Candidates), took.Round(time.Millisecond), rep.Reaped, rep.Kept, rep.Skipped)
	if !matches(rep) {
		for _, c := range rep.Candidates {
			if c.Action == api.ReapActionSkipped && c.Error != "" {
				t.Logf("%s: %s", c.Session, c.Error)
			}
		}
		t.Fatalf("expected reaped %v, kept 28, skipped 12 … got reaped %v, kept %d, skipped %d", wantReaped, rep.Reaped, rep.Kept, rep.Skipped)
	}

	// Zero wrongful kills; every reap recorded once with its reason.
	events := e.reapedEvents()
	sessions := e.sessions()
	reasonOf := map[string]string{"idle": herd.ReasonIdle, "exidle": herd.ReasonIdle, "arch": herd.ReasonArchived, "orph": herd.ReasonOrphan}
	for name, s := range sessions {
		want, reaped := reasonOf[s.Role]
		evs := events[name]
		switch {
		case reaped && (s.State != herd.StateStopped || len(evs) != 1 || evs[0].Reason != want):
			t.Errorf("[%s] expected reaped (%s) once … got %s, %d event(s)", name, want, s.State, len(evs))
		case !reaped && (s.State == herd.StateStopped || len(evs) != 0):
			t.Errorf("[%s] wrongful kill: %s, %d reaped event(s)", name, s.State, len(evs))
		}
		if s.RuntimeKind == herd.RuntimeTmux && e.hasTmux(name) == reaped {
			t.Errorf("[%s] expected tmux session present=%v", name, !reaped)
		}
	}
	for i := range ghosts {
		name := fmt.Sprintf("ghost-%d", i)
		if evs := events[name]; len(evs) != 1 || evs[0].Reason != herd.ReasonOrphan || e.hasTmux(name) {
			t.Errorf("[%s] expected killed with one orphan event … got %d event(s)", name, len(evs))
		}
	}
	if n := len(events); n != 160 {
		t.Errorf("expected 160 sessions with a reaped event … got %d", n)
	}
}
