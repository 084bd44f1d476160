package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"herd"
	"herd/internal/api"
)

// The fault campaign (scripts/chaos.sh): each family of faults is played
// against a daemon of its own for its share of CHAOS_MINUTES, with canary
// processes that are not herd's recording every signal they get, and a
// table at the end: faults injected, wrongful kills, duplicates, leaks,
// lost events, daemon crashes. Skipped unless HERD_CHAOS is set.

// envCanary makes the test binary a canary: it records every signal it
// gets in the file named, and lives until SIGKILL (or 10 minutes).
const envCanary = "HERD_CHAOS_CANARY"

// runCanary is the canary's main; it never returns.
func runCanary(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(2)
	}
	c := make(chan os.Signal, 64)
	signal.Notify(c)
	end := time.After(10 * time.Minute)
	for {
		select {
		case sig := <-c:
			if sig == syscall.SIGURG {
				continue // Go's own goroutine preemption
			}
			fmt.Fprintf(f, "%d %s\n", time.Now().UnixMilli(), sig)
		case <-end:
			os.Exit(0)
		}
	}
}

// tally is one family's row of the table.
type tally struct {
	name                                             string
	faults, wrongful, duplicates, leaks, lost, crash int
	// unrecovered counts times herd did not get every agent running
	// again after a fault ended, and API answers of 5xx.
	unrecovered int
	// skipped, when set, is why the family injected nothing here (it
	// needs root): the family is reported skipped, never passed.
	skipped string
	// missing are fault kinds of the family that this machine cannot
	// inject (they need root), each with why.
	missing map[string]string
	notes   []string
}

func (r *tally) note(format string, a ...any) { r.notes = append(r.notes, fmt.Sprintf(format, a...)) }

// cannot records that fault kind could not be injected here, and why.
func (r *tally) cannot(kind, why string) {
	if r.missing == nil {
		r.missing = map[string]string{}
	}
	r.missing[kind] = why
}

// notRecovered counts a failure to recover from a fault.
func (r *tally) notRecovered(format string, a ...any) {
	r.unrecovered++
	r.note(format, a...)
}

// failures is the sum of what must be zero for the family to pass.
func (r *tally) failures() int {
	return r.wrongful + r.duplicates + r.leaks + r.lost + r.crash + r.unrecovered
}

// canary is a process that is not herd's and must never be signalled.
type canary struct {
	cmd  *exec.Cmd
	file string
	done chan struct{}
}

// chaos is one family's run: its daemon, canaries, tally and clock.
type chaos struct {
	t        *testing.T
	e        *env
	r        *tally
	rng      *rand.Rand
	until    time.Time
	canaries []*canary
	client   *api.Client
}

// startCanary starts a canary; its pid is the kernel's next unless
// another process takes it first.
func (c *chaos) startCanary() *canary {
	self, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	file := filepath.Join(c.t.TempDir(), "canary")
	cmd := exec.Command(self)
	var envs []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERD_") {
			envs = append(envs, kv)
		}
	}
	cmd.Env = append(envs, envCanary+"="+file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	k := &canary{cmd: cmd, file: file, done: make(chan struct{})}
	go func() { cmd.Wait(); close(k.done) }()
	c.canaries = append(c.canaries, k)
	c.t.Cleanup(func() { cmd.Process.Kill(); <-k.done })
	return k
}

// checkCanaries counts every canary that got a signal or died.
func (c *chaos) checkCanaries() {
	for _, k := range c.canaries {
		b, _ := os.ReadFile(k.file)
		select {
		case <-k.done:
			c.r.wrongful++
			c.r.note("canary %d died: %v %s", k.cmd.Process.Pid, k.cmd.ProcessState, b)
			continue
		default:
		}
		if len(b) > 0 {
			c.r.wrongful++
			c.r.note("canary %d signalled: %s", k.cmd.Process.Pid, strings.TrimSpace(string(b)))
		}
	}
}

// newChaos starts a family's daemon with config and a few canaries.
func newChaos(t *testing.T, r *tally, budget time.Duration, config string) *chaos {
	e := newEnv(t, config)
	e.start()
	c := &chaos{t: t, e: e, r: r, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 15)),
		until: time.Now().Add(budget), client: api.NewClient(e.socket)}
	for range 3 {
		c.startCanary()
	}
	return c
}

func (c *chaos) running() bool { return time.Now().Before(c.until) }

