package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/testenv"
)

// outliveScript is an agent whose children outlive it: a sleep in its
// process group, and a shell that left the group (setsid) and ignores
// SIGTERM, each carrying the incarnation's marker.
const outliveScript = `sleep 301 &
setsid sh -c "trap '' TERM; exec sleep 302" &
echo started
while :; do sleep 1; done
`

// TestCrashCleanupEndsWhatOutlivedTheAgent: after the agent of an
// incarnation is killed, the children that outlived it are ended by the
// crash cleanup — in marker mode (found by their marker, the one that
// ignores SIGTERM killed after the grace period) and, where herd contains
// by cgroup, also a child that escaped the incarnation's cgroup before the
// death (the group's kill cannot reach it; its marker can). A process
// that is not herd's is never touched.
func TestCrashCleanupEndsWhatOutlivedTheAgent(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "marker"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, fastRestart)
			if mode == "marker" {
				e.extraEnv = append(e.extraEnv, "HERD_CONTAINMENT=marker")
			}
			e.start()
			got, line := e.containment()
			if mode == "cgroup" && got != "cgroup" {
				// Where herd can make cgroups it uses them; elsewhere this
				// subtest would only repeat the marker one.
				testenv.Require(t, "cgroup v2", "the daemon contains by marker here: "+line, testenv.InstallCgroup)
			}
			canary := exec.Command("sleep", "300")
			if err := canary.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { canary.Process.Kill(); canary.Wait() }()

			e.must("run", "out", "--runtime", "exec", "--restart", "never", "--", "sh", "-c", outliveScript)
			v := e.waitState("out-0", herd.StateRunning, 20*time.Second)
			t.Cleanup(func() {
				for _, pid := range marked(v.Incarnation) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			var sleeps map[string]int
			e.waitFor("the agent's two children", 20*time.Second, func() bool {
				// The loop's own `sleep 1` comes and goes beside them.
				sleeps = sleepsOf(marked(v.Incarnation))
				return sleeps["301"] > 0 && sleeps["302"] > 0
			})
			if got == "cgroup" {
				// The setsid'd child escapes: moved into the test's own
				// cgroup, where the incarnation's cgroup.kill cannot reach.
				escapeCgroup(t, e, sleeps["302"])
			}

			syscall.Kill(v.PID, syscall.SIGKILL)
			start := time.Now()
			e.waitFor("the death recorded", 20*time.Second, func() bool {
				return len(e.events("--session", "out-0", "--kind", herd.EventCrashed)) > 0
			})
			e.waitFor("the children that outlived the agent ended", 30*time.Second, func() bool {
				return len(marked(v.Incarnation)) == 0
			})
			t.Logf("containment %s: what outlived the agent ended %s after its death", got, time.Since(start).Round(time.Millisecond))
			if err := canary.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("expected the canary untouched … %v", err)
			}
		})
	}
}

// sleepsOf maps the argument of each `sleep N` among pids to its pid.
func sleepsOf(pids []int) map[string]int {
	out := map[string]int{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) == 2 && argv[0] == "sleep" {
			out[argv[1]] = pid
		}
	}
	return out
}

// escapeCgroup moves pid out of its incarnation's cgroup into this test's
// own (cgroup v2), and checks it left.
func escapeCgroup(t *testing.T, e *env, pid int) {
	t.Helper()
	spawned := e.events("--session", "out-0", "--kind", herd.EventSpawned)
	if len(spawned) == 0 {
		t.Fatal("expected a spawned event")
	}
	path, _ := spawned[len(spawned)-1].Data["cgroup"].(string)
	inGroup := cgroupOf(pid)
	if path == "" || !strings.HasSuffix(path, inGroup) {
		t.Fatalf("expected pid %d in the incarnation's cgroup %q … it is in %q", pid, path, inGroup)
	}
	mount := strings.TrimSuffix(path, inGroup)
	dest := filepath.Join(mount, cgroupOf(os.Getpid()), "cgroup.procs")
	if err := os.WriteFile(dest, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		testenv.Skip(t, "moving a process between cgroups", err.Error())
	}
	if now := cgroupOf(pid); now == inGroup {
		t.Fatalf("expected pid %d out of %s", pid, inGroup)
	}
}
