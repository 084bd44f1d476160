package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
)

// The watchdog and hook tests: fast watchdog settings, exec agents.

// e2eWait bounds every poll of these tests.
const e2eWait = 20 * time.Second

// wdEnv is an env with fast watchdog settings and helpers shaped for the
// watchdog tests.
type wdEnv struct {
	*env
}

// startE2E runs a daemon with fast watchdog settings plus extra config.
func startE2E(t *testing.T, extra string) *wdEnv {
	t.Helper()
	e := &wdEnv{env: newEnv(t, fmt.Sprintf(`[probe]
interval = "200ms"
[watchdog]
stall_after = "1s"
stall_repeat = "1s"
liveness_timeout = "2s"
%s
`, extra))}
	e.start()
	return e
}

// run declares a one-replica exec role running the simulated agent.
func (e *wdEnv) run(role string, simArgs ...string) {
	e.t.Helper()
	e.must(append([]string{"run", role, "--runtime", "exec", "--restart", "never", "--", bin, "sim"}, simArgs...)...)
}

func (e *wdEnv) poll(what string, cond func() bool) {
	e.t.Helper()
	e.waitFor(what, e2eWait, cond)
}

func (e *wdEnv) session(name string) api.SessionView {
	e.t.Helper()
	v, _ := e.env.session(name)
	return v
}

