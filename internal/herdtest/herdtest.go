// Package herdtest runs the herd daemons of end-to-end tests and benchmarks
// in a sandbox each — a private state dir, a private tmux socket, a config
// file, an environment scrubbed of the caller's herd and tmux settings —
// and checks what they leave behind: their logs and their processes. Only
// tests import it; it must never reach a user's own herd.
package herdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"herd/internal/api"
	"herd/internal/config"
)

// EnvSandbox is set in the environment of every process a sandbox starts
// (daemons, CLI calls, and through them tmux servers and agents) to
// "<Run>/<sandbox>": how its cleanup and the end-of-run check find them.
const EnvSandbox = "HERDTEST_SANDBOX"

// Run names this test process's run: every sandbox's tmux socket and
// marker start with it, so what the run started is told from what others
// (a user's herd, another run) started.
var Run = newRun()

func newRun() string {
	b := make([]byte, 3)
	rand.Read(b)
	return fmt.Sprintf("herdt%d%s", os.Getpid(), hex.EncodeToString(b))
}

// sandboxes numbers the sandboxes of the run.
var sandboxes atomic.Int64

// scrubbed are the variables of the caller's environment a sandbox never
// passes on: they would point a daemon or CLI at the caller's own herd
// (state dir, config, socket, session) or at the caller's tmux server.
var scrubbed = []string{"HERD_", "TMUX=", "TMUX_PANE=", EnvSandbox + "="}

// Sandbox is one private herd installation: a state dir, a config naming a
// private tmux socket, and the environment every process started in it
// gets.
type Sandbox struct {
	// TB is the test or benchmark the sandbox belongs to.
	TB testing.TB
	// Dir is the state dir (HERD_STATE_DIR).
	Dir string
	// Socket is the daemon's API socket in Dir.
	Socket string
	// Tmux is the private tmux -L socket name the config names.
	Tmux string
	// ID is the value of EnvSandbox in the sandbox's processes.
	ID string
	// Log is the file the daemons' output goes to.
	Log string

	daemons  []*exec.Cmd
	expected []*regexp.Regexp
}

// New makes a sandbox in a fresh temp dir whose herd.toml is a [tmux]
// table naming a private socket followed by config. Its cleanup, which
// runs before the dir is removed, stops the daemons, kills the tmux server
// and every process of the sandbox, and fails tb when a daemon's log
// holds a panic, a data race, or an ERROR line not declared expected.
func New(tb testing.TB, config string) *Sandbox {
	tb.Helper()
	return NewAt(tb, tb.TempDir(), config) // TempDir first: its removal is the last cleanup
}

// NewAt is New on an existing state dir, e.g. one holding a prepared
// store; the caller keeps dir until tb's cleanup is done. Its herd.toml is
// replaced.
func NewAt(tb testing.TB, dir, config string) *Sandbox {
	tb.Helper()
	n := sandboxes.Add(1)
	s := &Sandbox{
		TB: tb, Dir: dir, Socket: filepath.Join(dir, "herd.sock"),
		Tmux: fmt.Sprintf("%s-%d", Run, n), ID: fmt.Sprintf("%s/%d", Run, n),
		Log: filepath.Join(dir, "daemon.log"),
	}
	cfg := fmt.Sprintf("[tmux]\nsocket = %q\n%s\n", s.Tmux, config)
	if !strings.Contains(config, "[web]") {
		// No console unless a test asks for one: the daemons of tests
		// side by side would all want its default port.
		cfg += "[web]\nlisten = \"\"\n"
	}
	if err := os.WriteFile(s.Config(), []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.cleanup)
	return s
}

// Config is the path of the sandbox's herd.toml.
func (s *Sandbox) Config() string { return filepath.Join(s.Dir, "herd.toml") }