// herd runs the CLI and ignores its exit: a fault may refuse it.
func (c *chaos) herd(args ...string) (string, string, int) {
	cmd := exec.Command(bin, args...)
	cmd.Env = c.e.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	if strings.Contains(errb.String(), "panic") {
		c.r.crash++
		c.r.note("CLI %v panicked: %s", args, errb.String())
	}
	return out.String(), errb.String(), code
}

// restartDaemon starts the daemon again after a kill, counting a crash
// when the old one had died on its own.
func (c *chaos) restartDaemon() {
	c.daemonAlive()
	c.e.kill(syscall.SIGKILL)
	c.e.start()
}

// daemonAlive counts a crash when the daemon exited without being told.
func (c *chaos) daemonAlive() bool {
	if c.e.daemon == nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.e.daemon.Process.Pid))
	if err == nil && !strings.Contains(string(st), ") Z ") {
		return true
	}
	c.r.crash++
	c.r.note("the daemon died on its own")
	c.e.daemon.Wait()
	c.e.daemon = nil
	c.e.start()
	return false
}

// agents returns, by session, the incarnations of the live processes
// started for this daemon (zombies excluded).
func (c *chaos) agents() map[string]map[string][]int {
	out := map[string]map[string][]int{}
	want := []byte(herd.EnvSocket + "=" + c.e.socket + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || bytes.Contains(st, []byte(") Z ")) {
			continue
		}
		var sess, inc string
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(herd.EnvSession+"=")); ok {
				sess = string(v)
			}
			if v, ok := bytes.CutPrefix(kv, []byte(herd.EnvIncarnation+"=")); ok {
				inc = string(v)
			}
		}
		if out[sess] == nil {
			out[sess] = map[string][]int{}
		}
		out[sess][inc] = append(out[sess][inc], pid)
	}
	return out
}

// checkDuplicates counts the slots that hold live processes of two
// incarnations for 5 seconds on end (a stop or crash cleanup under way
// ends within that).
func (c *chaos) checkDuplicates() {
	dup := func() map[string]string {
		out := map[string]string{}
		for s, incs := range c.agents() {
			if len(incs) > 1 {
				out[s] = fmt.Sprint(incs)
			}
		}
		return out
	}
	seen := dup()
	deadline := time.Now().Add(5 * time.Second)
	for len(seen) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		now := dup()
		for s := range seen {
			if _, ok := now[s]; !ok {
				delete(seen, s)
			}
		}
	}
	for s, v := range seen {
		c.r.duplicates++
		c.r.note("slot %s holds live agents of several incarnations: %s", s, v)
	}
}

// events returns the whole event log.
func (c *chaos) events() []herd.Event {
	var evs []herd.Event
	for range 3 {
		err := c.client.Do(context.Background(), "GET", "/v1/events", url.Values{"limit": {"0"}}, nil, &evs)
		if err == nil {
			return evs
		}
		time.Sleep(time.Second)
	}
	c.t.Errorf("events: cannot read the event log")
	return nil
}