func (e *wdEnv) events(session, kind string) []herd.Event {
	e.t.Helper()
	args := []string{"events", "--session", session, "-o", "json"}
	if kind != "" {
		args = append(args, "--kind", kind)
	}
	var out []herd.Event
	sc := bufio.NewScanner(strings.NewReader(e.must(args...)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev herd.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("[events] bad line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

// diagKeys are the fixed keys of diagnostics.
var diagKeys = []string{"sampled_at", "proc_state", "cpu_percent", "rss_bytes", "threads", "fds", "tcp_established", "children"}

func checkDiagnostics(t *testing.T, what string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("[%s] expected diagnostics, got %v", what, v)
	}
	for _, k := range diagKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("[%s] expected diagnostics key %q, got %v", what, k, m)
		}
	}
	if m["threads"].(float64) < 1 || m["rss_bytes"].(float64) <= 0 || m["proc_state"] == "" {
		t.Errorf("[%s] expected a live process sample, got %v", what, m)
	}
	return m
}

// TestE2EStall: a silent agent becomes stalled within stall_after plus one
// tick of its last output; warnings repeat with fresh diagnostics and a
// count; describe shows diagnostics.
func TestE2EStall(t *testing.T) {
	t.Parallel()
	e := startE2E(t, "")
	e.run("quiet", "--interval", "100ms", "--silent-after", "700ms")
	e.poll("two stall warnings", func() bool { return len(e.events("quiet-0", herd.EventStallWarning)) >= 2 })

	if s := e.session("quiet-0"); s.State != herd.StateStalled || s.Activity != herd.ActivityWorking {
		t.Errorf("[session] expected stalled/working, got %s/%s", s.State, s.Activity)
	}
	stalled := e.events("quiet-0", herd.EventStalled)
	if len(stalled) != 1 {
		t.Fatalf("[stalled] expected one stalled event, got %d", len(stalled))
	}
	last, err := time.Parse(time.RFC3339Nano, stalled[0].Data["last_activity_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	// stall_after 1s, one tick 200ms, and some slack for a loaded machine.
	if gap := stalled[0].Time.Sub(last); gap < time.Second || gap > 1500*time.Millisecond {
		t.Errorf("[stalled] expected the stall 1s-1.2s after the last output, got %s", gap)
	}
	checkDiagnostics(t, "stalled", stalled[0].Data["diagnostics"])
	warnings := e.events("quiet-0", herd.EventStallWarning)
	for i, w := range warnings[:2] {
		if w.Data["count"] != float64(i+1) {
			t.Errorf("[warning %d] expected count %d, got %v", i, i+1, w.Data["count"])
		}
		d := checkDiagnostics(t, "warning", w.Data["diagnostics"])
		if d["sampled_at"] == stalled[0].Data["diagnostics"].(map[string]any)["sampled_at"] {
			t.Errorf("[warning %d] expected a fresh sample, got the stall's", i)
		}
		if d["cpu_percent"] == nil {
			t.Errorf("[warning %d] expected a cpu_percent against the previous sample, got null", i)
		}
	}
	var det map[string]any
	if err := json.Unmarshal([]byte(e.must("describe", "session", "quiet-0", "-o", "json")), &det); err != nil {
		t.Fatal(err)
	}
	checkDiagnostics(t, "describe", det["diagnostics"])
	if n := len(e.events("quiet-0", herd.EventKilled)); n != 0 {
		t.Errorf("[auto-kill off] expected no kill, got %d", n)
	}
}

// TestE2EAutoKill: with stall_auto_kill, only the agent that is idle and
// holds no TCP connection is killed, exactly once, as stall_killed; one
// that holds a loopback connection or burns CPU is spared.
func TestE2EAutoKill(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	e := startE2E(t, "stall_auto_kill = true")
	e.run("idle", "--interval", "100ms", "--silent-after", "300ms")
	e.run("net", "--interval", "100ms", "--silent-after", "300ms", "--tcp", ln.Addr().String())
	e.run("burn", "--interval", "100ms", "--silent-after", "300ms", "--burn-cpu")

	e.poll("the idle agent killed", func() bool { return e.session("idle-0").State == herd.StateFailed })
	s := e.session("idle-0")
	if s.Exit == nil || s.Exit.Reason != herd.ReasonStallKilled {
		t.Errorf("[idle] expected exit stall_killed, got %+v", s.Exit)
	}
	killed := e.events("idle-0", herd.EventKilled)
	if len(killed) != 1 {
		t.Fatalf("[idle] expected one killed event, got %d", len(killed))
	}
	d := checkDiagnostics(t, "killed", killed[0].Data["diagnostics"])
	if d["tcp_established"] != float64(0) {
		t.Errorf("[idle] expected no tcp, got %v", d["tcp_established"])
	}
	crashed := e.events("idle-0", herd.EventCrashed)
	if len(crashed) != 1 || crashed[0].Reason != herd.ReasonStallKilled {
		t.Errorf("[idle] expected exactly one crash with reason stall_killed, got %+v", crashed)
	}
	if n := len(e.events("idle-0", herd.EventSummary)); n != 1 {
		t.Errorf("[idle] expected one summary, got %d", n)
	}

	// The others get kill checks every window past the liveness timeout:
	// wait for two of them, each spared.
	for _, c := range []struct{ name, why string }{{"net-0", "TCP"}, {"burn-0", "CPU"}} {
		e.poll(c.name+" spared twice", func() bool {
			n := 0
			for _, w := range e.events(c.name, herd.EventStallWarning) {
				if why, _ := w.Data["auto_kill"].(string); strings.Contains(why, c.why) {
					n++
				}
			}
			return n >= 2
		})
		if s := e.session(c.name); s.State != herd.StateStalled {
			t.Errorf("[%s] expected still stalled, got %s", c.name, s.State)
		}
		if n := len(e.events(c.name, herd.EventKilled)); n != 0 {
			t.Errorf("[%s] expected no kill, got %d", c.name, n)
		}
	}
	warnings := e.events("net-0", herd.EventStallWarning)
	d = checkDiagnostics(t, "net warning", warnings[len(warnings)-1].Data["diagnostics"])
	if d["tcp_established"] != float64(1) {
		t.Errorf("[net] expected its own connection counted, got %v", d["tcp_established"])
	}
}

// TestE2EHooks: hooks sent by the agent move `activity` through idle (a
// session that starts waits at its prompt) -> working -> waiting -> idle
// as `get sessions` shows; events are written on
// transitions only, and the agent's session id is kept for resume.
func TestE2EHooks(t *testing.T) {
	t.Parallel()
	e := startE2E(t, "")
	const sid = "7f0e2a3c-1b2d-4c5e-8f90-a1b2c3d4e5f6"
	e.run("hooked", "--interval", "400ms", "--session-id", sid,
		"--hooks", "SessionStart,PreToolUse:Bash,PermissionRequest:Bash,Notification:permission_prompt,PostToolUse:Bash,Stop")
	var seen []herd.Activity
	// Idle after waiting: the Stop hook's idle. (The agent's output may
	// make it working before SessionStart's idle: not the end.)
	e.poll("idle after the hooks", func() bool {
		a := e.session("hooked-0").Activity
		if len(seen) == 0 || seen[len(seen)-1] != a {
			seen = append(seen, a)
		}
		return a == herd.ActivityIdle && slices.Contains(seen, herd.ActivityWaiting)
	})
	want := []herd.Activity{herd.ActivityWorking, herd.ActivityWaiting, herd.ActivityWorking, herd.ActivityIdle}
	if !isSubsequence(want, seen) {
		t.Errorf("[get sessions] expected %v in order, got %v", want, seen)
	}
	var trans []string
	for _, ev := range e.events("hooked-0", herd.EventActivity) {
		trans = append(trans, fmt.Sprint(ev.Data["from"], "->", ev.Data["to"]))
	}
	// The hooks' transitions end the list, one event each. Before the
	// first hook, the agent's own output may have moved the activity
	// (working, then idle at SessionStart): that prefix depends on which
	// came first.
	wantTrans := []string{"idle->working", "working->waiting", "waiting->working", "working->idle"}
	if len(trans) < len(wantTrans)+1 || fmt.Sprint(trans[len(trans)-len(wantTrans):]) != fmt.Sprint(wantTrans) ||
		!strings.HasPrefix(trans[0], "unknown->") || trans[len(trans)-len(wantTrans)-1] != "unknown->idle" && trans[len(trans)-len(wantTrans)-1] != "working->idle" {
		t.Errorf("[events] expected transitions ending %v after the session start's -> idle, got %v", wantTrans, trans)
	}
	// A hook that missed its time budget is spooled and ingested a little
	// later: stop only once the daemon has counted all six.
	e.poll("all six hooks counted", func() bool {
		var det api.SessionDetail
		if err := json.Unmarshal([]byte(e.try("describe", "session", "hooked-0", "-o", "json")), &det); err != nil {
			return false
		}
		m, _ := det.ActivityDetail.(map[string]any)
		return m["hook_events"] == float64(6)
	})
	e.must("stop", "hooked-0")
	var det api.SessionDetail
	if err := json.Unmarshal([]byte(e.must("describe", "session", "hooked-0", "-o", "json")), &det); err != nil {
		t.Fatal(err)
	}
	if det.Snapshot == nil || det.Snapshot.AgentSessionID != sid {
		t.Errorf("[snapshot] expected agent session id %s, got %+v", sid, det.Snapshot)
	}
	sums := e.events("hooked-0", herd.EventSummary)
	if len(sums) != 1 || sums[0].Data["hook_events"] != float64(6) || sums[0].Data["events"].(float64) < 1 {
		t.Errorf("[summary] expected 6 hook events and some output, got %+v", sums)
	}
}

func isSubsequence[T comparable](want, got []T) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestE2EHookCommand: `herd hook` exits 0 fast whatever happens; with the
// daemon away it spools the report, which the next daemon ingests.
func TestE2EHookCommand(t *testing.T) {
	t.Parallel()
	sb := herdtest.New(t, "")
	dir := sb.Dir
	hook := func(env []string, stdin string, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"hook"}, args...)...)
		cmd.Env = append(sb.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Errorf("[hook %v] expected exit 0, got %v: %s", args, err, e.String())
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("[hook %v] expected it to return within a second, took %s", args, took)
		}
		return o.String(), e.String()
	}
	under := []string{herd.EnvSession + "=w-0", herd.EnvIncarnation + "=inc-1", herd.EnvSocket + "=" + sb.Socket}

	if o, e := hook([]string{herd.EnvSession + "="}, `{"hook_event_name":"Stop"}`); o != "" || e != "" {
		t.Errorf("[not under herd] expected silence, got %q %q", o, e)
	}
	if o, e := hook(under, "garbage", "Stop"); o != "" || strings.Count(e, "\n") != 1 {
		t.Errorf("[garbage] expected one stderr line, got %q %q", o, e)
	}
	if o, e := hook(under, `{"session_id":"a","hook_event_name":"PreToolUse","tool_name":"Bash"}`); o != "" || e != "" {
		t.Errorf("[no daemon] expected a silent spool, got %q %q", o, e)
	}
	spool := filepath.Join(dir, "activity", "w-0.jsonl")
	b, err := os.ReadFile(spool)
	if err != nil || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("[no daemon] expected one spooled report, got %q, %v", b, err)
	}
	// A stdin that never closes does not hold the hook.
	cmd := exec.Command(bin, "hook", "Stop")
	cmd.Env = append(sb.Environ(), under...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	start := time.Now()
	if err := cmd.Run(); err != nil || time.Since(start) > 2*time.Second {
		t.Errorf("[open stdin] expected exit 0 within a second, got %v after %s", err, time.Since(start))
	}
	pr.Close()

	// The daemon ingests the spool at start (the session is unknown to it,
	// so the reports are dropped, but the file is consumed).
	sb.Daemon(bin, nil)
	herdtest.WaitFor(t, "the spool consumed", 5*time.Second, func() bool {
		left, _ := filepath.Glob(filepath.Join(dir, "activity", "*"))
		return len(left) == 0
	})
}

// TestE2EHooksInstall: install merges herd's entries beside the user's own
// hooks, once.
func TestE2EHooksInstall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	settings := filepath.Join(dir, ".claude", "settings.local.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	user := `{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify-send done"}]}]}}`
	if err := os.WriteFile(settings, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		out, err := exec.Command(bin, "hooks", "install", "--dir", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("[install] %v: %s", err, out)
		}
		return string(out)
	}
	if out := run(); !strings.Contains(out, "installed in "+settings) {
		t.Errorf("[first] expected an install message, got %q", out)
	}
	first, _ := os.ReadFile(settings)
	if out := run(); !strings.Contains(out, "nothing changed") {
		t.Errorf("[second] expected nothing changed, got %q", out)
	}
	second, _ := os.ReadFile(settings)
	if !bytes.Equal(first, second) {
		t.Error("[second] expected the file unchanged")
	}
	for _, want := range []string{"notify-send done", `"model"`, bin + " hook Stop", bin + " hook PreToolUse"} {
		if !strings.Contains(string(second), want) {
			t.Errorf("[merged] expected %q in the settings, got %s", want, second)
		}
	}
}
