package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"herd/internal/herdtest"
	"herd/internal/testenv"
)

// waitTimeout bounds every poll in these tests.
const waitTimeout = 10 * time.Second

var socketSeq atomic.Int64

// newClient returns a client on a private tmux server that is killed when the
// test ends.
func newClient(t testing.TB) *Client {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Require(t, "tmux", err.Error(), testenv.InstallTmux)
	}
	sock := fmt.Sprintf("herd-test-%d-%d", os.Getpid(), socketSeq.Add(1))
	c := &Client{Socket: sock, Timeout: 5 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.KillServer(ctx); err != nil && !errors.Is(err, ErrNoServer) {
			t.Errorf("kill server: %v", err)
		}
		// tmux leaves its socket file behind.
		dir := os.Getenv("TMUX_TMPDIR")
		if dir == "" {
			dir = "/tmp"
		}
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), sock))
	})
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// poll calls cond until it returns true, failing the test at the deadline.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, waitTimeout, cond)
}

// findPane lists panes and returns the row of session name.
func findPane(t testing.TB, c *Client, name string) (Pane, bool) {
	t.Helper()
	panes, err := c.ListPanes(ctxT(t))
	if err != nil {
		t.Fatalf("list panes: %v", err)
	}
	for _, p := range panes {
		if p.Err != nil {
			t.Fatalf("list panes: unexpected bad row: %v", p.Err)
		}
		if p.Session == name {
			return p, true
		}
	}
	return Pane{}, false
}

// waitExit waits until session name's pane is dead with its exit reported.
func waitExit(t testing.TB, c *Client, name string) Pane {
	t.Helper()
	var p Pane
	poll(t, name+" to die with an exit reported", func() bool {
		var ok bool
		p, ok = findPane(t, c, name)
		if !ok {
			t.Fatalf("session %s vanished: remain-on-exit not in effect", name)
		}
		return p.Dead && (p.DeadStatus != nil || p.DeadSignal != nil)
	})
	return p
}

func readFileEventually(t testing.TB, path string, want func([]byte) bool) []byte {
	t.Helper()
	var b []byte
	poll(t, path, func() bool {
		b, _ = os.ReadFile(path)
		return want(b)
	})
	return b
}

func TestNewSessionAliveWithPanePID(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	before := time.Now().Add(-time.Second).Truncate(time.Second)
	pid, err := c.NewSession(ctxT(t), "worker-0", t.TempDir(), nil, []string{"sleep", "30"})
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	p, ok := findPane(t, c, "worker-0")
	if !ok {
		t.Fatal("expected worker-0 in the listing … got none")
	}
	if p.Dead || p.PID != pid || p.Attached != 0 || !strings.HasPrefix(p.PaneID, "%") {
		t.Errorf("expected alive pane pid %d, detached … got %+v", pid, p)
	}
	if p.SessionCreated.Before(before) || p.WindowActivity.Before(before) || p.ServerPID <= 0 {
		t.Errorf("expected recent times and a server pid … got %+v", p)
	}
	// The pid is known before the child has exec'd: poll.
	readFileEventually(t, fmt.Sprintf("/proc/%d/comm", pid), func(b []byte) bool { return string(b) == "sleep\n" })
	if ok, err := c.HasSession(ctxT(t), "worker-0"); !ok || err != nil {
		t.Errorf("expected has-session true … got %v, %v", ok, err)
	}
}

func TestDeadPaneSignal(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	// Several at once: tmux sometimes misses a pane's exit status, which
	// ListPanes recovers.
	const n = 4
	pids := make([]int, n)
	for i := range n {
		pid, err := c.NewSession(ctxT(t), fmt.Sprintf("seg-%d", i), "", nil, []string{"sleep", "30"})
		if err != nil {
			t.Fatalf("new session: %v", err)
		}
		pids[i] = pid
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSEGV); err != nil {
			t.Fatalf("kill: %v", err)
		}
	}
	for i := range n {
		p := waitExit(t, c, fmt.Sprintf("seg-%d", i))
		if p.DeadSignal == nil || *p.DeadSignal != int(syscall.SIGSEGV) || p.DeadStatus != nil {
			t.Errorf("expected signal 11, no status … got %+v", p)
		}
	}
}