// finish deletes every role, then counts leaks (processes, tmux sessions,
// a state dir over 64 MB), lost events (an incarnation that started and
// has no event of its end), duplicates never resolved, crashes seen in
// the log, and the canaries.
func (c *chaos) finish() {
	c.daemonAlive()
	var roles []herd.Role
	c.client.Do(context.Background(), "GET", "/v1/roles", nil, nil, &roles)
	for _, ro := range roles {
		for try := 0; try < 20; try++ {
			if _, _, code := c.herd("delete", "role", ro.Name); code == 0 {
				break
			}
			time.Sleep(time.Second)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && (len(c.e.agentPIDs()) > 0 || len(c.e.tmuxSessions()) > 0) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := c.agents(); len(left) > 0 {
		c.r.leaks += len(left)
		c.r.note("processes left after delete: %v", left)
	}
	if left := c.e.tmuxSessions(); len(left) > 0 {
		c.r.leaks += len(left)
		c.r.note("tmux sessions left after delete: %v", left)
	}
	var size int64
	filepath.WalkDir(c.e.dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	if size > 64<<20 {
		c.r.leaks++
		c.r.note("state dir holds %d MB", size>>20)
	}
	c.r.note("state dir %d KB", size>>10)
	started, ended := map[string]string{}, map[string]bool{}
	for _, ev := range c.events() {
		switch ev.Kind {
		case herd.EventSpawned, herd.EventAdopted, herd.EventResumed, herd.EventRestarted:
			if ev.Incarnation != "" {
				started[ev.Incarnation] = ev.Session
			}
		case herd.EventExited, herd.EventCrashed, herd.EventStopped, herd.EventReaped,
			herd.EventKilled, herd.EventFailed, herd.EventSucceeded:
			ended[ev.Incarnation] = true
		}
	}
	for inc, s := range started {
		if !ended[inc] {
			c.r.lost++
			c.r.note("incarnation %s of %s started and never ended in the log", inc, s)
		}
	}
	c.checkCanaries()
	log, _ := os.ReadFile(c.e.logPath)
	for _, bad := range []string{"panic", "DATA RACE", "fatal error"} {
		if n := bytes.Count(log, []byte(bad)); n > 0 {
			c.r.crash += n
			c.r.note("daemon log: %d × %q", n, bad)
		}
	}
}

// chaosFamilies are the fault families, in the table's order.
var chaosFamilies = []struct {
	name string
	run  func(t *testing.T, r *tally, budget time.Duration)
}{
	{"pid reuse", chaosPIDReuse},
	{"daemon SIGKILL", chaosDaemonKill},
	{"racing CLIs", chaosRacingCLIs},
	{"lying tmux", chaosTmux},
	{"garbled inputs", chaosGarbled},
	{"resource faults", chaosResources},
	{"reboots", chaosReboots},
}

// TestChaos runs the fault campaign and prints its table.
func TestChaos(t *testing.T) {
	if os.Getenv("HERD_CHAOS") == "" {
		t.Skip("the fault campaign runs from scripts/chaos.sh (HERD_CHAOS=1)")
	}
	hasTmux(t)
	minutes, err := strconv.ParseFloat(os.Getenv("CHAOS_MINUTES"), 64)
	if err != nil || minutes <= 0 {
		minutes = 10
	}
	only := os.Getenv("CHAOS_FAMILY") // one family, by a part of its name
	n := 0
	for _, f := range chaosFamilies {
		if strings.Contains(f.name, only) {
			n++
		}
	}
	// Each family's setup and checks take ~20s beyond its share.
	budget := max(time.Duration(minutes*float64(time.Minute))/time.Duration(max(n, 1))-20*time.Second, 5*time.Second)
	var rows []*tally
	for _, f := range chaosFamilies {
		if !strings.Contains(f.name, only) {
			continue
		}
		r := &tally{name: f.name}
		rows = append(rows, r)
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			start := time.Now()
			defer func() {
				t.Logf("%s: %s", f.name, time.Since(start).Round(time.Second))
				for _, n := range r.notes {
					t.Logf("  %s", n)
				}
				for kind, why := range r.missing {
					t.Logf("  not injected here: %s (%s)", kind, why)
				}
			}()
			f.run(t, r, budget)
			switch {
			case r.skipped != "":
				t.Skipf("%s: skipped: %s", f.name, r.skipped)
			case r.faults == 0:
				t.Errorf("%s: no fault injected: the family tested nothing", f.name)
			case r.failures() > 0:
				t.Errorf("%s: faults got through", f.name)
			}
		})
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "FAMILY\tFAULTS\tWRONGFUL KILLS\tDUPLICATES\tLEAKS\tLOST EVENTS\tCRASHES\tNOT RECOVERED\tRESULT\t")
	var sum tally
	skipped := 0
	for _, r := range rows {
		result := "pass"
		switch {
		case r.skipped != "":
			result, skipped = "SKIPPED: "+r.skipped, skipped+1
		case r.faults == 0:
			result = "FAIL: no fault injected"
		case r.failures() > 0:
			result = "FAIL"
		case len(r.missing) > 0:
			result = fmt.Sprintf("pass, %d kind(s) not injected", len(r.missing))
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.name, r.faults, r.wrongful, r.duplicates, r.leaks, r.lost, r.crash, r.unrecovered, result)
		sum.faults += r.faults
		sum.wrongful += r.wrongful
		sum.duplicates += r.duplicates
		sum.leaks += r.leaks
		sum.lost += r.lost
		sum.crash += r.crash
		sum.unrecovered += r.unrecovered
	}
	fmt.Fprintf(w, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d skipped\t\n", sum.faults, sum.wrongful, sum.duplicates, sum.leaks, sum.lost, sum.crash, sum.unrecovered, skipped)
	w.Flush()
	fmt.Printf("\nherd fault campaign (%.1f min)\n%s", minutes, b.String())
	for _, r := range rows {
		for kind, why := range r.missing {
			fmt.Printf("%s: not injected here: %s (%s)\n", r.name, kind, why)
		}
	}
}
