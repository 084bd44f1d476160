// Package e2e drives the built herd binary as a user would: a daemon in a
// temporary state directory, the CLI against it, real processes, real tmux.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
	"herd/internal/testenv"
)

// bin is the herd binary built once for all tests.
var bin string

func TestMain(m *testing.M) {
	if file := os.Getenv(envCanary); file != "" {
		runCanary(file) // the fault campaign's canary
	}
	if route := os.Getenv(envRawPost); route != "" {
		rawPost(route) // an agent's raw call on the socket
	}
	herdtest.Main(m, func() (func(), int) {
		dir, err := os.MkdirTemp("", "herd-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return nil, 1
		}
		cleanup := func() { os.RemoveAll(dir) }
		bin = filepath.Join(dir, "herd")
		build := exec.Command("go", "build", "-race", "-o", bin, "herd/cmd/herd")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build herd:", err)
			return cleanup, 1
		}
		return cleanup, 0
	})
}

// env is one test's herd installation: a sandbox (state dir, config,
// private tmux socket) and its daemon.
type env struct {
	t        *testing.T
	sb       *herdtest.Sandbox
	dir      string
	socket   string
	tmuxSock string
	bootFile string
	daemon   *exec.Cmd
	logPath  string
	// extraEnv is added to the environment of the daemon and the CLI
	// (later entries win, e.g. a PATH with fake programs first).
	extraEnv []string
	// autostart lets a CLI command start a daemon when none answers; off
	// by default, so a test expecting no daemon never gets one.
	autostart bool
}

// newEnv writes config (the [restart], [probe] ... sections; a private
// tmux socket is added) into a fresh sandbox.
func newEnv(t *testing.T, config string) *env {
	t.Helper()
	if !strings.Contains(config, "[probe]") {
		config += "\n[probe]\ninterval = \"200ms\"\ntimeout = \"1s\"\n"
	}
	sb := herdtest.New(t, config)
	e := &env{
		t: t, sb: sb, dir: sb.Dir, socket: sb.Socket, tmuxSock: sb.Tmux,
		bootFile: filepath.Join(sb.Dir, "boot_id"), logPath: sb.Log,
	}
	real, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	e.setBootID(strings.TrimSpace(string(real)))
	return e
}

func (e *env) setBootID(id string) {
	if err := os.WriteFile(e.bootFile, []byte(id+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// environ is the environment of the daemon and of every CLI call.
func (e *env) environ() []string { return e.sb.Environ(e.extra()...) }

// extra is what the environment adds to the sandbox's.
func (e *env) extra() []string {
	env := []string{"HERD_BOOT_ID_FILE=" + e.bootFile}
	if !e.autostart {
		env = append(env, "HERD_NO_AUTOSTART=1")
	}
	return append(env, e.extraEnv...)
}

// start runs `herd daemon` and waits until it answers.
func (e *env) start() {
	e.t.Helper()
	e.daemon = e.sb.Daemon(bin, e.extra())
}

// startDaemon starts one more `herd daemon` beside any other, without
// waiting for it; its output goes to the log the cleanup checks.
func (e *env) startDaemon() *exec.Cmd {
	e.t.Helper()
	return e.sb.StartDaemon(bin, e.extra())
}

// kill stops the daemon with sig and waits for it.
func (e *env) kill(sig syscall.Signal) {
	e.t.Helper()
	if e.daemon == nil {
		return
	}
	e.daemon.Process.Signal(sig)
	e.daemon.Wait()
	e.daemon = nil
}

// agentPIDs lists live processes started for this environment.
func (e *env) agentPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	want := []byte(herd.EnvSocket + "=" + e.socket + "\x00")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(b, want) {
			out = append(out, pid)
		}
	}
	return out
}

// demoEnv is the environment of a `herd demo`, which makes its own
// daemons on private sockets: the caller's without its herd and tmux
// variables, a temp state dir, and the run's marker, so that whatever the
// demo leaves behind is found at the end of the run.
func demoEnv(t *testing.T) []string {
	races := filepath.Join(t.TempDir(), "race")
	t.Cleanup(func() {
		for _, r := range herdtest.RaceReports(races) {
			t.Errorf("a data race in a process of the demo: %s", r)
		}
	})
	return append(herdtest.Scrub(os.Environ()), "HERD_STATE_DIR="+t.TempDir(), "HERD_CONFIG=",
		herdtest.EnvSandbox+"="+herdtest.Run+"/demo", "GORACE="+herdtest.RaceEnv(races))
}

// herd runs the CLI and returns stdout, stderr and the exit code.
func (e *env) herd(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	return e.herdIn("", args...)
}

// herdIn runs the CLI with stdin and returns stdout, stderr and the exit code.
func (e *env) herdIn(stdin string, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = e.environ()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("herd %v: %v", args, err)
	}
	if p := herdtest.LogProblems(errb.Bytes(), nil); hasPanic(p) {
		e.t.Errorf("herd %s: the CLI panicked: %s\n%s", strings.Join(args, " "), p, errb.String())
	}
	return out.String(), errb.String(), code
}

