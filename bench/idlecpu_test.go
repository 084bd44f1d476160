package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// buildRef builds the herd binary of git revision ref (from `git archive`,
// next to this tree's binary, removed with it) and returns its path.
func buildRef(ref string) (string, error) {
	dir, err := os.MkdirTemp(filepath.Dir(bin), "base-")
	if err != nil {
		return "", err
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse: %w", err)
	}
	if err := exec.Command("git", "-C", string(bytes.TrimSpace(top)), "rev-parse", "--verify", "--quiet", ref+"^{commit}").Run(); err != nil {
		return "", fmt.Errorf("git revision %q not found", ref)
	}
	archive := exec.Command("git", "archive", ref)
	archive.Dir = string(bytes.TrimSpace(top))
	tar := exec.Command("tar", "-x", "-C", dir)
	if tar.Stdin, err = archive.StdoutPipe(); err != nil {
		return "", err
	}
	if err := tar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", ref, err)
	}
	if err := tar.Wait(); err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "herd-base"), "./cmd/herd")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", ref, err, out)
	}
	return filepath.Join(dir, "herd-base"), nil
}

// idleWindows is how many windows BenchmarkIdleCPU measures; the ones
// in idleBusy run with two busy loops on the machine.
const idleWindows = 5

var idleBusy = map[int]bool{2: true, 3: true}

// BenchmarkIdleCPU runs the daemon with 100 idle tmux agents (see
// idleCommand; HERD_IDLE_AGENT=sleep for silent ones) and stall_after =
// "24h", beside HERD_IDLE_HISTORY stopped sessions (0), and prints the daemon's own CPU
// (utime+stime from /proc/PID/stat, in % of one core) over five windows
// of HERD_IDLE_WINDOW (60s), the third and fourth with two busy loops
// running on the machine. The same fleet runs at the same time under the
// binary of HERD_BASELINE_REF (main by default; "-" for none), so that
// each window compares both on the same machine load. It runs only with
// HERD_IDLE set (about 7 minutes; HERD_IDLE_WINDOW=10s for a quick look):
//
//	HERD_IDLE=1 go test -run '^$' -bench IdleCPU -benchtime 1x -timeout 30m ./bench/
//
// HERD_IDLE_PROFILE=DIR writes a 30s CPU profile of each daemon, taken
// during the first window, into DIR.
func BenchmarkIdleCPU(b *testing.B) {
	if os.Getenv("HERD_IDLE") == "" {
		b.Skip("set HERD_IDLE=1 to measure the idle daemon's CPU (minutes)")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("HERD_IDLE_WINDOW")); err == nil && d > 0 {
		window = d
	}
	n := 100
	// noWeb: a binary older than the console, which rejects the [web]
	// table the sandbox writes.
	type binary struct {
		name, path string
		noWeb      bool
	}
	bins := []binary{{"head", bin, false}}
	ref := os.Getenv("HERD_BASELINE_REF")
	if ref == "" {
		ref = "main"
	}
	if ref != "-" {
		path, err := buildRef(ref)
		if err != nil {
			b.Logf("baseline %s skipped: %v", ref, err)
		} else {
			noWeb := exec.Command("git", "cat-file", "-e", ref+":internal/web").Run() != nil
			bins = append(bins, binary{"base(" + ref + ")", path, noWeb})
		}
	}
	for b.Loop() {
		type run struct {
			name  string
			d     *daemon
			pprof string
		}
		var runs []run
		for _, x := range bins {
			pp := freeAddr(b)
			cfg := fmt.Sprintf("[watchdog]\nstall_after = \"24h\"\n[metrics]\nlisten = %q\n", pp)
			var d *daemon
			if x.noWeb {
				d = startDaemonEdited(b, history(b), x.path, cfg, withoutWeb)
			} else {
				d = startDaemonIn(b, history(b), x.path, cfg)
			}
			role := []herd.Role{{Name: "lat", Replicas: n, Command: idleCommand(x.path), Workdir: d.dir, Runtime: herd.RuntimeTmux}}
			if err := d.client.Do(context.Background(), "POST", "/v1/roles", nil, role, nil); err != nil {
				b.Fatal(err)
			}
			runs = append(runs, run{x.name, d, pp})
		}
		for _, r := range runs {
			waitRunning(b, r.d, n)
		}
		// Settle: adoption writes, the reaper's first pass (10s after
		// start), the first watchdog rounds.
		time.Sleep(15 * time.Second)
		if dir := os.Getenv("HERD_IDLE_PROFILE"); dir != "" {
			var wg sync.WaitGroup
			for _, r := range runs {
				wg.Go(func() {
					cpuProfile(b, r.pprof, filepath.Join(dir, strings.NewReplacer("(", "-", ")", "").Replace(r.name)+".pprof"))
				})
			}
			defer wg.Wait()
		}
		sums := make([]float64, len(runs))
		worst := make([]float64, len(runs))
		for w := range idleWindows {
			var stop func()
			if idleBusy[w] {
				stop = busyLoops(b, 2)
			}
			cpu0 := make([]time.Duration, len(runs))
			for i, r := range runs {
				cpu0[i] = cpuOf(b, r.d.cmd.Process.Pid)
			}
			t0 := time.Now()
			time.Sleep(window)
			took := time.Since(t0)
			line := fmt.Sprintf("window %d (%s%s):", w+1, window, map[bool]string{true: ", 2 busy loops"}[idleBusy[w]])
			var pct []float64
			for i, r := range runs {
				p := (cpuOf(b, r.d.cmd.Process.Pid) - cpu0[i]).Seconds() / took.Seconds() * 100
				pct = append(pct, p)
				sums[i] += p
				worst[i] = max(worst[i], p)
				line += fmt.Sprintf("  %s %.2f%%", r.name, p)
			}
			if len(pct) == 2 && pct[1] > 0 {
				line += fmt.Sprintf("  head/base %.2f", pct[0]/pct[1])
			}
			if stop != nil {
				stop()
			}
			b.Log(line)
			fmt.Println(line)
		}
		for i, r := range runs {
			b.ReportMetric(sums[i]/idleWindows, r.name+"-mean-%core")
			b.ReportMetric(worst[i], r.name+"-max-%core")
		}
	}
}

