package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/herdtest"
)

// TestMain lets the test binary act as the agent: with SIM_HELPER=1 it runs
// the sim command with its arguments instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SIM_HELPER") == "1" {
		cmd := Command()
		cmd.SetArgs(os.Args[1:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const waitLimit = 20 * time.Second

// proc is a running sim.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // stdout lines; closed at EOF
	stderr *bytes.Buffer
	stdin  io.WriteCloser
	done   chan struct{}
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SIM_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1000), stderr: &bytes.Buffer{}, stdin: stdin, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// head is the start of s, for error messages.
func head(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// wait returns the wait status once the process is gone.
func (p *proc) wait(t *testing.T) syscall.WaitStatus {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitLimit):
		t.Fatalf("sim did not end within %v", waitLimit)
	}
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus)
}

// line returns the next stdout line.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("sim stdout closed; stderr: %s", p.stderr)
		}
		return l
	case <-time.After(waitLimit):
		t.Fatalf("no stdout line within %v", waitLimit)
	}
	return ""
}

// poll calls cond until it holds or the deadline passes.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, waitLimit, cond)
}

func TestExitCodeAndStream(t *testing.T) {
	t.Parallel()
	p := start(t, "--interval", "10ms", "--exit-after", "300ms", "--exit-code", "3", "--session-id", "sess-1")
	var outs []agents.Signal
	for l := range p.lines {
		outs = append(outs, agents.ParseLine(herd.AgentClaude, []byte(l), time.Now()))
	}
	ws := p.wait(t)
	if !ws.Exited() || ws.ExitStatus() != 3 {
		t.Fatalf("[exit code] expected exit 3, got %v", ws)
	}
	if len(outs) < 5 {
		t.Fatalf("[lines] expected at least 5 lines, got %d", len(outs))
	}
	if outs[0].Event != "system/init" || outs[0].AgentSessionID != "sess-1" {
		t.Errorf("[init] expected system line with session id, got %+v", outs[0])
	}
	if outs[1].Event != "assistant" || outs[1].Tool != "Bash" || outs[2].Event != "user" || outs[3].Event != "assistant" || outs[3].Tool != "" {
		t.Errorf("[cycle] expected tool_use, tool_result, text; got %+v", outs[1:4])
	}
	last := outs[len(outs)-1]
	if last.Event != "result" || !last.Final {
		t.Errorf("[result] expected a final result line, got %+v", last)
	}
	for i, o := range outs {
		if o.Event == agents.LineText {
			t.Errorf("[line %d] expected JSON, got text", i)
		}
	}
}

func TestDeathBySignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want syscall.Signal
	}{
		{"SEGV", syscall.SIGSEGV},
		{"sigabrt", syscall.SIGABRT},
		{"KILL", syscall.SIGKILL},
		{"TERM", syscall.SIGTERM},
		{"7", syscall.SIGBUS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := start(t, "--quiet", "--signal", tt.name, "--signal-after", "50ms")
			ws := p.wait(t)
			if !ws.Signaled() || ws.Signal() != tt.want {
				t.Errorf("[%s] expected death by %v, got %v (stderr %q)", tt.name, tt.want, ws, head(p.stderr.String()))
			}
		})
	}
}

func TestIgnoredSignalKeepsRunning(t *testing.T) {
	t.Parallel()
	p := start(t, "--interval", "10ms", "--signal", "URG", "--exit-after", "200ms", "--exit-code", "4")
	if ws := p.wait(t); !ws.Exited() || ws.ExitStatus() != 4 {
		t.Errorf("[SIGURG] expected the sim to go on and exit 4, got %v", ws)
	}
}

func TestSIGTERMFromOutside(t *testing.T) {
	t.Parallel()
	p := start(t, "--interval", "10ms")
	p.line(t) // running
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ws := p.wait(t); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("[SIGTERM] expected death by SIGTERM, got %v", ws)
	}
}

func TestHoldsTCPConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := start(t, "--quiet", "--tcp", ln.Addr().String())
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(waitLimit))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("[accept] expected a connection from the sim, got %v", err)
	}
	defer conn.Close()
	// Held: reading times out rather than seeing EOF.
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("[held] expected a read timeout, got %v", err)
	}
	_ = p.cmd.Process.Kill()
	p.wait(t)
	_ = conn.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("[closed with the process] expected EOF or reset, got %v", err)
	}
}