// Environ is the environment of a process started in the sandbox: the
// caller's, without its herd and tmux variables, plus the sandbox's state
// dir, config and marker, the race detector's settings, and extra (later
// entries win, e.g. a PATH with fake programs first).
func (s *Sandbox) Environ(extra ...string) []string {
	env := Scrub(os.Environ())
	env = append(env, "HERD_STATE_DIR="+s.Dir, "HERD_CONFIG="+s.Config(), EnvSandbox+"="+s.ID,
		// A race-built binary: no exit delay, and a race is written to a
		// file of its own in the state dir, where the cleanup finds it,
		// whichever process of the sandbox had it (the daemon, a CLI
		// call, `herd hook` or `herd sim` run by an agent).
		"GORACE="+RaceEnv(s.RaceLog()))
	return append(env, extra...)
}

// RaceLog is the path prefix of the race reports of the sandbox's
// processes: each race-built process writes its own to RaceLog().<pid>.
func (s *Sandbox) RaceLog() string { return filepath.Join(s.Dir, "race") }

// RaceEnv is the value of GORACE for race-built processes of a test: no
// exit delay, and every report written to prefix.<pid> (see RaceReports).
func RaceEnv(prefix string) string {
	return "atexit_sleep_ms=0 halt_on_error=0 log_path=" + prefix
}

// RaceReports returns the race reports written under prefix (see
// RaceEnv), each named by its file and shortened to its first lines.
func RaceReports(prefix string) []string {
	files, _ := filepath.Glob(prefix + ".*")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		lines := strings.SplitN(string(b), "\n", 41)
		out = append(out, fmt.Sprintf("%s:\n%s", filepath.Base(f), strings.Join(lines[:min(len(lines), 40)], "\n")))
	}
	return out
}

