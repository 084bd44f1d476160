package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
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

	clientmodel "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// gitRepo makes a repository with one commit in a temp dir.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "first"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cwdOf is the working directory of pid.
func cwdOf(t *testing.T, pid int) string {
	t.Helper()
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		t.Fatalf("cwd of %d: %v", pid, err)
	}
	return p
}

// TestWorktreePerSession: three replicas of a worktree role run in three
// worktrees on three branches, with the untracked files asked for copied
// in; a crash relaunch keeps the cwd; deleting the role removes the clean
// worktrees and keeps a dirty one, saying why and where; a failing setup
// command fails the launch with its output and leaves nothing behind.
func TestWorktreePerSession(t *testing.T) {
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	roles := filepath.Join(e.dir, "roles.toml")
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "wt"
replicas = 3
command = ["sleep", "300"]
workdir = %q
runtime = "exec"
worktree = true
worktree_include = [".env"]
`, repo)), 0o600)
	e.must("apply", "-f", roles)
	cwds := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("wt-%d", i)
		v := e.waitState(name, herd.StateRunning, 20*time.Second)
		want := filepath.Join(repo, ".herd", "worktrees", name)
		if got := cwdOf(t, v.PID); got != want {
			t.Errorf("[%s] expected the agent's cwd %s … got %s", name, want, got)
		}
		if _, err := os.Stat(filepath.Join(want, ".env")); err != nil {
			t.Errorf("[%s] expected .env copied into the worktree: %v", name, err)
		}
		cwds[name] = want
	}
	branches, _ := exec.Command("git", "-C", repo, "branch", "--list", "herd/*").Output()
	for i := range 3 {
		if !strings.Contains(string(branches), fmt.Sprintf("herd/wt-%d", i)) {
			t.Errorf("expected branch herd/wt-%d … got %s", i, branches)
		}
	}

	// A crash: the relaunch runs in the same worktree.
	v, _ := e.session("wt-0")
	syscall.Kill(v.PID, syscall.SIGKILL)
	e.waitFor("wt-0 relaunched", 20*time.Second, func() bool {
		n, ok := e.session("wt-0")
		return ok && n.State == herd.StateRunning && n.PID != v.PID
	})
	n, _ := e.session("wt-0")
	if got := cwdOf(t, n.PID); got != cwds["wt-0"] {
		t.Errorf("[relaunch] expected cwd %s … got %s", cwds["wt-0"], got)
	}

	// wt-1 has work of its own: it is kept.
	os.WriteFile(filepath.Join(cwds["wt-1"], "notes.txt"), []byte("work\n"), 0o600)
	e.must("delete", "role", "wt")
	for _, name := range []string{"wt-0", "wt-2"} {
		if _, err := os.Stat(cwds[name]); !os.IsNotExist(err) {
			t.Errorf("[%s] expected the clean worktree removed … %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cwds["wt-1"], "notes.txt")); err != nil {
		t.Errorf("[wt-1] expected the dirty worktree kept: %v", err)
	}
	kept := e.events("--session", "wt-1", "--kind", herd.EventWorktree)
	if len(kept) != 1 || kept[0].Reason != "kept" || !strings.Contains(kept[0].Message, cwds["wt-1"]) {
		t.Errorf("[wt-1] expected one worktree event saying kept, and where … got %+v", kept)
	}

	// A setup command that fails fails the launch with its output.
	os.WriteFile(roles, []byte(fmt.Sprintf(`
[[role]]
name = "bad"
command = ["sleep", "300"]
workdir = %q
runtime = "exec"
worktree = true
worktree_setup = ["sh", "-c", "echo no such dependency >&2; exit 3"]
`, repo)), 0o600)
	e.must("apply", "-f", roles)
	// Until its restart budget is spent: a relaunch after the backoff
	// (100 ms) makes the worktree again while its setup runs.
	e.waitFor("bad-0 launch failed, no relaunch left", 20*time.Second, func() bool {
		v, ok := e.session("bad-0")
		return ok && v.State == herd.StateFailed && v.Exit != nil && v.Exit.Reason == herd.ReasonLaunchFailed
	})
	crashed := e.events("--session", "bad-0", "--kind", herd.EventCrashed)
	if len(crashed) == 0 || !strings.Contains(crashed[0].Message, "no such dependency") {
		t.Errorf("expected the setup's output in the crash … got %+v", crashed)
	}
	if _, err := os.Stat(filepath.Join(repo, ".herd", "worktrees", "bad-0")); !os.IsNotExist(err) {
		t.Errorf("expected nothing left of the failed worktree … %v", err)
	}
}

// treeScript starts 50 children that ignore SIGTERM, one of which leaves
// the process group (setsid) and double-forks a daemon, and ignores
// SIGTERM itself.
const treeScript = `trap '' TERM
i=0
while [ $i -lt 49 ]; do sh -c "trap '' TERM; exec sleep 300" & i=$((i+1)); done
setsid sh -c "trap '' TERM; (trap '' TERM; sleep 300 &) ; sleep 300" &
echo started
while :; do sleep 1; done
`

// marked lists the live processes whose environment carries marker.
func marked(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		if bytes.Contains(env, []byte(herd.EnvIncarnation+"="+marker+"\x00")) {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(st, []byte(") Z ")) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestStopEndsWholeTree: an agent with 50 children, one of which left its
// process group and double-forked, all ignoring SIGTERM: after `herd stop`
// and after a crash of the agent, no process of the tree is left, soon
// after the grace period; a process that is not herd's is never
// touched. It runs with the host's containment (a cgroup per incarnation
// where herd can make one) and with the marker forced.
func TestStopEndsWholeTree(t *testing.T) {
	for _, mode := range []string{"cgroup", "marker"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // each its own daemon and tree; the canary is each's own
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
			stopEndsWholeTree(t, e, got)
		})
	}
}

func stopEndsWholeTree(t *testing.T, e *env, mode string) {
	canary := exec.Command("sleep", "300")
	if err := canary.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { canary.Process.Kill(); canary.Wait() }()

	e.must("run", "tree", "--runtime", "exec", "--restart", "never", "--", "sh", "-c", treeScript)
	v := e.waitState("tree-0", herd.StateRunning, 20*time.Second)
	e.waitFor("52 processes in the tree", 20*time.Second, func() bool { return len(marked(v.Incarnation)) >= 52 })
	const grace = 2 * time.Second
	start := time.Now()
	e.must("stop", "tree-0", "--grace", grace.String())
	took := time.Since(start)
	if left := marked(v.Incarnation); len(left) > 0 {
		t.Errorf("[stop] expected no process of the tree left … %d left: %v", len(left), left)
	}
	// grace + 1s on an idle machine; the bound leaves room for a loaded
	// one (every /proc scan and signal is slower there).
	if took > grace+5*time.Second {
		t.Errorf("[stop] expected the tree gone within grace + 5s … took %s", took)
	}
	t.Logf("containment %s: stop of a %d-process tree (grace %s) took %s", mode, 52, grace, took.Round(time.Millisecond))

	// A crash: the agent dies, its children are ended by the crash cleanup.
	e.must("resume", "tree-0")
	e.waitFor("tree-0 resumed", 20*time.Second, func() bool {
		n, ok := e.session("tree-0")
		return ok && n.State == herd.StateRunning && n.Incarnation != v.Incarnation
	})
	n, _ := e.session("tree-0")
	e.waitFor("52 processes in the new tree", 20*time.Second, func() bool { return len(marked(n.Incarnation)) >= 52 })
	syscall.Kill(n.PID, syscall.SIGKILL)
	e.waitFor("the crashed agent's tree ended", 20*time.Second, func() bool { return len(marked(n.Incarnation)) == 0 })

	if err := canary.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("expected the canary untouched … %v", err)
	}
}

// TestMetricsServed: with [metrics] listen set, the daemon serves
// Prometheus text (parsed with the Prometheus text parser) with its
// sessions by state, the crashes and restarts it counted, its probe and
// tick durations as histograms, and /debug/pprof on the same listener.
func TestMetricsServed(t *testing.T) {
	hasTmux(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e := newEnv(t, fastRestart+fmt.Sprintf("[metrics]\nlisten = %q\n", addr))
	e.start()
	e.must("run", "m", "--runtime", "exec", "--", "sh", "-c", "sleep 0.3; exit 1")
	e.must("run", "t", "--", "sleep", "300") // a tmux session: probe rounds list tmux, and are timed
	e.waitFor("a crash and a restart counted, a probe timed", 20*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `herd_crashes_total{reason="exit_code"}`) && strings.Contains(string(b), "herd_sessions{") &&
			strings.Contains(string(b), `herd_restarts_total{role="m"}`) && strings.Contains(string(b), "herd_probe_duration_seconds_bucket")
	})
	fetch := func(path string) (string, int) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode
	}
	// The whole scrape parses with the Prometheus text parser and has each
	// family the daemon promises.
	body, _ := fetch("/metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus text parser rejected the daemon's scrape: %v\n%s", err, body)
	}
	for _, name := range []string{"herd_sessions", "herd_restarts_total", "herd_crashes_total", "herd_probe_duration_seconds", "herd_tick_duration_seconds"} {
		if _, ok := families[name]; !ok {
			t.Errorf("expected %s in the scrape", name)
		}
	}
	if f := families["herd_probe_duration_seconds"]; f != nil && f.GetType() != clientmodel.MetricType_HISTOGRAM {
		t.Errorf("expected herd_probe_duration_seconds a histogram, got %v", f.GetType())
	}
	if b, code := fetch("/debug/pprof/"); code != http.StatusOK || !strings.Contains(b, "goroutine") {
		t.Errorf("expected /debug/pprof behind the same listener, got %d", code)
	}
}

// TestCleanShutdownLogsNoError: regression — a daemon stopped with
// SIGTERM logged an ERROR ("read store ... context canceled") from a loop
// whose round the shutdown cut short.
func TestCleanShutdownLogsNoError(t *testing.T) {
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "calm", "--runtime", "exec", "--", "sleep", "300")
	e.waitState("calm-0", herd.StateRunning, 10*time.Second)
	for range 5 {
		time.Sleep(150 * time.Millisecond) // stop at different moments of the rounds
		e.kill(syscall.SIGTERM)
		e.start()
	}
	e.kill(syscall.SIGTERM)
	log, _ := os.ReadFile(e.logPath)
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("expected no error on a clean shutdown … got %s", line)
		}
	}
}