func TestTCPDialFailure(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := start(t, "--quiet", "--tcp", addr)
	if ws := p.wait(t); ws.ExitStatus() != 1 || !strings.Contains(p.stderr.String(), "sim: dial") {
		t.Errorf("[dial failure] expected exit 1 with a dial error, got %v %q", ws, p.stderr)
	}
}

// childrenOf lists the live (non-zombie) children of pid, from /proc.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cpid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, ok := statOf(cpid)
		if ok && ppid == pid && state != "Z" {
			out = append(out, cpid)
		}
	}
	return out
}

// statOf returns the state and parent pid of pid.
func statOf(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

func alive(pid int) bool {
	state, _, ok := statOf(pid)
	return ok && state != "Z"
}

func TestChildren(t *testing.T) {
	t.Parallel()
	p := start(t, "--quiet", "--children", "2")
	var kids []int
	poll(t, "2 children", func() bool { kids = childrenOf(p.cmd.Process.Pid); return len(kids) == 2 })
	for _, k := range kids {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k), "comm"))
		if strings.TrimSpace(string(comm)) != "sleep" {
			t.Errorf("[child %d] expected comm sleep, got %q", k, comm)
		}
	}
	// Killed hard, the sim still takes its children along.
	_ = p.cmd.Process.Kill()
	p.wait(t)
	poll(t, "children to die with the sim", func() bool { return !alive(kids[0]) && !alive(kids[1]) })
}

func TestPlaysHooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "hooks.log")
	script := filepath.Join(dir, "herd")
	body := "#!/bin/sh\n{ printf '%s\\n' \"$*\"; cat; printf '\\n'; } >> '" + log + "'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, "--quiet", "--interval", "20ms", "--session-id", "sess-h", "--herd", script,
		"--hooks", "SessionStart,PreToolUse:Bash,PostToolUse:Bash,PermissionRequest:Bash,Notification:auth_success,Stop,Notification:idle_prompt")
	var lines []string
	poll(t, "7 hook calls", func() bool {
		b, _ := os.ReadFile(log)
		lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		return len(lines) >= 14
	})
	wantEvents := []string{"SessionStart", "PreToolUse", "PostToolUse", "PermissionRequest", "Notification", "Stop", "Notification"}
	wantActivity := []herd.Activity{"idle", "working", "working", "waiting", "waiting", "idle", "idle"}
	var st agents.State
	for i, ev := range wantEvents {
		if args := lines[2*i]; args != "hook "+ev {
			t.Errorf("[call %d] expected args %q, got %q", i, "hook "+ev, args)
		}
		h, err := agents.ParseHook(herd.AgentClaude, []byte(lines[2*i+1]), "", time.Now())
		if err != nil {
			t.Fatalf("[call %d] expected hook JSON, got %v: %s", i, err, lines[2*i+1])
		}
		if h.Event != ev || h.AgentSessionID != "sess-h" || h.Cwd == "" || h.TranscriptPath == "" {
			t.Errorf("[call %d] expected %s with session, cwd, transcript; got %+v", i, ev, h)
		}
		st = agents.Apply(st, h)
		if st.Activity != wantActivity[i] {
			t.Errorf("[call %d %s] expected %s, got %s", i, ev, wantActivity[i], st.Activity)
		}
	}
	if h, _ := agents.ParseHook(herd.AgentClaude, []byte(lines[3]), "", time.Now()); h.Tool != "Bash" {
		t.Errorf("[tool name] expected Bash, got %q", h.Tool)
	}
	// The sequence is played once; the sim stays alive in its last state.
	if !alive(p.cmd.Process.Pid) {
		t.Errorf("[after script] expected the sim alive")
	}
}

func TestHookFailureIgnored(t *testing.T) {
	t.Parallel()
	p := start(t, "--interval", "10ms", "--herd", "/nonexistent/herd", "--hooks", "Stop", "--exit-after", "150ms")
	if ws := p.wait(t); ws.ExitStatus() != 0 || !strings.Contains(p.stderr.String(), "sim: hook Stop") {
		t.Errorf("[hook failure] expected exit 0 with a logged failure, got %v %q", ws, p.stderr)
	}
}