// Scrub returns env without the variables that would lead a process to
// the caller's own herd or tmux server.
func Scrub(env []string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, p := range scrubbed {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// CheckConfig fails unless the config at path names a tmux socket of this
// run: a daemon started on it could otherwise reach the default socket,
// where a user's own herd runs.
func (s *Sandbox) CheckConfig() {
	s.TB.Helper()
	cfg, err := config.Load(s.Config())
	if err != nil {
		return // the daemon reports it; some tests write a bad config on purpose
	}
	if !strings.HasPrefix(cfg.Tmux.Socket, Run+"-") {
		s.TB.Fatalf("herdtest: the config names tmux socket %q, not a private one of this run (%s-*)", cfg.Tmux.Socket, Run)
	}
}

// Daemon starts `bin daemon args...` in the sandbox with extra added to
// its environment, its output appended to Log, and waits until it
// answers. It fails at once if the config would reach a tmux socket that
// is not the sandbox's own.
func (s *Sandbox) Daemon(bin string, extra []string, args ...string) *exec.Cmd {
	s.TB.Helper()
	cmd := s.StartDaemon(bin, extra, args...)
	WaitFor(s.TB, "the daemon answering", 10*time.Second, func() bool {
		_, err := api.NewClient(s.Socket).Ping(context.Background(), time.Second)
		return err == nil
	})
	return cmd
}

// StartDaemon is Daemon without the wait for an answer.
func (s *Sandbox) StartDaemon(bin string, extra []string, args ...string) *exec.Cmd {
	s.TB.Helper()
	s.CheckConfig()
	log, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.TB.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, append([]string{"daemon"}, args...)...)
	cmd.Env = s.Environ(extra...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.TB.Fatal(err)
	}
	s.daemons = append(s.daemons, cmd)
	return cmd
}

// ExpectErrors declares ERROR lines of the daemon log this test causes on
// purpose (fault injection): lines matching one of the regexps do not fail
// it. Panics and data races always do.
func (s *Sandbox) ExpectErrors(patterns ...string) {
	for _, p := range patterns {
		s.expected = append(s.expected, regexp.MustCompile(p))
	}
}

// cleanup stops the sandbox's daemons, kills its tmux server and every
// process it started (before its dir, and so any socket in it, is
// removed), and checks the log.
func (s *Sandbox) cleanup() {
	for _, d := range s.daemons {
		if d.ProcessState == nil {
			d.Process.Kill()
			d.Wait()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	exec.CommandContext(ctx, "tmux", "-L", s.Tmux, "kill-server").Run()
	cancel()
	// Whatever kill-server missed (a wedged server, one whose socket is
	// gone, a second server of the same name, agents of exec sessions).
	// A process can fork between the look and its kill (a wrapper
	// starting its agent): its child is found by the next look, until
	// one finds none.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := s.processes()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		for _, p := range left {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	b, _ := os.ReadFile(s.Log)
	for _, p := range LogProblems(b, s.expected) {
		s.TB.Errorf("daemon log: %s", p)
	}
	for _, r := range RaceReports(s.RaceLog()) {
		s.TB.Errorf("a data race in a process of the sandbox: %s", r)
	}
	if s.TB.Failed() && len(b) > 0 {
		s.TB.Logf("daemon log:\n%s", b)
	}
}

// processes lists the live processes of this sandbox: those carrying its
// marker, the agents of its daemon (HERD_SOCKET, set in every agent, even
// under a tmux server the test started itself), and those naming its tmux
// socket on their command line.
func (s *Sandbox) processes() []Process {
	return find(func(p Process) bool {
		return bytes.Contains(p.environ, []byte(EnvSandbox+"="+s.ID+"\x00")) ||
			bytes.Contains(p.environ, []byte("HERD_SOCKET="+s.Socket+"\x00")) || namesSocket(p.Argv, s.Tmux)
	})
}

// Kill kills every live process carrying marker id (EnvSandbox), for
// processes a test starts outside a sandbox but marked as the run's.
func Kill(id string) {
	for _, p := range find(func(p Process) bool { return bytes.Contains(p.environ, []byte(EnvSandbox+"="+id+"\x00")) }) {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// namesSocket reports whether argv names tmux socket name or one derived
// from it (name-ui).
func namesSocket(argv []string, name string) bool {
	for _, a := range argv {
		if a == name || strings.HasPrefix(a, name+"-") {
			return true
		}
	}
	return false
}

// Process is a live process found on the machine.
type Process struct {
	PID     int
	Argv    []string
	environ []byte
}

func (p Process) String() string { return fmt.Sprintf("pid %d: %s", p.PID, strings.Join(p.Argv, " ")) }

// find lists the live processes other than this one that match.
func find(match func(Process) bool) []Process {
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		p := Process{PID: pid, Argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), environ: environ}
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// Leftovers lists the live processes this run started through a sandbox:
// after the last test, each is a leak.
func Leftovers() []Process { return runProcesses(Run) }

// runProcesses lists the live processes that run started through a
// sandbox: those carrying its marker and those naming one of its tmux
// sockets.
func runProcesses(run string) []Process {
	return find(func(p Process) bool {
		if bytes.Contains(p.environ, []byte(EnvSandbox+"="+run+"/")) {
			return true
		}
		for _, a := range p.Argv {
			if strings.HasPrefix(a, run+"-") {
				return true
			}
		}
		return false
	})
}

// CheckLeftovers returns code, or 1 after naming on stderr each process of
// the run still alive: for the end of a TestMain, after m.Run. The
// processes are given a moment to finish exiting first, and are killed
// after being named, so one leak does not outlive the run.
func CheckLeftovers(code int) int {
	var left []Process
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left = Leftovers(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "FAIL: %d processes started by this run are still running:\n", len(left))
	for _, p := range left {
		fmt.Fprintf(os.Stderr, "\t%s\n", p)
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return 1
}

// WaitFor polls cond every 20ms until it holds, failing tb after timeout.
func WaitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	WaitEvery(tb, what, timeout, 20*time.Millisecond, cond)
}

// WaitEvery polls cond every interval until it holds, failing tb after
// timeout.
func WaitEvery(tb testing.TB, what string, timeout, every time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(every)
	}
}
