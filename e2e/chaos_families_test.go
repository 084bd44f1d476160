package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/api"
	"herd/internal/runtime/tmux/tmuxfault"
)

// chaosConfig is every family's config: fast, unlimited restarts.
const chaosConfig = `
[restart]
initial_backoff = "100ms"
max_backoff = "1s"
max_restarts = 0
`

// run declares role name with replicas of `sleep 3600` in runtime rt.
func (c *chaos) run(name, rt string, replicas int) {
	args := []string{"run", name, "--runtime", rt, "--", "sleep", "3600"}
	if _, stderr, code := c.herd(args...); code != 0 {
		c.t.Fatalf("run %s: %s", name, stderr)
	}
	if replicas != 1 {
		c.herd("scale", name, "--replicas", strconv.Itoa(replicas))
	}
}

// views returns the sessions as the daemon sees them (nil when it does
// not answer).
func (c *chaos) views() []api.SessionView {
	var v []api.SessionView
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.client.Do(ctx, "GET", "/v1/sessions", nil, nil, &v) != nil {
		return nil
	}
	return v
}

// waitRunning waits up to d for n sessions running with a pid.
func (c *chaos) waitRunning(n int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		k := 0
		for _, v := range c.views() {
			if v.State == herd.StateRunning && v.PID > 0 {
				k++
			}
		}
		if k >= n {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// pick returns a random element of s.
func pick[T any](c *chaos, s []T) T { return s[c.rng.IntN(len(s))] }

// sessionVerb returns a random CLI call on the sessions of roles.
func (c *chaos) sessionVerb(roles map[string]int) []string {
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	role := pick(c, names)
	s := herd.SessionName(role, c.rng.IntN(roles[role]+1))
	switch c.rng.IntN(6) {
	case 0:
		return []string{"stop", s}
	case 1:
		return []string{"resume", s}
	case 2:
		return []string{"scale", role, "--replicas", strconv.Itoa(1 + c.rng.IntN(roles[role]))}
	case 3:
		return []string{"restart", s}
	case 4:
		return []string{"restart", "role/" + role}
	default:
		return []string{"reset", s}
	}
}

// chaosPIDReuse: an agent is SIGKILLed (with the daemon up, or down) and
// its pid handed at once to a canary (through ns_last_pid); herd must
// account the death and never signal the canary that now holds the pid.
func chaosPIDReuse(t *testing.T, r *tally, budget time.Duration) {
	if os.Geteuid() != 0 {
		r.skipped = "needs root (handing a pid on writes /proc/sys/kernel/ns_last_pid)"
		return
	}
	c := newChaos(t, r, budget, chaosConfig)
	c.run("pr-tmux", herd.RuntimeTmux, 2)
	c.run("pr-exec", herd.RuntimeExec, 2)
	if !c.waitRunning(4, 20*time.Second) {
		t.Fatal("the agents did not start")
	}
	for c.running() {
		// An agent is picked from /proc, never from the daemon's view: a
		// pid the view still names may be a canary's by now.
		var session string
		var pid int
		for s, incs := range c.agents() {
			for _, pids := range incs {
				session, pid = s, pids[0]
			}
			if c.rng.IntN(2) == 0 {
				break
			}
		}
		if pid == 0 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		down := c.rng.IntN(2) == 0
		if down {
			c.e.kill(syscall.SIGKILL)
		}
		syscall.Kill(pid, syscall.SIGKILL)
		gone := time.Now().Add(3 * time.Second)
		for time.Now().Before(gone) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if c.reusePID(pid) {
			r.faults++
		}
		if down {
			c.e.start()
		}
		if c.rng.IntN(3) == 0 {
			c.herd("stop", session)
			c.herd("resume", session)
		}
		c.waitRunning(4, 10*time.Second)
	}
	c.checkDuplicates()
	c.finish()
}

// reusePID starts canaries until one gets pid (the kernel hands out the
// pid after ns_last_pid, unless another process takes it first); it
// keeps that one and reports whether it got it.
func (c *chaos) reusePID(pid int) bool {
	for range 30 {
		if os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644) != nil {
			return false
		}
		k := c.startCanary()
		if k.cmd.Process.Pid == pid {
			return true
		}
		c.canaries = c.canaries[:len(c.canaries)-1]
		k.cmd.Process.Kill()
		<-k.done
	}
	return false
}

// chaosDaemonKill: the daemon is SIGKILLed at a random moment while a
// CLI call (launches among them) is under way, and started again.
func chaosDaemonKill(t *testing.T, r *tally, budget time.Duration) {
	c := newChaos(t, r, budget, chaosConfig)
	roles := map[string]int{"dk-tmux": 3, "dk-exec": 3}
	c.run("dk-tmux", herd.RuntimeTmux, 2)
	c.run("dk-exec", herd.RuntimeExec, 2)
	c.waitRunning(4, 20*time.Second)
	for i := 0; c.running(); i++ {
		var args []string
		switch c.rng.IntN(4) {
		case 0:
			args = []string{"run", "dk-new", "--", "sleep", "3600"}
		case 1:
			args = []string{"delete", "role", "dk-new"}
		default:
			args = c.sessionVerb(roles)
		}
		done := make(chan struct{})
		go func() { c.herd(args...); close(done) }()
		time.Sleep(time.Duration(c.rng.IntN(400)) * time.Millisecond)
		c.restartDaemon()
		r.faults++
		<-done
		if i%4 == 3 {
			time.Sleep(time.Second)
			c.checkDuplicates()
		}
	}
	// Unfinished launches are resolved 10s after they were written.
	time.Sleep(12 * time.Second)
	c.checkDuplicates()
	c.finish()
}

// chaosRacingCLIs: rounds of a hundred concurrent stop, resume, scale,
// restart and reset calls on the same sessions.
func chaosRacingCLIs(t *testing.T, r *tally, budget time.Duration) {
	c := newChaos(t, r, budget, chaosConfig)
	roles := map[string]int{"rc-tmux": 4, "rc-exec": 4}
	c.run("rc-tmux", herd.RuntimeTmux, 4)
	c.run("rc-exec", herd.RuntimeExec, 4)
	c.waitRunning(8, 20*time.Second)
	for c.running() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 24)
		for range 100 {
			args := c.sessionVerb(roles)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				c.herd(args...)
				<-sem
			}()
			r.faults++
		}
		wg.Wait()
		c.checkDuplicates()
	}
	c.finish()
}

