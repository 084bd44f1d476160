package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// rolloutRole is a three-replica exec role printing its version.
func rolloutRole(version string, extra string) string {
	return fmt.Sprintf(`[[role]]
name = "w"
replicas = 3
runtime = "exec"
command = ["sh", "-c", "echo %s; exec sleep 300"]
%s
`, version, extra)
}

// TestRollout: a changed role marks its sessions OUTDATED (table and
// JSON); apply --dry-run says what would change and changes nothing;
// rollout restart replaces them one at a time, each new one running
// before the next old one stops, with rollout events; a rollout to a bad
// command stops after the first and leaves the others running.
func TestRollout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "other", "--runtime", "exec", "--", "sleep", "300")
	v1 := e.writeRoles("v1.toml", rolloutRole("v1", ""))
	out := e.must("apply", "-f", v1)
	if !strings.Contains(out, "role/w created") {
		t.Errorf("apply: expected the role created … got %q", out)
	}
	for i := range 3 {
		e.waitState(fmt.Sprintf("w-%d", i), herd.StateRunning, 10*time.Second)
	}
	if out := e.must("apply", "-f", v1); !strings.Contains(out, "role/w unchanged") {
		t.Errorf("apply of the same file: expected unchanged … got %q", out)
	}

	v2 := e.writeRoles("v2.toml", rolloutRole("v2", `env = { MODE = "fast" }`))
	out = e.must("apply", "-f", v2, "--dry-run")
	if want := "role/w configured: command, env; 3 session(s) OUTDATED (herd rollout restart w replaces them) (dry run)"; !strings.Contains(out, want) {
		t.Errorf("apply --dry-run: expected %q … got %q", want, out)
	}
	for _, v := range e.sessions() {
		if v.Outdated {
			t.Errorf("apply --dry-run: expected nothing changed … %s is outdated", v.Name)
		}
	}
	out = e.must("apply", "-f", v2)
	if !strings.Contains(out, "role/w configured: command, env; 3 session(s) OUTDATED") {
		t.Errorf("apply: expected it to say what changed … got %q", out)
	}
	old := map[string]api.SessionView{}
	for _, v := range e.sessions() {
		switch {
		case v.Role == "w" && (!v.Outdated || v.OutdatedReason != "role_changed: command, env"):
			t.Errorf("%s: expected outdated, role_changed: command, env … got %v %q", v.Name, v.Outdated, v.OutdatedReason)
		case v.Role == "other" && v.Outdated:
			t.Errorf("%s: expected an unchanged role's session not outdated", v.Name)
		}
		old[v.Name] = v
	}
	if table := e.must("get", "sessions", "w-0"); !strings.Contains(table, "running,OUTDATED") {
		t.Errorf("get sessions: expected the OUTDATED marker … got %q", table)
	}

	start := time.Now()
	out = e.must("rollout", "restart", "w", "--min-ready", "300ms")
	t.Logf("rollout of 3 sessions took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "role w: rolled out (3 session(s) replaced)") {
		t.Errorf("rollout: expected 3 replaced … got %q", out)
	}
	for _, v := range e.sessions() {
		if v.Role != "w" {
			continue
		}
		if v.Outdated || v.State != herd.StateRunning || v.Incarnation == old[v.Name].Incarnation {
			t.Errorf("%s after the rollout: expected a fresh, running, current incarnation … got %s outdated=%v inc=%s", v.Name, v.State, v.Outdated, v.Incarnation)
		}
		if logs := e.must("logs", v.Name); !strings.Contains(logs, "v2") {
			t.Errorf("%s after the rollout: expected v2 output … got %q", v.Name, logs)
		}
	}
	// One at a time: each session's replacement ran (its replaced event)
	// before the next session was stopped.
	var order []string
	for _, ev := range e.events() {
		switch {
		case ev.Kind == herd.EventRollout:
			order = append(order, ev.Session+":"+ev.Reason)
		case ev.Kind == herd.EventStopped && ev.Reason == herd.EventRollout:
			order = append(order, ev.Session+":stopped")
		}
	}
	want := "w-0:replacing w-0:stopped w-0:replaced w-1:replacing w-1:stopped w-1:replaced w-2:replacing w-2:stopped w-2:replaced"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("rollout order: expected %s … got %s", want, got)
	}
	if out := e.must("rollout", "restart", "w"); !strings.Contains(out, "nothing outdated") {
		t.Errorf("a second rollout: expected nothing to do … got %q", out)
	}

	// A bad template: the first replacement never runs; the rollout stops
	// and the other old sessions keep running.
	bad := e.writeRoles("bad.toml", `[[role]]
name = "w"
replicas = 3
runtime = "exec"
command = ["no-such-agent-binary"]
`)
	e.must("apply", "-f", bad)
	before := e.sessions()
	out, errs, code := e.herd("rollout", "restart", "w", "--min-ready", "300ms")
	if code == 0 || !strings.Contains(errs, "rollout w stopped") || !strings.Contains(out, "2 left outdated") {
		t.Errorf("rollout to a bad command: expected it stopped with 2 left … got %d %q %q", code, out, errs)
	}
	for _, v := range e.sessions() {
		if v.Name == "w-1" || v.Name == "w-2" {
			for _, b := range before {
				if b.Name == v.Name && (b.Incarnation != v.Incarnation || v.State != herd.StateRunning || !v.Outdated) {
					t.Errorf("%s: expected the old incarnation still running, outdated … got %s %s", v.Name, v.State, v.Incarnation)
				}
			}
		}
	}
	if _, errs, code := e.herd("rollout", "restart", "nosuch"); code == 0 || !strings.Contains(errs, "role nosuch not found") {
		t.Errorf("rollout of an unknown role: expected not found … got %d %q", code, errs)
	}
	if _, errs, code := e.herd("rollout", "restart", "w", "--max-unavailable", "0"); code == 0 || !strings.Contains(errs, "at least 1") {
		t.Errorf("rollout --max-unavailable 0: expected refused … got %d %q", code, errs)
	}
}

// TestRolloutMaxUnavailable: with --max-unavailable 2, two sessions are
// replaced side by side.
func TestRolloutMaxUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("apply", "-f", e.writeRoles("v1.toml", rolloutRole("v1", "")))
	for i := range 3 {
		e.waitState(fmt.Sprintf("w-%d", i), herd.StateRunning, 10*time.Second)
	}
	e.must("apply", "-f", e.writeRoles("v2.toml", rolloutRole("v2", "")))
	out := e.must("rollout", "restart", "w", "--max-unavailable", "2", "--min-ready", "500ms")
	if !strings.Contains(out, "3 session(s) replaced") {
		t.Fatalf("rollout: expected 3 replaced … got %q", out)
	}
	// w-0 and w-1 were both stopped before either was replaced.
	var order []string
	for _, ev := range e.events() {
		if ev.Kind == herd.EventStopped && ev.Reason == herd.EventRollout {
			order = append(order, ev.Session+":stopped")
		}
		if ev.Kind == herd.EventRollout && ev.Reason == "replaced" {
			order = append(order, ev.Session+":replaced")
		}
	}
	if len(order) != 6 || strings.Count(strings.Join(order[:2], " "), ":stopped") != 2 || order[5] != "w-2:replaced" {
		t.Errorf("--max-unavailable 2: expected w-0 and w-1 stopped together, then w-2 … got %v", order)
	}
}
