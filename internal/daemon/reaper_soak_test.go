package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/reaper"
)

// TestReapSoak runs one pass over sessions of mixed kinds and checks that
// exactly the expected ones are reaped, per reason, and nothing else. The
// test command runs it at a fifth of its size (44 sessions, about 15 s on
// a 2-core machine); HERD_REAP_SOAK=5 runs the 200 sessions of the full
// soak.
func TestReapSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: real sessions")
	}
	k := 1
	if v := os.Getenv("HERD_REAP_SOAK"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HERD_REAP_SOAK=%q: want a positive scale (5: 200 sessions)", v)
		}
		k = n
	}
	e := newReapEnv(t, func(c *config.Config) { c.Reaper.IdleAfter = 3 * time.Second })

	orphDir := filepath.Join(t.TempDir(), "orph")
	if err := os.Mkdir(orphDir, 0o755); err != nil {
		t.Fatal(err)
	}
	busy := []string{"sh", "-c", "while :; do echo tick; sleep 0.5; done"}
	n := map[string]int{"idle": 16 * k, "exidle": 4 * k, "att": 3, "arch": 6 * k, "orph": 4 * k, "busy": 5 * k, "garb": 2*k + 2}
	roles := []herd.Role{
		sleeper("idle", n["idle"]), // idle
		{Name: "exidle", Replicas: n["exidle"], Runtime: herd.RuntimeExec, Command: []string{"sleep", "3600"}}, // idle
		sleeper("att", n["att"]),   // attached: kept
		sleeper("arch", n["arch"]), // archived
		{Name: "orph", Replicas: n["orph"], Command: []string{"sleep", "3600"}, Workdir: orphDir}, // orphan
		{Name: "busy", Replicas: n["busy"], Command: busy},                                        // output: kept
		sleeper("garb", n["garb"]), // garbled rows: skipped
	}
	ghosts := 2 * k // unmanaged herd-named tmux sessions: orphan
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
	for i := range n["att"] {
		e.attach(fmt.Sprintf("att-%d", i))
	}
	for i := range n["arch"] {
		if err := e.api.Do(e.ctx(), http.MethodPost, fmt.Sprintf("/v1/sessions/arch-%d/archive", i), nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(orphDir); err != nil {
		t.Fatal(err)
	}
	e.garble("^garb-")
	t.Logf("set up %d sessions in %v", want+ghosts, time.Since(setup).Round(time.Millisecond))

	wantIdle, wantOrphan := n["idle"]+n["exidle"], n["orph"]+ghosts
	wantKept, wantSkipped := n["att"]+n["busy"], n["garb"]
	wantReaped := map[string]int{herd.ReasonIdle: wantIdle, herd.ReasonArchived: n["arch"], herd.ReasonOrphan: wantOrphan}
	candidates := want + ghosts
	matches := func(rep api.ReapReport) bool {
		return len(rep.Candidates) == candidates && rep.Kept == wantKept && rep.Skipped == wantSkipped &&
			rep.Reaped[herd.ReasonIdle] == wantIdle && rep.Reaped[herd.ReasonArchived] == n["arch"] && rep.Reaped[herd.ReasonOrphan] == wantOrphan
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
		t.Fatalf("expected reaped %v, kept %d, skipped %d … got reaped %v, kept %d, skipped %d", wantReaped, wantKept, wantSkipped, rep.Reaped, rep.Kept, rep.Skipped)
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
	if got, want := len(events), wantIdle+n["arch"]+wantOrphan; got != want {
		t.Errorf("expected %d sessions with a reaped event … got %d", want, got)
	}
}
