// Package e2e drives the built herd binary as a user would: a daemon in a
// temporary state directory, the CLI against it, real processes, real tmux.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
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
	"herd/internal/api"
	"herd/internal/testenv"
)

// bin is the herd binary built once for all tests.
var bin string

func TestMain(m *testing.M) {
	if file := os.Getenv(envCanary); file != "" {
		runCanary(file) // the fault campaign's canary
	}
	dir, err := os.MkdirTemp("", "herd-e2e-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "herd")
	build := exec.Command("go", "build", "-race", "-o", bin, "herd/cmd/herd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build herd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's herd installation: a state dir, a config, a daemon.
type env struct {
	t        *testing.T
	dir      string
	socket   string
	tmuxSock string
	bootFile string
	daemon   *exec.Cmd
	logPath  string
	// extraEnv is added to the environment of the daemon and the CLI
	// (later entries win, e.g. a PATH with fake programs first).
	extraEnv []string
}

// newEnv writes config (the [restart], [probe] ... sections; a private
// tmux socket is added) into a fresh state dir.
func newEnv(t *testing.T, config string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{
		t: t, dir: dir, socket: filepath.Join(dir, "herd.sock"),
		tmuxSock: fmt.Sprintf("herd-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9),
		bootFile: filepath.Join(dir, "boot_id"), logPath: filepath.Join(dir, "daemon.log"),
	}
	real, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	e.setBootID(strings.TrimSpace(string(real)))
	cfg := fmt.Sprintf("[tmux]\nsocket = %q\n%s\n", e.tmuxSock, config)
	if !strings.Contains(config, "[probe]") {
		cfg += "[probe]\ninterval = \"200ms\"\ntimeout = \"1s\"\n"
	}
	if !strings.Contains(config, "[web]") {
		// No console unless a test asks for one: daemons of parallel
		// tests would all want its default port.
		cfg += "[web]\nlisten = \"\"\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "herd.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cleanup)
	return e
}

func (e *env) setBootID(id string) {
	if err := os.WriteFile(e.bootFile, []byte(id+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) environ() []string {
	// The binary is built with -race: no exit delay, and a race found in
	// the daemon is written to its log, where cleanup fails the test.
	env := append(os.Environ(), "HERD_STATE_DIR="+e.dir, "HERD_BOOT_ID_FILE="+e.bootFile, "HERD_CONFIG=",
		"GORACE=atexit_sleep_ms=0 halt_on_error=0")
	return append(env, e.extraEnv...)
}

// start runs `herd daemon` and waits until it answers.
func (e *env) start() {
	e.t.Helper()
	log, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(bin, "daemon")
	cmd.Env = e.environ()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	log.Close()
	e.daemon = cmd
	e.waitFor("daemon answers", 10*time.Second, func() bool {
		_, err := api.NewClient(e.socket).Ping(context.Background(), time.Second)
		return err == nil
	})
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

// cleanup stops the daemon and kills every agent of this environment:
// the processes whose environment names this state dir's socket.
func (e *env) cleanup() {
	e.kill(syscall.SIGKILL)
	exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
	for _, pid := range e.agentPIDs() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	b, _ := os.ReadFile(e.logPath)
	if bytes.Contains(b, []byte("DATA RACE")) {
		e.t.Errorf("the daemon reported a data race")
	}
	if e.t.Failed() {
		e.t.Logf("daemon log:\n%s", b)
	}
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
	return out.String(), errb.String(), code
}

// try runs the CLI and returns its stdout, whatever its exit: for polls,
// where a failure only means "not yet".
func (e *env) try(args ...string) string {
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

func (e *env) sessions() []api.SessionView {
	e.t.Helper()
	var views []api.SessionView
	if err := json.Unmarshal([]byte(e.must("get", "sessions", "--show-archived", "-o", "json")), &views); err != nil {
		e.t.Fatal(err)
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

func (e *env) events(args ...string) []herd.Event {
	e.t.Helper()
	out := e.must(append([]string{"events", "-o", "json"}, args...)...)
	var events []herd.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var ev herd.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			e.t.Fatalf("event line %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events
}

// minWait is the least any wait allows: the binary is race-built, and a
// busy CI machine can take seconds for what takes milliseconds here. A
// longer wait costs time only when a test fails.
const minWait = 15 * time.Second

// waitFor polls cond until it holds or the timeout (at least minWait) passes.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	timeout = max(timeout, minWait)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
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