// lyingTmux writes a tmux that runs the real one, except while the file
// mode exists: "hang" hangs every command but new-session, "garbage",
// "empty" and "trunc" garble the listings, "lie-new" makes new-session
// answer the pid in file pid, "lie-list" puts that pid in the listing's
// pane pid and server pid columns. Its control connection goes through
// the fault proxy (f.fault).
func lyingTmux(t *testing.T) (f faultyTmux, mode, pidFile string) {
	dir := t.TempDir()
	mode, pidFile = filepath.Join(dir, "mode"), filepath.Join(dir, "pid")
	f = newFaultyTmux(t, "control", func(real string) string {
		return fmt.Sprintf(`m="$(cat %[2]q 2>/dev/null)"
if [ "$m" = hang ]; then
  case " $* " in
    *" new-session "*) ;;
    *) while [ -f %[2]q ]; do sleep 0.05; done; m= ;;
  esac
fi
for a in "$@"; do
  case "$a" in
    new-session)
      if [ "$m" = lie-new ]; then
        %[1]q "$@" >/dev/null || exit $?
        cat %[3]q
        exit 0
      fi ;;
    list-panes|list-sessions)
      case "$m" in
        empty) exit 0 ;;
        garbage) head -c 200 /dev/urandom; exit 0 ;;
        trunc) %[1]q "$@" | cut -c1-11; exit 0 ;;
        lie-list) %[1]q "$@" | awk -F '\t' -v OFS='\t' -v p="$(cat %[3]q)" 'NF >= 10 { $3 = p; $10 = p } { print }'; exit 0 ;;
      esac ;;
  esac
done`, real, mode, pidFile)
	})
	return f, mode, pidFile
}

