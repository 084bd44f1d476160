package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/testenv"
)

// containment returns the mode the daemon logged at start, and its reason.
func (e *env) containment() (mode, line string) {
	e.t.Helper()
	var log []byte
	e.waitFor("the containment mode logged", 10*time.Second, func() bool {
		log, _ = os.ReadFile(e.logPath)
		return strings.Contains(string(log), "containment by ")
	})
	for _, l := range strings.Split(string(log), "\n") {
		switch {
		case strings.Contains(l, "containment by cgroup"):
			return "cgroup", l
		case strings.Contains(l, "containment by environment marker"):
			return "marker", l
		}
	}
	return "", ""
}

// cgroupOf is the cgroup v2 path of pid ("0::" line of /proc/PID/cgroup).
func cgroupOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}

// TestIncarnationStartsInItsCgroup: where herd can make cgroups, every
// process of an incarnation — exec child or tmux pane, a setsid
// grandchild included — is inside the incarnation's own cgroup from the
// start; the launch event names it; a stop ends the tree and removes the
// cgroup.
func TestIncarnationStartsInItsCgroup(t *testing.T) {
	for _, rt := range []string{herd.RuntimeExec, herd.RuntimeTmux} {
		t.Run(rt, func(t *testing.T) {
			if rt == herd.RuntimeTmux {
				hasTmux(t)
			}
			e := newEnv(t, fastRestart)
			e.start()
			if mode, line := e.containment(); mode != "cgroup" {
				testenv.Require(t, "cgroup v2", "the daemon contains by marker here: "+line, testenv.InstallCgroup)
			}
			e.must("run", "cg", "--runtime", rt, "--restart", "never", "--", "sh", "-c",
				"setsid sh -c 'sleep 300' & sleep 300 & echo started; wait")
			v := e.waitState("cg-0", herd.StateRunning, 20*time.Second)
			e.waitFor("4 processes in the tree", 20*time.Second, func() bool { return len(marked(v.Incarnation)) >= 4 })
			var dir string
			for _, pid := range marked(v.Incarnation) {
				cg := cgroupOf(pid)
				if filepath.Base(cg) != v.Incarnation {
					t.Errorf("expected pid %d in the cgroup of %s … got %q", pid, v.Incarnation, cg)
				}
				dir = cg
			}
			spawned := e.events("--session", "cg-0", "--kind", herd.EventSpawned)
			if len(spawned) != 1 || spawned[0].Data["cgroup"] == nil {
				t.Fatalf("expected the spawned event to name the cgroup … got %+v", spawned)
			}
			path, _ := spawned[0].Data["cgroup"].(string)
			if !strings.HasSuffix(path, dir) {
				t.Errorf("expected the event's cgroup %q to be the processes' %q", path, dir)
			}
			var det struct {
				Diagnostics struct {
					Cgroup *struct {
						CPUSeconds   float64 `json:"cpu_seconds"`
						MemoryBytes  int64   `json:"memory_bytes"`
						MemorySource string  `json:"memory_source"`
					} `json:"cgroup"`
				} `json:"diagnostics"`
			}
			if err := json.Unmarshal([]byte(e.must("describe", "session", "cg-0", "-o", "json")), &det); err != nil {
				t.Fatal(err)
			}
			if cg := det.Diagnostics.Cgroup; cg == nil || cg.MemoryBytes <= 0 || cg.MemorySource == "" {
				t.Errorf("expected the cgroup's figures in the diagnostics … got %+v", cg)
			}
			if out := e.must("describe", "session", "cg-0"); !strings.Contains(out, "Cgroup") {
				t.Errorf("expected a Cgroup line in describe … got\n%s", out)
			}
			start := time.Now()
			e.must("stop", "cg-0")
			t.Logf("stop took %s", time.Since(start).Round(time.Millisecond))
			if left := marked(v.Incarnation); len(left) > 0 {
				t.Errorf("expected no process left after stop … %v", left)
			}
			e.waitFor("the cgroup removed", 10*time.Second, func() bool {
				_, err := os.Stat(path)
				return os.IsNotExist(err)
			})
		})
	}
}
