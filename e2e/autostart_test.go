package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestAutostart: in a fresh state dir, the first command that needs the
// daemon starts one, says so in one line, and goes on; twenty commands
// racing to be first start exactly one.
func TestAutostart(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.autostart = true
	out, errs, code := e.herd("run", "x", "--", "sleep", "100")
	if code != 0 || strings.Count(errs, "started one") != 1 || !strings.Contains(errs, "daemon.log") {
		t.Fatalf("[run] expected exit 0 and one line saying a daemon was started, got %d %q %q", code, out, errs)
	}
	e.waitState("x-0", herd.StateRunning, 10*time.Second)
	if _, errs, _ := e.herd("get", "sessions"); strings.Contains(errs, "started") {
		t.Errorf("[second command] expected the running daemon used, got %q", errs)
	}
	if n := daemons(e.dir); n != 1 {
		t.Errorf("[run] expected one daemon, found %d", n)
	}

	race := newEnv(t, fastRestart)
	race.autostart = true
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started, failed int
	for range 20 {
		wg.Go(func() {
			cmd := exec.Command(bin, "get", "sessions")
			cmd.Env = race.environ()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			err := cmd.Run()
			mu.Lock()
			defer mu.Unlock()
			started += strings.Count(errb.String(), "started one")
			if err != nil {
				failed++
				t.Logf("a racing command failed: %v %s", err, errb.String())
			}
		})
	}
	wg.Wait()
	if started != 1 || failed != 0 {
		t.Errorf("[race] expected one daemon started and no failure, got %d started, %d failed", started, failed)
	}
	if n := daemons(race.dir); n != 1 {
		t.Errorf("[race] expected one daemon running, found %d", n)
	}

	// The daemon gone, a command naming another config (a cron job's,
	// another shell's) does not start one with it: refused, and told how.
	for _, pid := range daemonPIDs(e.dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	e.waitFor("the autostarted daemon gone", 10*time.Second, func() bool { return daemons(e.dir) == 0 })
	other := filepath.Join(t.TempDir(), "other.toml")
	if err := os.WriteFile(other, []byte("[probe]\ninterval = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "get", "sessions", "--config", other)
	cmd.Env = e.environ()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not "+other) || daemons(e.dir) != 0 {
		t.Errorf("[another config] expected a refusal naming %s and no daemon, got %v %q", other, err, out)
	}
	// The command that names none starts it with the config it ran with.
	if _, errs, code := e.herd("get", "sessions"); code != 0 || !strings.Contains(errs, "started one") {
		t.Errorf("[the recorded config] expected a daemon started, got %d %q", code, errs)
	}

	off := newEnv(t, "")
	if _, errs, code := off.herd("get", "sessions"); code == 0 || !strings.Contains(errs, "no herd daemon") || daemons(off.dir) != 0 {
		t.Errorf("[HERD_NO_AUTOSTART] expected today's error and no daemon, got %d %q", code, errs)
	}
}

// daemons counts the `herd daemon` processes of a state dir.
func daemons(dir string) int { return len(daemonPIDs(dir)) }

// daemonPIDs lists the `herd daemon` processes of a state dir.
func daemonPIDs(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte("\x00daemon\x00--state-dir\x00"+dir+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