// chaosTmux: tmux hangs, lies about pane pids (at launch and in
// listings), truncates, answers nothing or garbage, in bursts, while
// agents are killed, stopped, resumed and scaled; on the control
// connection too, whose answers also cross, come late, go missing, or
// end with its client.
func chaosTmux(t *testing.T, r *tally, budget time.Duration) {
	f, mode, pidFile := lyingTmux(t)
	c := newChaos(t, r, budget, fmt.Sprintf("binary = %q\n", f.bin)+chaosConfig)
	canary := c.canaries[0].cmd.Process.Pid
	os.WriteFile(pidFile, []byte(strconv.Itoa(canary)+"\n"), 0o600)
	roles := map[string]int{"lt": 4}
	c.run("lt", herd.RuntimeTmux, 3)
	c.waitRunning(3, 20*time.Second)
	// Each burst: the per-call fault, and the control connection's.
	modes := [][2]string{
		{"hang", tmuxfault.Hang}, {"garbage", tmuxfault.Garble}, {"empty", tmuxfault.Empty}, {"trunc", tmuxfault.Truncate},
		{"lie-new", fmt.Sprintf("%s %d", tmuxfault.Lie, canary)}, {"lie-list", ""},
		{"", tmuxfault.Reorder}, {"", tmuxfault.Delay + " 3s"}, {"", tmuxfault.Drop}, {"", tmuxfault.Crash},
	}
	// In turn from a random one: a short run still meets several kinds.
	first := c.rng.IntN(len(modes))
	for i := 0; c.running(); i++ {
		m := modes[(first+i)%len(modes)]
		if m[0] != "" {
			os.WriteFile(mode, []byte(m[0]), 0o600)
		}
		f.fault(t, m[1])
		r.faults++
		end := time.Now().Add(time.Duration(200+c.rng.IntN(1500)) * time.Millisecond)
		for time.Now().Before(end) {
			if c.rng.IntN(3) == 0 {
				for _, incs := range c.agents() {
					for _, pids := range incs {
						syscall.Kill(pids[0], syscall.SIGKILL)
						break
					}
					break
				}
			} else {
				c.herd(c.sessionVerb(roles)...)
			}
			time.Sleep(time.Duration(c.rng.IntN(300)) * time.Millisecond)
		}
		os.Remove(mode)
		f.fault(t, "")
		time.Sleep(time.Second)
		if i%3 == 2 {
			c.checkDuplicates()
		}
	}
	injected := tmuxfault.Injected(f.ctlLog)
	r.note("faults injected on the control connection: %v", injected)
	if len(injected) == 0 {
		t.Errorf("lying tmux: no fault reached the control connection")
	}
	c.checkDuplicates()
	c.finish()
}

// chaosGarbled: garbage to every input: hook reports (stdin and event
// names), config files, CLI arguments, API request bodies, spool lines,
// and an exec agent printing random bytes on its stream-json stdout.
func chaosGarbled(t *testing.T, r *tally, budget time.Duration) {
	c := newChaos(t, r, budget, chaosConfig)
	c.run("gt", herd.RuntimeTmux, 1)
	if _, stderr, code := c.herd("run", "gs", "--runtime", "exec", "--agent", "claude", "--", "sh", "-c",
		`head -c 3000 /dev/urandom; printf '{"type":\n{{{\n{"type":"assistant","message":'; sleep 1; exit 1`); code != 0 {
		t.Fatalf("run gs: %s", stderr)
	}
	c.waitRunning(1, 20*time.Second)
	junk := func(n int) []byte {
		b := make([]byte, c.rng.IntN(n))
		for i := range b {
			b[i] = byte(c.rng.IntN(256))
		}
		if c.rng.IntN(2) == 0 { // printable noise with structure
			for i := range b {
				b[i] = `{}[]":,=\n\t #a1.-_tmux`[c.rng.IntN(22)]
			}
		}
		return b
	}
	// An argument cannot hold a NUL byte: exec refuses it before herd runs.
	junkArg := func(n int) string { return strings.ReplaceAll(string(junk(n)), "\x00", "") }
	tomlBits := []string{"[[role]]\n", "name = \"g\"\n", "replicas = 99999\n", "command = [", "\"sleep\"", "]\n", "[restart]\n",
		"initial_backoff = \"-1s\"\n", "runtime = \"podman\"\n", "x = [[[[[[[[", "name = \"ggg-x\"\nreplicas = 1\ncommand = [\"sleep\", \"9\"]\n", "\x00", "\"\"\"", "[store]\n"}
	cfg := filepath.Join(t.TempDir(), "junk.toml")
	httpc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.e.socket)
	}}, Timeout: 5 * time.Second}
	paths := []string{"/v1/roles", "/v1/sessions/gt-0/stop", "/v1/sessions/gt-0/inject", "/v1/activity", "/v1/events", "/v1/sessions/..%2f..%2fx/resume", "/v1/roles/gt/scale"}
	for c.running() {
		for range 20 {
			r.faults++
			switch c.rng.IntN(5) {
			case 0: // hook report
				inc := ""
				for _, v := range c.views() {
					if v.Name == "gt-0" {
						inc = v.Incarnation
					}
				}
				cmd := exec.Command(bin, "hook", pick(c, []string{"PreToolUse", "Stop", "Notification", "x\x01", junkArg(30)}))
				cmd.Env = append(c.e.environ(), herd.EnvSession+"=gt-0", herd.EnvIncarnation+"="+inc, herd.EnvSocket+"="+c.e.socket)
				cmd.Stdin = bytes.NewReader(junk(4000))
				start := time.Now()
				if err := cmd.Run(); err != nil || time.Since(start) > 5*time.Second {
					r.crash++
					r.note("herd hook: %v after %s", err, time.Since(start))
				}
			case 1: // config file
				var b strings.Builder
				for range 1 + c.rng.IntN(12) {
					b.WriteString(pick(c, tomlBits))
				}
				b.Write(junk(40))
				os.WriteFile(cfg, []byte(b.String()), 0o600)
				c.herd(pick(c, [][]string{{"apply", "-f", cfg}, {"apply", "-f", cfg, "--dry-run"}})...)
			case 2: // CLI arguments
				args := []string{pick(c, []string{"get", "stop", "scale", "logs", "inject", "events", "describe", "signal", "run", "restart"})}
				for range c.rng.IntN(5) {
					args = append(args, pick(c, []string{"gt-0", "--replicas", "-1", "--since", "-5h", "--tail", "999999999999", "role/", "--", "sessions", junkArg(12), "-o", "xml", "--grace", "1ns", "KILL"}))
				}
				c.herd(args...)
			case 3: // API bodies
				req, _ := http.NewRequest(pick(c, []string{"POST", "PUT", "GET", "DELETE"}), "http://herd"+pick(c, paths), bytes.NewReader(junk(2000)))
				if resp, err := httpc.Do(req); err == nil {
					if resp.StatusCode >= 500 {
						// Garbage in is the client's fault: a 4xx.
						r.notRecovered("API %s %s answered %d", req.Method, req.URL.Path, resp.StatusCode)
					}
					resp.Body.Close()
				}
			default: // spool lines, read by the daemon as it would after a restart
				dir := filepath.Join(c.e.dir, "activity")
				os.MkdirAll(dir, 0o700)
				f, err := os.OpenFile(filepath.Join(dir, "gt-0.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err == nil {
					f.Write(append(junk(3000), '\n'))
					f.Close()
				}
			}
		}
		c.daemonAlive()
	}
	c.restartDaemon() // reads the spool
	time.Sleep(2 * time.Second)
	c.checkDuplicates()
	c.finish()
}