// withoutWeb drops the [web] table the sandbox adds to a herd.toml.
func withoutWeb(config []byte) []byte {
	return bytes.Replace(config, []byte("[web]\nlisten = \"\"\n"), nil, 1)
}

// history returns a state directory whose store holds HERD_IDLE_HISTORY
// (0 by default) stopped sessions of this host, of a role of no replicas:
// the record of a long-lived daemon, which its live set holds beside the
// live sessions.
func history(b *testing.B) string {
	dir := b.TempDir()
	n, _ := strconv.Atoi(os.Getenv("HERD_IDLE_HISTORY"))
	if n <= 0 {
		return dir
	}
	host, err := os.Hostname()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "old", Command: []string{"true"}, Workdir: dir, Runtime: herd.RuntimeTmux, Agent: herd.AgentGeneric}); err != nil {
			return err
		}
		for i := range n {
			name := herd.SessionName("old", i)
			inc := herd.Incarnation{ID: fmt.Sprintf("inc-old-%d", i), Session: name, Host: host, RuntimeKind: herd.RuntimeTmux, Argv: []string{"true"},
				Workdir: dir, StartedAt: now, EndedAt: &now, Root: herd.Identity{PID: 100000 + i, StartTime: 1, BootID: "before"}}
			if err := tx.PutIncarnation(inc); err != nil {
				return err
			}
			s := herd.Session{Name: name, Role: "old", Index: i, Host: host, State: herd.StateStopped, Incarnation: inc.ID, RuntimeKind: herd.RuntimeTmux,
				StartedAt: &now, StateSince: now, Exit: &herd.Exit{Reason: herd.ReasonUser, At: now},
				Snapshot: &herd.Snapshot{Argv: []string{"true"}, Workdir: dir, EnvNames: []string{"HOME", "PATH"}, Agent: herd.AgentGeneric, RuntimeKind: herd.RuntimeTmux}}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// idleCommand is the idle agent's command line under binary path:
// HERD_IDLE_AGENT=sleep (a process that prints nothing), or sim (the
// default: herd's simulated agent printing one stream-json line a second
// into its pane, as a busy fleet's panes move; stall_after = 24h keeps it
// from ever stalling, so the daemon has nothing to do but watch).
func idleCommand(path string) []string {
	if os.Getenv("HERD_IDLE_AGENT") == "sleep" {
		return []string{"sleep", "86400"}
	}
	return []string{path, "sim", "--interval", "1s"}
}

// waitRunning waits for n running sessions of d.
func waitRunning(b *testing.B, d *daemon, n int) {
	deadline := time.Now().Add(time.Duration(n)*500*time.Millisecond + 60*time.Second)
	for {
		var views []api.SessionView
		if err := d.client.Do(context.Background(), "GET", "/v1/sessions", nil, nil, &views); err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, v := range views {
			if v.State == herd.StateRunning {
				running++
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("expected %d running sessions, got %d", n, running)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyLoops starts k shell busy loops and returns their stop.
func busyLoops(b *testing.B, k int) func() {
	var cmds []*exec.Cmd
	for range k {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	stop := func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
		cmds = nil
	}
	b.Cleanup(stop)
	return stop
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// cpuProfile writes a 30s CPU profile of the daemon serving pprof at
// addr to path, and its allocations at the start and the end of those 30s
// beside it (PATH.allocs0, PATH.allocs1: go tool pprof -base).
func cpuProfile(b *testing.B, addr, path string) {
	fetch(b, "http://"+addr+"/debug/pprof/allocs", path+".allocs0")
	fetch(b, "http://"+addr+"/debug/pprof/profile?seconds=30", path)
	fetch(b, "http://"+addr+"/debug/pprof/allocs", path+".allocs1")
}

// fetch writes what url answers to path.
func fetch(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Logf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		b.Logf("profile: %v", err)
		return
	}
	defer f.Close()
	io.Copy(f, resp.Body)
}