func TestSilentAfter(t *testing.T) {
	t.Parallel()
	p := start(t, "--interval", "10ms", "--silent-after", "150ms")
	n := 0
	quiet := time.NewTimer(0)
	<-quiet.C
	for {
		quiet.Reset(500 * time.Millisecond)
		select {
		case _, ok := <-p.lines:
			if !ok {
				t.Fatalf("[stall] expected the sim alive, stdout closed; stderr %q", p.stderr)
			}
			n++
			if n > 1000 {
				t.Fatalf("[stall] expected the output to stop, got %d lines", n)
			}
			continue
		case <-quiet.C:
		}
		break
	}
	if n < 2 {
		t.Errorf("[before stall] expected some lines, got %d", n)
	}
	if !alive(p.cmd.Process.Pid) {
		t.Errorf("[stall] expected the sim alive while silent")
	}
}

// cpuTicks is utime+stime of pid.
func cpuTicks(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}

func TestBurnCPU(t *testing.T) {
	t.Parallel()
	p := start(t, "--quiet", "--silent-after", "0s", "--burn-cpu")
	pid := p.cmd.Process.Pid
	base := -1
	poll(t, "CPU time to grow", func() bool {
		c := cpuTicks(pid)
		if base < 0 {
			base = c
		}
		return c-base >= 30 // 0.3 s of CPU at 100 Hz
	})
}

func TestWaitInput(t *testing.T) {
	t.Parallel()
	p := start(t, "--wait-input", "--interval", "10ms")
	if o := agents.ParseLine(herd.AgentClaude, []byte(p.line(t)), time.Now()); o.Event != "system/init" {
		t.Errorf("[init] expected system line, got %+v", o)
	}
	if l := p.line(t); !strings.Contains(l, "waiting for your input") {
		t.Errorf("[prompt] expected a prompt, got %q", l)
	}
	if _, err := io.WriteString(p.stdin, "hello there\n"); err != nil {
		t.Fatal(err)
	}
	if l := p.line(t); !strings.Contains(l, "hello there") || agents.ParseLine(herd.AgentClaude, []byte(l), time.Now()).Event != "assistant" {
		t.Errorf("[echo] expected an assistant line echoing the input, got %q", l)
	}
	if l := p.line(t); !strings.Contains(l, "waiting for your input") {
		t.Errorf("[prompt again] expected a prompt, got %q", l)
	}
	// Stdin closed: still waiting, not exiting.
	p.stdin.Close()
	select {
	case l, ok := <-p.lines:
		t.Errorf("[stdin closed] expected silence, got %q (open %v)", l, ok)
	case <-time.After(200 * time.Millisecond):
	}
	if !alive(p.cmd.Process.Pid) {
		t.Errorf("[stdin closed] expected the sim alive")
	}
}

func TestStderrLines(t *testing.T) {
	t.Parallel()
	p := start(t, "--quiet", "--stderr-lines", "5", "--exit-code", "0")
	if ws := p.wait(t); ws.ExitStatus() != 0 {
		t.Fatalf("[exit] expected 0, got %v", ws)
	}
	if got := strings.Count(p.stderr.String(), "\n"); got != 5 {
		t.Errorf("[stderr] expected 5 lines, got %d: %q", got, p.stderr)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--signal", "NOPE"}, "unknown signal"},
		{[]string{"--signal", "99"}, "out of range"},
		{[]string{"--interval", "0s"}, "--interval must be positive"},
		{[]string{"--exit-code", "300"}, "out of range"},
		{[]string{"--exit-after", "-1s"}, "must not be negative"},
		{[]string{"--children", "1000"}, "out of range"},
		{[]string{"--alloc-mb", "-1"}, "out of range"},
		{[]string{"--alloc-mb", "5000"}, "out of range"},
		{[]string{"--stderr-lines", "-1"}, "out of range"},
		{[]string{"--hooks", "Stop,Pre Tool"}, "invalid event"},
		{[]string{"--hooks", "PreToolUse:$(rm)"}, "invalid argument"},
		{[]string{"extra"}, "unknown command"},
	}
	for _, tt := range tests {
		cmd := Command()
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%v] expected error containing %q, got %v", tt.args, tt.want, err)
		}
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
	}{
		{"SEGV", syscall.SIGSEGV}, {"SIGSEGV", syscall.SIGSEGV}, {"segv", syscall.SIGSEGV},
		{"11", syscall.SIGSEGV}, {" kill ", syscall.SIGKILL}, {"ABRT", syscall.SIGABRT},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("[%q] expected %v, got %v %v", tt.in, tt.want, got, err)
		}
	}
	for _, bad := range []string{"", "SIG", "0", "-1", "FOO"} {
		if _, err := parseSignal(bad); err == nil {
			t.Errorf("[%q] expected error, got nil", bad)
		}
	}
}