// chaosResources: fd pressure on the daemon (RLIMIT_NOFILE lowered to
// 40 while agents launch and CLIs call), a spool path that is a file
// (hooks while the daemon is away), and an exec role whose log
// directory is a file (its launches cannot open their output).
func chaosResources(t *testing.T, r *tally, budget time.Duration) {
	c := newChaos(t, r, budget, chaosConfig)
	roles := map[string]int{"rs": 6}
	c.run("rs", herd.RuntimeTmux, 2)
	c.run("rs-exec", herd.RuntimeExec, 1)
	c.waitRunning(3, 20*time.Second)
	for i := 0; c.running(); i++ {
		switch i % 5 {
		case 0: // fd pressure
			pid := c.e.daemon.Process.Pid
			var old unix.Rlimit
			if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
				t.Fatal(err)
			}
			low := unix.Rlimit{Cur: 40, Max: old.Max}
			unix.Prlimit(pid, unix.RLIMIT_NOFILE, &low, nil)
			r.faults++
			var wg sync.WaitGroup
			for range 20 {
				args := c.sessionVerb(roles)
				wg.Add(1)
				go func() { defer wg.Done(); c.herd(args...) }()
			}
			wg.Wait()
			time.Sleep(2 * time.Second)
			unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil)
			c.herd("scale", "rs", "--replicas", "2")
			if !c.waitRunning(3, 20*time.Second) {
				r.notRecovered("not all running again 20s after the fd pressure ended")
			}
		case 1: // the spool path is a file, the daemon away
			dir := filepath.Join(c.e.dir, "activity")
			os.RemoveAll(dir)
			os.WriteFile(dir, []byte("not a directory"), 0o600)
			c.e.kill(syscall.SIGKILL)
			for range 10 {
				r.faults++
				cmd := exec.Command(bin, "hook", "PreToolUse")
				cmd.Env = append(c.e.environ(), herd.EnvSession+"=rs-0")
				cmd.Stdin = strings.NewReader(`{"hook_event_name":"PreToolUse","tool_name":"Bash"}`)
				start := time.Now()
				if err := cmd.Run(); err != nil || time.Since(start) > 5*time.Second {
					r.crash++
					r.note("herd hook with the spool a file: %v after %s", err, time.Since(start))
				}
			}
			c.e.start()
			time.Sleep(time.Second)
			os.Remove(dir)
		case 3: // the spool directory is full (a tmpfs), the daemon away
			dir := filepath.Join(c.e.dir, "activity")
			if !c.mountFull(dir) {
				continue
			}
			c.e.kill(syscall.SIGKILL)
			for range 10 {
				r.faults++
				cmd := exec.Command(bin, "hook", "PreToolUse")
				cmd.Env = append(c.e.environ(), herd.EnvSession+"=rs-0")
				cmd.Stdin = strings.NewReader(`{"hook_event_name":"PreToolUse","tool_name":"Bash"}`)
				start := time.Now()
				if err := cmd.Run(); err != nil || time.Since(start) > 5*time.Second {
					r.crash++
					r.note("herd hook with the spool full: %v after %s", err, time.Since(start))
				}
			}
			c.e.start()
			time.Sleep(time.Second)
			c.unmount(dir)
		case 4: // an exec role's log directory is full (a tmpfs)
			logs := filepath.Join(c.e.dir, "logs", "rs-exec-0")
			if !c.mountFull(logs) {
				continue
			}
			r.faults++
			for _, incs := range c.agents() {
				for _, pids := range incs {
					syscall.Kill(pids[0], syscall.SIGKILL) // relaunched into the full disk
				}
			}
			time.Sleep(3 * time.Second)
			c.unmount(logs)
			c.herd("restart", "rs-exec-0")
			if !c.waitRunning(3, 20*time.Second) {
				r.notRecovered("not all running again 20s after the disk had room again")
			}
		default: // an exec role's log directory is a file
			logs := filepath.Join(c.e.dir, "logs", "rs-exec-0")
			os.RemoveAll(logs)
			os.WriteFile(logs, []byte("not a directory"), 0o600)
			r.faults++
			for _, incs := range c.agents() {
				for _, pids := range incs {
					syscall.Kill(pids[0], syscall.SIGKILL) // relaunched into the fault
				}
			}
			time.Sleep(2 * time.Second)
			os.Remove(logs)
			c.herd("restart", "rs-exec-0")
			if !c.waitRunning(3, 20*time.Second) {
				r.notRecovered("not all running again 20s after the log directory came back")
			}
		}
		c.checkDuplicates()
	}
	c.finish()
}