// hasPanic reports whether problems (herdtest.LogProblems) name a panic.
func hasPanic(problems []string) bool {
	for _, p := range problems {
		if strings.HasPrefix(p, "a panic") {
			return true
		}
	}
	return false
}

// try runs the CLI and returns its stdout, whatever its exit: for polls,
// where a failure only means "not yet".
func (e *env) try(args ...string) string {
	if len(args) == 2 && args[0] == "logs" {
		// The tests poll a session's output: through the API in this
		// process, as `herd logs NAME` reads it (a session of another
		// host, which the daemon does not serve, through the CLI).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out []byte
		if err := api.NewClient(e.socket).Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(args[1])+"/logs", nil, nil, &out); err == nil {
			return string(out)
		}
	}
	out, _, _ := e.herd(args...)
	return out
}

// must runs the CLI and fails the test on a non-zero exit.
func (e *env) must(args ...string) string {
	e.t.Helper()
	out, errs, code := e.herd(args...)
	if code != 0 {
		e.t.Fatalf("herd %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// sessions lists every session the daemon knows (archived ones too),
// through the API in this process: the tests poll it often, and a
// race-built CLI process per poll would compete with the daemon for the
// machine. The CLI's own listing is checked by the tests of `herd get`.
func (e *env) sessions() []api.SessionView {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var views []api.SessionView
	if err := api.NewClient(e.socket).Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
		e.t.Fatalf("GET /v1/sessions: %v", err)
	}
	return views
}

func (e *env) session(name string) (api.SessionView, bool) {
	for _, v := range e.sessions() {
		if v.Name == name {
			return v, true
		}
	}
	return api.SessionView{}, false
}

// events lists the event log as `herd events -o json ARGS` does, through
// the API in this process (the tests poll it; see sessions): ARGS are the
// command's filters (--session, --kind, --host, --since, --limit).
func (e *env) events(args ...string) []herd.Event {
	e.t.Helper()
	q := url.Values{"limit": {"1000"}} // the command's default
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok || i+1 >= len(args) || !slices.Contains([]string{"session", "kind", "host", "task", "since", "limit"}, name) {
			e.t.Fatalf("events: %q is not a filter of herd events", args[i])
		}
		i++
		if name == "limit" && args[i] == "0" {
			q.Del("limit")
			continue
		}
		q.Set(name, args[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var events []herd.Event
	err := api.NewClient(e.socket).Each(ctx, "/v1/events", q, func(raw json.RawMessage) error {
		var ev herd.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("event %s: %w", raw, err)
		}
		events = append(events, ev)
		return nil
	})
	if err != nil {
		e.t.Fatalf("GET /v1/events?%s: %v", q.Encode(), err)
	}
	return events
}

// pollEvery is how often the tests look again while they wait: each look
// may ask the daemon (or run the CLI), which competes with what is waited
// for on a small machine.
const pollEvery = 100 * time.Millisecond

// waitFor polls cond until it holds, failing the test after timeout.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	herdtest.WaitEvery(e.t, what, timeout, pollEvery, cond)
}

// holds checks cond for d, every pollEvery, and fails the test at the
// first look where it does not hold: for what must stay true (nothing
// killed, no second event), in place of a sleep and one look at the end.
func (e *env) holds(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(pollEvery) {
		if !cond() {
			e.t.Fatalf("expected %s to hold for %s; it did not", what, d)
		}
		if time.Now().After(end) {
			return
		}
	}
}

// waitState waits until session name is in state st and returns it.
func (e *env) waitState(name string, st herd.State, timeout time.Duration) api.SessionView {
	e.t.Helper()
	var v api.SessionView
	e.waitFor(fmt.Sprintf("%s to be %s", name, st), timeout, func() bool {
		var ok bool
		v, ok = e.session(name)
		return ok && v.State == st
	})
	return v
}

func count(events []herd.Event, kind string) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

func hasTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Require(t, "tmux", err.Error(), testenv.InstallTmux)
	}
}

// waitOutput waits until a simulated agent has printed, so it is past its
// start-up: a signal sent earlier would reach a half-started process.
func (e *env) waitOutput(name string) {
	e.t.Helper()
	e.waitFor(name+" output", 10*time.Second, func() bool {
		return strings.Contains(e.try("logs", name), `"type"`)
	})
}

// campaign is the size of a fault campaign: short in the test command,
// full with HERD_CAMPAIGN=full (scripts/chaos.sh runs them so).
func campaign(short, full int) int {
	if os.Getenv("HERD_CAMPAIGN") == "full" {
		return full
	}
	return short
}
