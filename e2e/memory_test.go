package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/testenv"
)

// TestMemoryMax: an agent that grows past its role's memory_max = "64M"
// is ended and accounted as a crash — reason oom where the kernel
// enforces the limit (a cgroup with the memory controller), memory_max
// where the watchdog does (no memory controller, or containment by
// marker) — then backs off and is relaunched as for any crash.
func TestMemoryMax(t *testing.T) {
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
			if mode == "marker" && got != "marker" {
				t.Fatalf("expected containment by marker with HERD_CONTAINMENT=marker … got %q", line)
			}
			want := herd.ReasonMemoryMax
			if got == "cgroup" && !strings.Contains(line, "memory_max enforced by the watchdog") {
				want = herd.ReasonOOM
			}
			t.Logf("containment %s: expecting reason %s (%s)", got, want, line)
			roles := filepath.Join(e.dir, "roles.toml")
			os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "hog"
command = [%q, "sim", "--interval", "50ms", "--alloc-mb", "256"]
runtime = "exec"
memory_max = "64M"
`, bin)), 0o600)
			e.must("apply", "-f", roles)
			e.waitFor("a crash over memory_max", 30*time.Second, func() bool {
				return len(e.events("--session", "hog-0", "--kind", herd.EventCrashed)) > 0
			})
			crashed := e.events("--session", "hog-0", "--kind", herd.EventCrashed)
			if crashed[0].Reason != want {
				t.Fatalf("expected the crash's reason %s … got %+v", want, crashed[0])
			}
			if want == herd.ReasonMemoryMax {
				killed := e.events("--session", "hog-0", "--kind", herd.EventKilled)
				if len(killed) == 0 || killed[0].Reason != herd.ReasonMemoryMax || killed[0].Data["rss_bytes"] == nil {
					t.Errorf("expected a killed event with the tree's memory … got %+v", killed)
				} else if rss, _ := killed[0].Data["rss_bytes"].(float64); rss <= 64<<20 {
					t.Errorf("expected the measured rss over 64 MiB … got %v", rss)
				}
			}
			backoff := e.events("--session", "hog-0", "--kind", herd.EventBackoff)
			if len(backoff) == 0 || backoff[0].Reason != want {
				t.Errorf("expected a backoff after the crash … got %+v", backoff)
			}
			e.waitFor("relaunched after the backoff", 20*time.Second, func() bool {
				return len(e.events("--session", "hog-0", "--kind", herd.EventRestarted)) > 0
			})
		})
	}
}