// chaosReboots: a simulated power cut — the daemon, every agent and the
// tmux server SIGKILLed — and a new boot id; the daemon must stop the old
// incarnations without a signal and resume them, one agent per slot.
func chaosReboots(t *testing.T, r *tally, budget time.Duration) {
	c := newChaos(t, r, budget, chaosConfig)
	c.run("rb-tmux", herd.RuntimeTmux, 2)
	c.run("rb-exec", herd.RuntimeExec, 2)
	for i := 0; c.running(); i++ {
		if !c.waitRunning(4, 20*time.Second) {
			r.notRecovered("reboot %d: not all running within 20s", i)
		}
		c.e.kill(syscall.SIGKILL)
		for _, pid := range c.e.agentPIDs() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		exec.Command("tmux", "-L", c.e.tmuxSock, "kill-server").Run()
		c.e.setBootID(fmt.Sprintf("chaos-boot-%d-%d", i, time.Now().UnixNano()))
		c.e.start()
		r.faults++
		if i%2 == 1 {
			// A daemon killed during the resumes that follow a reboot.
			time.Sleep(time.Duration(c.rng.IntN(500)) * time.Millisecond)
			c.restartDaemon()
			r.faults++
		}
		time.Sleep(time.Second)
		c.checkDuplicates()
	}
	c.finish()
}

// mountFull mounts a full 8 KiB tmpfs on dir (made if missing); false,
// with a note, when mounting is not possible here (not root).
func (c *chaos) mountFull(dir string) bool {
	os.MkdirAll(dir, 0o700)
	if os.Geteuid() != 0 {
		c.r.cannot("full disk", "needs root to mount a tmpfs")
		return false
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", dir).CombinedOutput(); err != nil {
		c.r.cannot("full disk", fmt.Sprintf("mount: %v %s", err, bytes.TrimSpace(out)))
		return false
	}
	c.t.Cleanup(func() { c.unmount(dir) })
	os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 64<<10), 0o600) // stops at ENOSPC
	return true
}

// unmount detaches the tmpfs on dir, even with files open in it.
func (c *chaos) unmount(dir string) { exec.Command("umount", "-l", dir).Run() }
