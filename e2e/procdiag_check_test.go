package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
)

// TestProcDiag: the diagnostics of a stuck agent name its processes,
// their threads' waits, the files they hold under the directory and the
// locks on them (a real process holding a real flock).
func TestProcDiag(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "state.lock")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	session := "diag-" + strings.ReplaceAll(t.Name(), "/", "-")
	cmd := exec.Command("flock", file, "sleep", "30")
	cmd.Env = append(os.Environ(), herd.EnvSession+"="+session)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var out string
	herdtest.WaitFor(t, "the lock held and seen", 10*time.Second, func() bool {
		out = procDiag(session, dir)
		return strings.Contains(out, "FLOCK") && strings.Contains(out, "sleep")
	})
	for _, want := range []string{"pid ", "task ", "wchan=", "-> " + file, "(" + file + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if other := procDiag(session+"-none", dir); other != "" {
		t.Errorf("a session with no process has diagnostics:\n%s", other)
	}
	if got := codexLogTail(filepath.Join(dir, "nowhere"), 5); got == "" {
		t.Errorf("a missing log database reads as no rows, not as an error")
	}
}
