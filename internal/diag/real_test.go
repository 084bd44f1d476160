package diag

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a small agent instead of running tests.
const (
	helperEnv     = "HERD_DIAG_TEST_HELPER"
	helperAddrEnv = "HERD_DIAG_TEST_ADDR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "dial":
		os.Exit(dialHelper())
	case "burn":
		os.Exit(burnHelper())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper")
		os.Exit(2)
	}
}

// dialHelper holds one TCP connection and one `sleep` child until stdin closes.
func dialHelper() int {
	conn, err := net.DialTimeout("tcp", os.Getenv(helperAddrEnv), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer conn.Close()
	child := exec.Command("sleep", "300")
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "sleep:", err)
		return 1
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// burnHelper spins on a CPU until stdin closes.
func burnHelper() int {
	go func() {
		x := 0
		for {
			x++
		}
	}()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// startHelper re-executes the test binary as helper kind and waits until it
// reports ready. The helper's process group is killed at cleanup.
func startHelper(t testing.TB, kind string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+kind), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("helper %s: %v (stderr: %s)", kind, err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("helper %s not ready after 10s", kind)
	}
	return cmd
}

func requireProc(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs linux /proc")
	}
}

func TestRealTCPEstablished(t *testing.T) {
	requireProc(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	helper := startHelper(t, "dial", helperAddrEnv+"="+ln.Addr().String())
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted after 10s")
	}

	c := Collector{}
	d, err := c.Collect(helper.Process.Pid, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The namespace table also lists the accepted end (ours) and the listener;
	// only the helper's own end belongs to its tree.
	if d.TCPEstablished != 1 {
		t.Errorf("[helper tree] expected tcp_established 1, got %d", d.TCPEstablished)
	}
	if len(d.Children) != 1 || d.Children[0].Comm != "sleep" || d.Children[0].PID <= 0 {
		t.Errorf("[helper tree] expected one sleep child, got %+v", d.Children)
	}
	// A Go program runs several threads; sleep runs one.
	if d.Threads < 3 || d.Threads > 500 {
		t.Errorf("[helper tree] expected 3..500 threads, got %d", d.Threads)
	}
	// stdin, stdout, stderr and the socket at least, in the helper alone.
	if d.FDs < 4 || d.FDs > 500 {
		t.Errorf("[helper tree] expected 4..500 fds, got %d", d.FDs)
	}
	if d.RSSBytes <= 0 || d.ProcState == "" || d.PID != helper.Process.Pid || d.StartTime == 0 {
		t.Errorf("[helper tree] expected rss, state and identity, got %+v", d)
	}

	// The child alone owns no socket, in a namespace that has three.
	kid, err := c.Collect(d.Children[0].PID, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if kid.TCPEstablished != 0 || len(kid.Children) != 0 || kid.Threads != 1 {
		t.Errorf("[sleep child] expected 0 tcp, no children, 1 thread, got %d %+v %d", kid.TCPEstablished, kid.Children, kid.Threads)
	}

	// This test process's tree holds the accepted end and, through the
	// helper, the dialled end; the listener does not count.
	self, err := c.Collect(os.Getpid(), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if self.TCPEstablished != 2 {
		t.Errorf("[test tree] expected tcp_established 2, got %d", self.TCPEstablished)
	}
}

// sampleUntil collects pid every 50ms from first until at least wall has
// passed and ok accepts the sample, or fails after 10s.
func sampleUntil(t *testing.T, pid int, first Diagnostics, wall time.Duration, ok func(Diagnostics) bool) Diagnostics {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last Diagnostics
	for time.Now().Before(deadline) {
		<-tick.C
		d, err := Collector{}.Collect(pid, &first, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		last = d
		if d.SampledAt.Sub(first.SampledAt) >= wall && ok(d) {
			return d
		}
	}
	t.Fatalf("pid %d: condition not met after 10s, last sample %+v", pid, last)
	return last
}

func TestRealCPUDelta(t *testing.T) {
	requireProc(t)
	burner := startHelper(t, "burn")
	first, err := Collector{}.Collect(burner.Process.Pid, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if first.CPUDelta != nil || first.CPUPercent != nil || CPUProgress(first) != ProgressUnknown {
		t.Errorf("[first sample] expected unknown delta, got %s", fmtPtr(first.CPUDelta))
	}
	d := sampleUntil(t, burner.Process.Pid, first, 300*time.Millisecond, func(d Diagnostics) bool {
		return d.CPUDelta != nil && *d.CPUDelta > 0
	})
	if CPUProgress(d) != ProgressYes || d.CPUPercent == nil || *d.CPUPercent <= 0 {
		t.Errorf("[burner] expected progress with a positive percentage, got %s %s", fmtPtr(d.CPUDelta), fmtPtr(d.CPUPercent))
	}

	sleeper := exec.Command("sleep", "300")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sleeper.Start(); err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	// Wait until it has finished starting up and sleeps.
	var asleep Diagnostics
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		asleep, err = Collector{}.Collect(sleeper.Process.Pid, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(asleep.ProcState, "S") || time.Now().After(deadline) {
			break
		}
		<-poll.C
	}
	if !strings.HasPrefix(asleep.ProcState, "S") {
		t.Fatalf("[sleeper] expected sleeping, got %q", asleep.ProcState)
	}
	d = sampleUntil(t, sleeper.Process.Pid, asleep, 300*time.Millisecond, func(Diagnostics) bool { return true })
	if CPUProgress(d) != ProgressNo || d.CPUPercent == nil || *d.CPUPercent > 5 {
		t.Errorf("[sleeper] expected no progress, got delta %s percent %s", fmtPtr(d.CPUDelta), fmtPtr(d.CPUPercent))
	}
}

func TestRealGoneProcess(t *testing.T) {
	requireProc(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no true binary: %v", err)
	}
	// The pid is reaped; unless it was reused in between, it is gone.
	if _, err := (Collector{}).Collect(cmd.Process.Pid, nil, time.Now()); err == nil {
		if _, statErr := os.Stat(fmt.Sprintf("/proc/%d", cmd.Process.Pid)); statErr != nil {
			t.Errorf("[gone pid] expected an error, got none")
		}
	}
}

func TestRealZombie(t *testing.T) {
	requireProc(t)
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no true binary: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	// Not reaped yet: it turns into a zombie, which must still be described.
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		d, err := Collector{}.Collect(cmd.Process.Pid, nil, time.Now())
		if err != nil {
			t.Fatalf("[zombie] expected no error, got %v", err)
		}
		if d.ProcState == "Z (zombie)" {
			if d.FDs != 0 || d.TCPEstablished != 0 {
				t.Errorf("[zombie] expected no fds, got %d fds %d tcp", d.FDs, d.TCPEstablished)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("[zombie] expected Z (zombie) within 10s, got %q", d.ProcState)
		}
		<-poll.C
	}
}