func TestDeadPaneExitCode(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := c.NewSession(ctxT(t), "exit3", "", nil, []string{"sh", "-c", "read x; exit 3"}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	if p, _ := findPane(t, c, "exit3"); p.Dead {
		t.Fatalf("expected alive before input … got %+v", p)
	}
	if err := c.SendText(ctxT(t), "exit3", "go", true); err != nil {
		t.Fatalf("send: %v", err)
	}
	p := waitExit(t, c, "exit3")
	if p.DeadStatus == nil || *p.DeadStatus != 3 || p.DeadSignal != nil {
		t.Errorf("expected status 3 … got %+v", p)
	}
}

func TestImmediateExitLeavesDeadPane(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 5 {
		name := fmt.Sprintf("quick-%d", i)
		if _, err := c.NewSession(ctxT(t), name, "", nil, []string{"sh", "-c", "exit 7"}); err != nil {
			t.Fatalf("new session %s: %v", name, err)
		}
		p := waitExit(t, c, name)
		if p.DeadStatus == nil || *p.DeadStatus != 7 {
			t.Errorf("[%s] expected status 7 … got %+v", name, p)
		}
	}
}

func TestExactTargets(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, name := range []string{"work-1", "work"} {
		if _, err := c.NewSession(ctxT(t), name, "", nil, []string{"sleep", "30"}); err != nil {
			t.Fatalf("new session %s: %v", name, err)
		}
	}
	if ok, err := c.HasSession(ctxT(t), "wor"); ok || err != nil {
		t.Errorf("expected no session 'wor' (no prefix match) … got %v, %v", ok, err)
	}
	if err := c.KillSession(ctxT(t), "work"); err != nil {
		t.Fatalf("kill work: %v", err)
	}
	if _, ok := findPane(t, c, "work"); ok {
		t.Error("expected work gone … got it listed")
	}
	if _, ok := findPane(t, c, "work-1"); !ok {
		t.Error("expected work-1 kept … got it killed")
	}
	if err := c.KillSession(ctxT(t), "work"); !errors.Is(err, ErrNoSession) {
		t.Errorf("expected ErrNoSession killing work again … got %v", err)
	}
	if _, err := c.Capture(ctxT(t), "work", 0); !errors.Is(err, ErrNoSession) {
		t.Errorf("expected ErrNoSession capturing work … got %v", err)
	}
	if _, err := c.NewSession(ctxT(t), "work-1", "", nil, []string{"sleep", "30"}); err == nil {
		t.Error("expected duplicate session error … got nil")
	}
}

func TestSendText(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if _, err := c.NewSession(ctxT(t), "cat", dir, nil, []string{"sh", "-c", "exec cat > out"}); err != nil {
		t.Fatalf("new session: %v", err)
	}

	small := "-n --help Enter ls;"
	if err := c.SendText(ctxT(t), "cat", small, true); err != nil {
		t.Fatalf("send small: %v", err)
	}
	want := small + "\n"
	got := readFileEventually(t, out, func(b []byte) bool { return len(b) >= len(want) })
	if string(got) != want {
		t.Fatalf("expected %q … got %q", want, got)
	}

	// 40 KiB of lines short enough for the terminal's line discipline.
	var big strings.Builder
	for i := 0; big.Len() < 40<<10; i++ {
		fmt.Fprintf(&big, "%05d -- naïve text ; #{x} \\ %s\n", i, strings.Repeat("z", 60))
	}
	if err := c.SendText(ctxT(t), "cat", big.String(), false); err != nil {
		t.Fatalf("send big: %v", err)
	}
	want += big.String()
	got = readFileEventually(t, out, func(b []byte) bool { return len(b) >= len(want) })
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("expected %d bytes sent intact … got %d bytes, first difference at %d",
			len(want), len(got), firstDiff(got, []byte(want)))
	}
	if err := c.SendText(ctxT(t), "nope", "x", true); !errors.Is(err, ErrNoSession) {
		t.Errorf("expected ErrNoSession … got %v", err)
	}
	if err := c.SendText(ctxT(t), "nope", big.String(), false); !errors.Is(err, ErrNoSession) {
		t.Errorf("expected ErrNoSession for a paste … got %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestCapture(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := c.NewSession(ctxT(t), "cap", "", nil, []string{"sh", "-c", "seq 1 100; echo hello-capture; exec sleep 30"}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	var out []byte
	poll(t, "captured text", func() bool {
		var err error
		out, err = c.Capture(ctxT(t), "cap", 0)
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		return bytes.Contains(out, []byte("hello-capture"))
	})
	if bytes.Contains(out, []byte("\n1\n")) {
		t.Errorf("expected only the visible screen … got history: %q", out)
	}
	hist, err := c.Capture(ctxT(t), "cap", 200)
	if err != nil || !bytes.HasPrefix(hist, []byte("1\n2\n")) {
		t.Errorf("expected history from line 1 … got %q, %v", hist, err)
	}
}

// TestCaptureEscapes: the escapes option keeps a pane's colours, the
// plain capture never has them.
func TestCaptureEscapes(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := c.NewSession(ctxT(t), "col", "", nil, []string{"sh", "-c", `printf '\033[31mred-text\033[0m plain\n'; exec sleep 30`}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	var pane string
	poll(t, "pane listed", func() bool {
		panes, err := c.ListPanes(ctxT(t))
		if err != nil || len(panes) == 0 {
			return false
		}
		pane = panes[0].PaneID
		return true
	})
	var col []byte
	poll(t, "coloured text", func() bool {
		var err error
		col, err = c.CapturePaneEscapes(ctxT(t), pane, 10)
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		return bytes.Contains(col, []byte("red-text"))
	})
	if !bytes.Contains(col, []byte("\x1b[31mred-text")) {
		t.Errorf("[escapes] expected the red SGR before the text … got %q", col)
	}
	plain, err := c.CapturePane(ctxT(t), pane, 10)
	if err != nil || bytes.Contains(plain, []byte("\x1b")) || !bytes.Contains(plain, []byte("red-text plain")) {
		t.Errorf("[plain] expected the text without escapes … got %q, %v", plain, err)
	}
}

func TestEnvWorkdirAndArgs(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	dir := filepath.Join(t.TempDir(), "wd #1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HERD_SESSION": "envtest", "HERD_ODD": "a b;#{session_name}"}
	script := `{ pwd; printf '%s\n' "$HERD_SESSION" "$HERD_ODD"; printf '%s|' "$@"; echo; } > out; exec sleep 30`
	argv := []string{"sh", "-c", script, "sh", "a;", `b\;`, ";", "#{pane_pid}", "-x"}
	if _, err := c.NewSession(ctxT(t), "env", dir, env, argv); err != nil {
		t.Fatalf("new session: %v", err)
	}
	want := dir + "\nenvtest\na b;#{session_name}\na;|b\\;|;|#{pane_pid}|-x|\n"
	got := readFileEventually(t, filepath.Join(dir, "out"), func(b []byte) bool { return bytes.HasSuffix(b, []byte("|\n")) })
	if string(got) != want {
		t.Errorf("expected %q … got %q", want, got)
	}
}

func TestSingleArgvIsNotAShellString(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "my agent;x")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran > \"$(dirname \"$0\")/out\"\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pid, err := c.NewSession(ctxT(t), "single", dir, nil, []string{script})
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	readFileEventually(t, filepath.Join(dir, "out"), func(b []byte) bool { return string(b) == "ran\n" })
	// The pane pid is the agent's own (env and sh exec'd in place).
	readFileEventually(t, fmt.Sprintf("/proc/%d/comm", pid), func(b []byte) bool { return string(b) == "sleep\n" })
}

func TestUnicodeNameInCLocale(t *testing.T) {
	// Not parallel: the locale is process-wide. Without -u, tmux replaces
	// the listing's tabs and non-ASCII bytes with '_' in this locale.
	t.Setenv("LC_ALL", "C")
	t.Setenv("LANG", "C")
	c := newClient(t)
	if _, err := c.NewSession(ctxT(t), "wörk 1", "", nil, []string{"sleep", "30"}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	if _, ok := findPane(t, c, "wörk 1"); !ok {
		t.Error("expected 'wörk 1' listed intact … got none")
	}
	if err := c.KillSession(ctxT(t), "wörk 1"); err != nil {
		t.Errorf("kill: %v", err)
	}
}

func TestNoServer(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := c.ListPanes(ctxT(t)); !errors.Is(err, ErrNoServer) {
		t.Errorf("expected ErrNoServer … got %v", err)
	}
	if ok, err := c.HasSession(ctxT(t), "x"); ok || err != nil {
		t.Errorf("expected false, nil … got %v, %v", ok, err)
	}
	if err := c.KillSession(ctxT(t), "x"); !errors.Is(err, ErrNoServer) {
		t.Errorf("expected ErrNoServer … got %v", err)
	}
}

func TestHungBinaryTimesOut(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "tmux")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nsleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	c := &Client{Binary: bin, Socket: "unused", Timeout: timeout}
	start := time.Now()
	_, err := c.ListPanes(context.Background())
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expected a deadline error … got %v", err)
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		t.Errorf("expected a *CallError … got %T", err)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("expected to return within %v … took %v", timeout+time.Second, elapsed)
	}
	// An earlier caller deadline wins over Timeout.
	c.Timeout = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start = time.Now()
	if _, err := c.HasSession(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("expected a deadline error … got %v", err)
	}
	if elapsed := time.Since(start); elapsed > timeout+time.Second {
		t.Errorf("expected the caller's deadline to apply … took %v", elapsed)
	}
}

func TestStderrInError(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := c.NewSession(ctxT(t), "a", "", nil, []string{"sleep", "30"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.NewSession(ctxT(t), "a", "", nil, []string{"sleep", "30"})
	var ce *CallError
	if !errors.As(err, &ce) || !strings.Contains(ce.Stderr, "duplicate session") ||
		!strings.Contains(err.Error(), "duplicate session") {
		t.Errorf("expected tmux's stderr in the error … got %v", err)
	}
	// The existing session was not touched by the failed call.
	if p, ok := findPane(t, c, "a"); !ok || p.Dead {
		t.Errorf("expected a alive … got %+v, %v", p, ok)
	}
}

// TestCallsSurviveLastSessionKill: regression — tmux exits when its last
// session is killed, and a call connected at that moment failed with
// "server exited unexpectedly" (a replacement's launch racing the kill of
// its predecessor's pane failed, and counted as a crash). Such a call is
// repeated. Each round kills the only session while listings and a launch
// start at staggered moments across the server's exit.
func TestCallsSurviveLastSessionKill(t *testing.T) {
	c := newClient(t)
	const callers = 8
	for round := range 60 {
		// A deadline per round: sixty rounds of a server's exit and
		// restart outlast one call's bound on a busy machine.
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if _, err := c.NewSession(ctx, "old", "", nil, []string{"sleep", "100"}); err != nil {
			t.Fatalf("round %d: launch old: %v", round, err)
		}
		errs := make(chan error, callers+1)
		go func() {
			err := c.KillSession(ctx, "old")
			if errors.Is(err, ErrNoServer) || errors.Is(err, ErrNoSession) {
				err = nil
			}
			errs <- err
		}()
		launcher := round % callers
		for i := range callers {
			go func() {
				time.Sleep(time.Duration(i) * 400 * time.Microsecond)
				var err error
				if i == launcher {
					_, err = c.NewSession(ctx, "new", "", nil, []string{"sleep", "100"})
				} else if _, err = c.ListPanes(ctx); errors.Is(err, ErrNoServer) {
					err = nil
				}
				errs <- err
			}()
		}
		for range callers + 1 {
			if err := <-errs; err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		if err := c.KillSession(ctx, "new"); err != nil && !errors.Is(err, ErrNoServer) {
			t.Fatalf("round %d: kill new: %v", round, err)
		}
	}
}

// TestListPanesOfEmptyServer: regression — between its last session's kill
// and its exit, a server answers list-panes -a with "no current target";
// that is an empty listing, not a failed one (which would make every
// session unknown and abort a reaper round). exit-empty off holds the
// server in that state.
func TestListPanesOfEmptyServer(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	if _, err := c.NewSession(ctx, "only", "", nil, []string{"sleep", "100"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.run(ctx, nil, []string{"set-option", "-s", "exit-empty", "off"}); err != nil {
		t.Fatal(err)
	}
	if err := c.KillSession(ctx, "only"); err != nil {
		t.Fatal(err)
	}
	panes, err := c.ListPanes(ctx)
	if err != nil || len(panes) != 0 {
		t.Fatalf("ListPanes of an empty server = %v, %v; want no panes, no error", panes, err)
	}
}

// TestPaneTargetsSurviveSplit: regression — input and captures addressed a
// session's active pane, so once a user split the agent's window and left
// the new pane active, inject typed into the user's shell and logs showed
// it. Addressed by pane id, they reach the pane launched with the session.
func TestPaneTargetsSurviveSplit(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	pid, err := c.NewSession(ctx, "agent", dir, nil, []string{"sh", "-c", "echo agent-screen; exec cat > agent.out"})
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	// The user's split: tmux makes the new pane active.
	if _, err := c.run(ctx, nil, []string{"split-window", "-t", target("agent"), "-c", dir, "sh", "-c", "echo user-screen; exec cat > user.out"}); err != nil {
		t.Fatalf("split: %v", err)
	}
	panes, err := c.ListPanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := FindPane(panes, "agent", pid)
	if !ok {
		t.Fatalf("expected the agent's pane (pid %d) listed … got %+v", pid, panes)
	}
	poll(t, "the split pane active and drawn", func() bool {
		out, err := c.Capture(ctx, "agent", 0)
		return err == nil && bytes.Contains(out, []byte("user-screen"))
	})

	if err := c.SendTextPane(ctx, p.PaneID, "typed-text", true); err != nil {
		t.Fatalf("send: %v", err)
	}
	big := strings.Repeat("pasted-line\n", 1000) // over maxSendKeys: a paste
	if err := c.SendTextPane(ctx, p.PaneID, big, false); err != nil {
		t.Fatalf("paste: %v", err)
	}
	want := "typed-text\n" + big
	got := readFileEventually(t, filepath.Join(dir, "agent.out"), func(b []byte) bool { return len(b) >= len(want) })
	if string(got) != want {
		t.Errorf("expected the agent's pane to get the text (%d bytes) … got %d bytes", len(want), len(got))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "user.out")); len(b) != 0 {
		t.Errorf("expected nothing typed into the user's pane … got %q", b)
	}
	// The echo of the paste scrolled the agent's first line into history.
	out, err := c.CapturePane(ctx, p.PaneID, 2000)
	if err != nil || !bytes.Contains(out, []byte("agent-screen")) || !bytes.Contains(out, []byte("typed-text")) ||
		bytes.Contains(out, []byte("user-screen")) {
		t.Errorf("expected the agent's screen captured … got %q, %v", out, err)
	}

	if err := c.SendTextPane(ctx, "agent", "x", false); err == nil {
		t.Error("expected a session name refused as a pane id … got nil")
	}
	if _, err := c.CapturePane(ctx, "%999", 0); !errors.Is(err, ErrNoPane) {
		t.Errorf("expected ErrNoPane capturing %%999 … got %v", err)
	}
}

// TestMissingSocketIsNoSocket: a server whose socket file was deleted (a
// /tmp cleaner) still runs, but calls cannot reach it; they fail with
// ErrNoSocket, which is also ErrNoServer. A server that exited leaves its
// socket: plain ErrNoServer.
func TestMissingSocketIsNoSocket(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := ctxT(t)
	if _, err := c.NewSession(ctx, "s", "", nil, []string{"sleep", "30"}); err != nil {
		t.Fatal(err)
	}
	p, ok := findPane(t, c, "s")
	if !ok {
		t.Fatal("expected s listed")
	}
	sock := socketPath(c)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	_, err := c.ListPanes(ctx)
	if !errors.Is(err, ErrNoSocket) || !errors.Is(err, ErrNoServer) {
		t.Errorf("expected ErrNoSocket (and ErrNoServer) … got %v", err)
	}
	// SIGUSR1 makes tmux recreate its socket; then kill the server.
	if err := syscall.Kill(p.ServerPID, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	poll(t, "socket recreated", func() bool { _, err := os.Stat(sock); return err == nil })
	if err := c.KillServer(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "server gone", func() bool { return syscall.Kill(p.ServerPID, 0) != nil })
	_, err = c.ListPanes(ctx)
	if !errors.Is(err, ErrNoServer) || errors.Is(err, ErrNoSocket) {
		t.Errorf("expected ErrNoServer, not ErrNoSocket, after the server exited … got %v", err)
	}
}

// socketPath is where the server of c listens.
func socketPath(c *Client) string {
	dir := os.Getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	return filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()), c.Socket)
}

// TestKillSessionOfPaneChecksPID: the pane pid check and the kill are one
// command: a session whose pane has another pid now (a relaunch under the
// same name, reusing the pane id on a new server) is left alone; the
// launched pane's session is killed; a gone pane's kill does nothing.
func TestKillSessionOfPaneChecksPID(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	pid, err := c.NewSession(ctx, "w-0", "", nil, []string{"sleep", "100"})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := findPane(t, c, "w-0")
	if !ok {
		t.Fatal("w-0 not listed")
	}
	if err := c.KillSessionOfPane(ctx, p.PaneID, pid+1); err != nil {
		t.Fatalf("another pid: %v", err)
	}
	if _, ok := findPane(t, c, "w-0"); !ok {
		t.Fatal("a session whose pane pid differs was killed")
	}
	// Keep the server up after w-0 goes, so the pane lookup below meets
	// a live server.
	if _, err := c.NewSession(ctx, "keep", "", nil, []string{"sleep", "100"}); err != nil {
		t.Fatal(err)
	}
	if err := c.KillSessionOfPane(ctx, p.PaneID, pid); err != nil {
		t.Fatalf("its own pid: %v", err)
	}
	if _, ok := findPane(t, c, "w-0"); ok {
		t.Fatal("the launched pane's session survived")
	}
	if err := c.KillSessionOfPane(ctx, p.PaneID, pid); err != nil {
		t.Errorf("a gone pane: expected nothing done, got %v", err)
	}
	if _, ok := findPane(t, c, "keep"); !ok {
		t.Error("a gone pane's kill touched another session")
	}
	if err := c.KillSessionOfPane(ctx, "w-0", pid); err == nil {
		t.Errorf("a name, not a pane id: expected an error")
	}
}

// TestKillSessionIfPanePIDChecksPID: the kill by name that needs no
// listing kills only the session whose pane pid is the one given.
func TestKillSessionIfPanePIDChecksPID(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	pid, err := c.NewSession(ctx, "w-0", "", nil, []string{"sleep", "100"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewSession(ctx, "keep", "", nil, []string{"sleep", "100"}); err != nil {
		t.Fatal(err)
	}
	if err := c.KillSessionIfPanePID(ctx, "w-0", pid+1); err != nil {
		t.Fatalf("another pid: %v", err)
	}
	if _, ok := findPane(t, c, "w-0"); !ok {
		t.Fatal("a session whose pane pid differs was killed")
	}
	if err := c.KillSessionIfPanePID(ctx, "w-0", pid); err != nil {
		t.Fatalf("its own pid: %v", err)
	}
	if _, ok := findPane(t, c, "w-0"); ok {
		t.Fatal("the launched pane's session survived")
	}
	if err := c.KillSessionIfPanePID(ctx, "w-0", pid); err != nil {
		t.Errorf("a gone session: expected nothing done … got %v", err)
	}
	if _, ok := findPane(t, c, "keep"); !ok {
		t.Error("a gone session's kill touched another session")
	}
	if err := c.KillSessionIfPanePID(ctx, "w-0", 0); err == nil {
		t.Errorf("no pid: expected an error")
	}
}

// TestEmptyServerAnswers: regression — a server with no session left
// (between its last session's kill and its exit; held there by exit-empty
// off) answers every targeted command with "no current target". That was
// no known kind, so HasSession failed instead of answering false (the
// reaper tests' flake: has-session right after the reaper killed the only
// session), and kills of what was already gone failed.
func TestEmptyServerAnswers(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	pid, err := c.NewSession(ctx, "only", "", nil, []string{"sleep", "100"})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := findPane(t, c, "only")
	if !ok {
		t.Fatal("expected the session listed")
	}
	if _, err := c.run(ctx, nil, []string{"set-option", "-s", "exit-empty", "off"}); err != nil {
		t.Fatal(err)
	}
	if err := c.KillSession(ctx, "only"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reach(ctx); err != nil {
		t.Fatalf("expected the empty server to answer show-options … got %v", err)
	}

	if ok, err := c.HasSession(ctx, "only"); ok || err != nil {
		t.Errorf("[has-session] expected false, nil … got %v, %v", ok, err)
	}
	if err := c.KillSession(ctx, "only"); !errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoServer) {
		t.Errorf("[kill-session] expected ErrNoSession, not ErrNoServer … got %v", err)
	}
	if err := c.KillSessionOfPane(ctx, p.PaneID, pid); err != nil && !errors.Is(err, ErrNoPane) {
		t.Errorf("[kill-session of pane] expected nil or ErrNoPane … got %v", err)
	}
	if _, err := c.CapturePane(ctx, p.PaneID, 10); !errors.Is(err, ErrNoPane) {
		t.Errorf("[capture-pane] expected ErrNoPane … got %v", err)
	}
	if err := c.SendText(ctx, "only", "x", false); !errors.Is(err, ErrNoSession) {
		t.Errorf("[send-keys] expected ErrNoSession … got %v", err)
	}
	if panes, err := c.ListPanes(ctx); err != nil || len(panes) != 0 {
		t.Errorf("[list-panes] expected no panes, no error … got %v, %v", panes, err)
	}
}

// TestListSession: a listing of one session names its panes only, even
// beside a session whose name it prefixes; a session that does not exist
// is a good, empty listing; no server is ErrNoServer.
func TestListSession(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	if _, err := c.ListSession(ctx, "w-1"); !errors.Is(err, ErrNoServer) {
		t.Errorf("[no server] expected ErrNoServer, got %v", err)
	}
	for _, name := range []string{"w-1", "w-10"} {
		if _, err := c.NewSession(ctx, name, t.TempDir(), nil, []string{"sleep", "100"}); err != nil {
			t.Fatal(err)
		}
	}
	panes, err := c.ListSession(ctx, "w-1")
	if err != nil || len(panes) != 1 || panes[0].Session != "w-1" || panes[0].Err != nil {
		t.Errorf("[w-1] expected its one pane, got %+v (%v)", panes, err)
	}
	if panes, err := c.ListSession(ctx, "w-2"); err != nil || len(panes) != 0 {
		t.Errorf("[no such session] expected an empty listing, got %+v (%v)", panes, err)
	}
}