func TestParseScript(t *testing.T) {
	got, err := parseScript(" SessionStart, PreToolUse:Bash,,Notification:idle_prompt ")
	want := []hookStep{{"SessionStart", ""}, {"PreToolUse", "Bash"}, {"Notification", "idle_prompt"}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("[script] expected %v, got %v %v", want, got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[step %d] expected %v, got %v", i, want[i], got[i])
		}
	}
	p := (hookStep{"Notification", "idle_prompt"}).payload("s", "/w", 0)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	// Read as Claude's idle reminder: no activity, no progress.
	if sig, err := agents.ParseHook(herd.AgentClaude, b, "", time.Now()); err != nil || p.NotificationType != "idle_prompt" || p.ToolName != "" ||
		sig.Event != agents.HookNotification || sig.Activity != "" || sig.Progress || sig.Message != p.Message {
		t.Errorf("[notification payload] expected Claude's idle reminder, got %+v read as %+v (%v)", p, sig, err)
	}
}

func TestStreamerCycle(t *testing.T) {
	s := streamer{sessionID: "x"}
	var types []string
	for range 10 {
		o := agents.ParseLine(herd.AgentClaude, s.next(), time.Now())
		types = append(types, o.Event+":"+o.Tool)
	}
	want := "system/init: assistant:Bash user: assistant: assistant:Read user: assistant: assistant:Edit user: assistant:"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("[cycle] expected %s, got %s", want, got)
	}
	if o := agents.ParseLine(herd.AgentClaude, s.result(1, 0), time.Now()); !o.Final || o.AgentSessionID != "x" || o.Reason != agents.ReasonAPIError {
		t.Errorf("[result] expected final with session id, got %+v", o)
	}
	now := time.Now()
	if o := agents.ParseLine(herd.AgentClaude, s.result(1, 30*time.Second), now); !o.Final || o.Reason != agents.ReasonRateLimited ||
		o.ResetAt.Sub(now) < 29*time.Second || o.ResetAt.Sub(now) > 31*time.Second {
		t.Errorf("[rate limited result] expected a rate limit resetting in 30 s, got %+v", o)
	}
	if id := newSessionID(); len(id) != 36 || id[14] != '4' {
		t.Errorf("[session id] expected a v4 UUID, got %q", id)
	}
}

// TestWorkTurns: with --work each prompt (its lines, pasted at once) is
// one turn: UserPromptSubmit, the prompt committed to WORK.md in the
// working directory's repository, Stop.
func TestWorkTurns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if out, err := exec.Command("git", "init", "--quiet", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	log := filepath.Join(dir, "hooks.log")
	script := filepath.Join(dir, "herd")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '"+log+"'\ncat > /dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "--quiet", "--wait-input", "--work", "--interval", "1h", "--herd", script)
	cmd.Env = append(os.Environ(), "SIM_HELPER=1")
	cmd.Dir = repo
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	count := func() int {
		out, err := exec.Command("git", "-C", repo, "rev-list", "--count", "HEAD").Output()
		if err != nil {
			return 0
		}
		n := 0
		fmt.Sscan(string(out), &n)
		return n
	}
	if _, err := io.WriteString(stdin, "first task\nwith a second line\n"); err != nil {
		t.Fatal(err)
	}
	poll(t, "one commit", func() bool { return count() == 1 })
	if _, err := io.WriteString(stdin, "fix it\n"); err != nil {
		t.Fatal(err)
	}
	poll(t, "two commits", func() bool { return count() == 2 })
	b, _ := os.ReadFile(filepath.Join(repo, "WORK.md"))
	if want := "first task\nwith a second line\nfix it\n"; string(b) != want {
		t.Errorf("[WORK.md] expected %q, got %q", want, b)
	}
	poll(t, "four hooks", func() bool { b, _ := os.ReadFile(log); return strings.Count(string(b), "\n") >= 4 })
	b, _ = os.ReadFile(log)
	if want := "hook UserPromptSubmit\nhook Stop\nhook UserPromptSubmit\nhook Stop\n"; string(b) != want {
		t.Errorf("[hooks] expected %q, got %q", want, b)
	}
	if err := (&options{work: true, interval: time.Second}).validate(); err == nil {
		t.Errorf("[--work without --wait-input] expected an error")
	}
}
