package e2e

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
)

// copyExe copies the executable src to dst (mode 0755).
func copyExe(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAgentBinaryReplaced: an agent binary replaced on disk while its
// agents run (an update: a new file renamed over the old one) makes their
// sessions OUTDATED with reason binary_updated, said once in an outdated
// event; a role with restart_on_update is restarted at its idle moment,
// through the stop path, onto the new binary, and is no longer outdated.
func TestAgentBinaryReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	copyExe(t, bin, agent)
	roles := filepath.Join(e.dir, "roles.toml")
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "keep"
command = [%[1]q, "sim", "--interval", "200ms", "--quiet", "--hooks", "SessionStart,Stop"]
runtime = "exec"

[[role]]
name = "upd"
command = [%[1]q, "sim", "--interval", "200ms", "--quiet", "--hooks", "SessionStart,Stop"]
runtime = "exec"
restart_on_update = true
`, agent)), 0o600)
	e.must("apply", "-f", roles)
	before := map[string]string{}
	for _, name := range []string{"keep-0", "upd-0"} {
		e.waitFor(name+" idle", 20*time.Second, func() bool {
			v, ok := e.session(name)
			return ok && v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
		})
		v, _ := e.session(name)
		if v.Outdated {
			t.Fatalf("[%s] expected current before the update … got %q", name, v.OutdatedReason)
		}
		before[name] = v.Incarnation
	}

	// The update: a new binary renamed over the old path.
	copyExe(t, bin, agent+".new")
	if err := os.Rename(agent+".new", agent); err != nil {
		t.Fatal(err)
	}

	e.waitFor("keep-0 OUTDATED", 20*time.Second, func() bool {
		v, _ := e.session("keep-0")
		return v.Outdated && strings.Contains(v.OutdatedReason, herd.ReasonBinaryUpdated)
	})
	if v, _ := e.session("keep-0"); v.Incarnation != before["keep-0"] {
		t.Errorf("[keep-0] expected no restart without restart_on_update … got incarnation %s", v.Incarnation)
	}
	if out := e.must("get", "sessions", "keep-0"); !strings.Contains(out, "OUTDATED") {
		t.Errorf("[keep-0] expected OUTDATED in the table … got\n%s", out)
	}
	ev := e.events("--session", "keep-0", "--kind", herd.EventOutdated)
	if len(ev) != 1 || ev[0].Reason != herd.ReasonBinaryUpdated || !strings.Contains(ev[0].Message, agent) {
		t.Errorf("[keep-0] expected one outdated event naming the binary … got %+v", ev)
	}

	e.waitFor("upd-0 restarted on the new binary", 30*time.Second, func() bool {
		v, _ := e.session("upd-0")
		return v.Incarnation != before["upd-0"] && v.State == herd.StateRunning
	})
	restarted := e.events("--session", "upd-0", "--kind", herd.EventRestarted)
	if len(restarted) != 1 || restarted[0].Reason != herd.ReasonBinaryUpdated {
		t.Errorf("[upd-0] expected one restarted event with reason binary_updated … got %+v", restarted)
	}
	stopped := e.events("--session", "upd-0", "--kind", herd.EventStopped)
	if len(stopped) != 1 || stopped[0].Reason != herd.ReasonBinaryUpdated {
		t.Errorf("[upd-0] expected the stop path's stopped event … got %+v", stopped)
	}
	v, _ := e.session("upd-0")
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", v.PID))
	if err != nil || exe != agent {
		t.Errorf("[upd-0] expected the new agent to run the current %s … got %q (%v)", agent, exe, err)
	}
	time.Sleep(time.Second) // a few watchdog ticks: nothing new to see
	if v, _ := e.session("upd-0"); v.Outdated {
		t.Errorf("[upd-0] expected current after the restart … got %q", v.OutdatedReason)
	}

	// A rollout replaces the session left on the old binary.
	e.must("rollout", "restart", "keep")
	if v, _ := e.session("keep-0"); v.Incarnation == before["keep-0"] || v.Outdated {
		t.Errorf("[rollout] expected keep-0 replaced and current … got %s outdated=%v %q", v.Incarnation, v.Outdated, v.OutdatedReason)
	}
}
