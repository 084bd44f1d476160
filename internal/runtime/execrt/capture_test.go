package execrt

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/proc"
)

// Test binary modes: the capture process, and a launcher that starts an
// agent through a Runtime and exits at once, as a daemon that dies does.
const (
	envCapture  = "HERD_TEST_EXECRT_CAPTURE"
	envLauncher = "HERD_TEST_EXECRT_LAUNCHER"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envCapture) != "":
		os.Exit(RunCapture(os.Args[1:], os.Stderr))
	case os.Getenv(envLauncher) != "":
		os.Exit(runLauncher(os.Getenv(envLauncher), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// captured returns a Runtime whose capture process is this test binary.
func captured(t *testing.T, maxBytes int64) *Runtime {
	return &Runtime{LogDir: t.TempDir(), MaxLogBytes: maxBytes,
		CaptureCommand: []string{os.Args[0]}, CaptureEnv: []string{envCapture + "=1"}}
}

// runLauncher launches argv as session s-0, incarnation inc1, under
// logDir, prints the agent's pid and returns without waiting.
func runLauncher(logDir string, argv []string) int {
	r := &Runtime{LogDir: logDir, CaptureCommand: []string{os.Args[0]}, CaptureEnv: []string{envCapture + "=1"}}
	os.Unsetenv(envLauncher)
	p, err := r.Launch(context.Background(), Spec{Session: "s-0", Incarnation: "inc1", Argv: argv,
		Env: map[string]string{herd.EnvIncarnation: "inc1"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p.PID)
	return 0
}

// poll calls cond until it returns true, failing the test after d.
func poll(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, d, cond)
}

// size is the size of path on disk, 0 when missing.
func size(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// TestRotatingFileNeverPassesTheCap writes a stream in chunks of many sizes
// and checks, after every write, that neither file is over the cap and
// that the two files hold the end of the stream, in order.
func TestRotatingFileNeverPassesTheCap(t *testing.T) {
	const capBytes = 4096
	tests := []struct {
		name  string
		chunk func(*rand.Rand) int
	}{
		{"one byte", func(*rand.Rand) int { return 1 }},
		{"exactly the cap", func(*rand.Rand) int { return capBytes }},
		{"just over the cap", func(*rand.Rand) int { return capBytes + 1 }},
		{"several caps at once", func(*rand.Rand) int { return 5*capBytes + 17 }},
		{"random", func(r *rand.Rand) int { return 1 + r.IntN(3*capBytes) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.stdout")
			w := &RotatingFile{Path: path, MaxBytes: capBytes}
			defer w.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			var stream []byte
			for len(stream) < 20*capBytes {
				b := make([]byte, tt.chunk(rng))
				for i := range b {
					b[i] = byte('a' + (len(stream)+i)%26)
				}
				if n, err := w.Write(b); err != nil || n != len(b) {
					t.Fatalf("[%s] write %d: %d, %v", tt.name, len(b), n, err)
				}
				stream = append(stream, b...)
				cur, rot := size(path), size(path+".1")
				if cur > capBytes || rot > capBytes {
					t.Fatalf("[%s] expected both files within %d bytes … got %d and %d", tt.name, capBytes, cur, rot)
				}
				got := append(readOrEmpty(path+".1"), readOrEmpty(path)...)
				if !bytes.HasSuffix(stream, got) {
					t.Fatalf("[%s] expected the files to hold the end of the stream", tt.name)
				}
				if len(stream) >= capBytes && len(got) < capBytes {
					t.Fatalf("[%s] expected at least the last %d bytes kept … got %d", tt.name, capBytes, len(got))
				}
			}
		})
	}
}

func readOrEmpty(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// TestRotatingFileResumesExistingFile: a capture process appending to a
// file that is already full (a relaunch of the same incarnation's files)
// rotates it before writing.
func TestRotatingFileResumesExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.stdout")
	if err := os.WriteFile(path, bytes.Repeat([]byte("o"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &RotatingFile{Path: path, MaxBytes: 64}
	defer w.Close()
	if _, err := w.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if got := string(readOrEmpty(path)); got != "new" {
		t.Errorf("expected the over-full file rotated away … got %q", got)
	}
	if size(path+".1") != 100 {
		t.Errorf("expected the old file as .1 … got %d bytes", size(path+".1"))
	}
}

// TestCaptureFloodStaysUnderCap: regression — an exec agent writing 1 GB
// grew its capture file to 674 MB on disk before the daemon cut it back to
// the cap. Through the capture process, the files are sampled all through
// the flood and never pass the cap; the readers find the end of the
// output; and no more files than the current and the rotated one exist.
func TestCaptureFloodStaysUnderCap(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GB flood")
	}
	const flood = 1 << 30
	r := captured(t, DefaultMaxLogBytes)
	script := fmt.Sprintf(`yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c %d; echo; echo the end; head -c %d /dev/zero >&2; echo >&2; echo err-end >&2`, flood, 64<<20)
	start := time.Now()
	p := launch(t, r, "sh", "-c", script)
	outPath, errPath := r.Paths("s-0", "inc1")
	dir := filepath.Dir(outPath)

	var (
		mu              sync.Mutex
		maxOut, maxErr  int64
		maxDir, samples int64
		extraFiles      []string
		stop            = make(chan struct{})
		samplerDone     = make(chan struct{})
		allowed         = []string{"inc1.stdout", "inc1.stdout.1", "inc1.stderr", "inc1.stderr.1"}
		sampleEvery     = time.Millisecond
	)
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(sampleEvery):
			}
			var total int64
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				info, err := e.Info()
				if err != nil {
					continue
				}
				total += info.Size()
				if !slices.Contains(allowed, e.Name()) {
					mu.Lock()
					extraFiles = append(extraFiles, e.Name())
					mu.Unlock()
				}
			}
			o, e := size(outPath), size(errPath)
			mu.Lock()
			maxOut, maxErr, maxDir = max(maxOut, o), max(maxErr, e), max(maxDir, total)
			samples++
			mu.Unlock()
		}
	}()
	exit := p.Wait()
	select {
	case <-p.Captured():
	case <-time.After(time.Minute):
		t.Fatal("the capture process did not exit after the agent")
	}
	close(stop)
	<-samplerDone
	took := time.Since(start)
	if exit.Code == nil || *exit.Code != 0 {
		t.Fatalf("expected the flood to end with code 0 … got %+v", exit)
	}
	t.Logf("1 GiB + 64 MiB through the capture in %v; %d samples; largest stdout %d, stderr %d, directory %d bytes",
		took, samples, maxOut, maxErr, maxDir)
	if samples < 10 {
		t.Errorf("expected the flood sampled many times … got %d samples", samples)
	}
	if maxOut > DefaultMaxLogBytes || maxErr > DefaultMaxLogBytes {
		t.Errorf("expected each file within the cap %d at every sample … got stdout %d, stderr %d", DefaultMaxLogBytes, maxOut, maxErr)
	}
	if maxDir > 4*DefaultMaxLogBytes {
		t.Errorf("expected the directory within 4 caps … got %d", maxDir)
	}
	if len(extraFiles) > 0 {
		t.Errorf("expected only current and rotated files … also saw %v", extraFiles)
	}
	if got, err := ReadTail(outPath, 1); err != nil || string(got) != "the end\n" {
		t.Errorf("expected the last stdout line … got %.80q, %v", got, err)
	}
	if got, err := ReadTail(errPath, 1); err != nil || string(got) != "err-end\n" {
		t.Errorf("expected the last stderr line … got %.80q, %v", got, err)
	}
	if got, err := ReadTail(outPath, 3); err != nil || !strings.HasSuffix(string(got), "\nthe end\n") ||
		!strings.HasPrefix(string(got), "0123456789") || strings.Count(string(got), "\n") != 3 {
		t.Errorf("expected the flood's last two lines and the end … got %.80q, %v", got, err)
	}
	all, err := ReadTail(outPath, 0)
	if err != nil || int64(len(all)) > 2*DefaultMaxLogBytes || int64(len(all)) < DefaultMaxLogBytes {
		t.Errorf("expected all of the output to be between one and two caps … got %d, %v", len(all), err)
	}
}

// TestCaptureOutlivesTheLauncher: the agent and its capture process
// outlive the process that launched them (a daemon killed or restarted),
// output written afterwards is still captured, and once the agent is gone
// the capture process ends too. The capture process does not carry the
// agent's incarnation marker: it is not the agent.
func TestCaptureOutlivesTheLauncher(t *testing.T) {
	logDir := t.TempDir()
	agent := `i=0; while :; do echo "line $i"; i=$((i+1)); sleep 0.02; done`
	cmd := exec.Command(os.Args[0], "sh", "-c", agent)
	cmd.Env = append(os.Environ(), envLauncher+"="+logDir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("launcher: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("launcher printed %q", out)
	}
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	fs := proc.Real()
	id, err := fs.Identify(pid, boot)
	if err != nil || id.Marker != "inc1" {
		t.Fatalf("expected the agent alive with its marker after the launcher exited … got %+v, %v", id, err)
	}
	t.Cleanup(func() { _ = proc.Signal(fs, id, boot, unix.SIGKILL) })

	r := &Runtime{LogDir: logDir}
	outPath, _ := r.Paths("s-0", "inc1")
	lines := func() int { return bytes.Count(readOrEmpty(outPath), []byte("\n")) }
	after := lines()
	poll(t, 10*time.Second, "output written after the launcher exited", func() bool { return lines() >= after+5 })

	capturePID := findCapture(t, outPath)
	if capturePID == 0 {
		t.Fatal("expected a capture process for the agent's files")
	}
	if env, err := fs.Environ(capturePID); err == nil && env[herd.EnvIncarnation] != "" {
		t.Errorf("expected the capture process without %s … got %q", herd.EnvIncarnation, env[herd.EnvIncarnation])
	}
	if sid, _ := unix.Getsid(capturePID); sid != capturePID {
		t.Errorf("expected the capture process in its own session … sid %d", sid)
	}

	if err := proc.Signal(fs, id, boot, unix.SIGKILL); err != nil {
		t.Fatalf("kill the agent: %v", err)
	}
	poll(t, 10*time.Second, "the capture process to end after the agent", func() bool {
		st, err := fs.Stat(capturePID)
		return err != nil || st.Zombie()
	})
}

// findCapture returns the pid of a live capture process writing path, or 0.
func findCapture(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, err := proc.Real().Cmdline(pid)
		if err == nil && len(argv) > 0 && argv[0] == os.Args[0] && slices.Contains(argv, path) {
			return pid
		}
	}
	return 0
}

// TestCaptureBadArguments: the capture process refuses what Launch never
// writes, with a message and code 2.
func TestCaptureBadArguments(t *testing.T) {
	tests := [][]string{
		nil,
		{"--stdout", "/x"},
		{"--stdout", "/x", "--stderr", "/y", "--max-bytes", "0"},
		{"--stdout", "/x", "--stderr", "/y", "extra"},
		{"--bogus"},
	}
	for _, args := range tests {
		var errOut bytes.Buffer
		if code := RunCapture(args, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("[%q] expected code 2 and a message … got %d, %q", args, code, errOut.String())
		}
	}
}

// TestCaptureStartFailureLeavesNothing: when the agent cannot start, the
// capture process sees its pipes close and exits.
func TestCaptureStartFailureLeavesNothing(t *testing.T) {
	r := captured(t, DefaultMaxLogBytes)
	_, err := r.Launch(context.Background(), Spec{Session: "s-0", Incarnation: "inc1", Argv: []string{"/nonexistent/agent"}})
	if err == nil {
		t.Fatal("expected a start error")
	}
	outPath, _ := r.Paths("s-0", "inc1")
	poll(t, 10*time.Second, "no capture process left", func() bool { return findCapture(t, outPath) == 0 })
}

// TestFlushedUntilTheCaptureExits: while an agent's output goes through
// the capture process, Flushed gives a channel that closes once every byte
// is in the files; after that, nothing to wait for.
func TestFlushedUntilTheCaptureExits(t *testing.T) {
	r := captured(t, 0)
	p, err := r.Launch(context.Background(), Spec{Session: "s-0", Incarnation: "inc-f", Argv: []string{"sh", "-c", "sleep 0.2; echo last"}})
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Flushed("inc-f")
	if ch == nil {
		t.Fatal("[running] expected a channel to wait on, got nil")
	}
	p.Wait()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("[ended] expected the channel closed once the capture exited")
	}
	out, _ := r.Paths("s-0", "inc-f")
	if b, _ := os.ReadFile(out); string(b) != "last\n" {
		t.Errorf("[flushed] expected the last line in the file, got %q", b)
	}
	poll(t, 5*time.Second, "the channel forgotten", func() bool { return r.Flushed("inc-f") == nil })
	if (*Runtime)(nil).Flushed("x") != nil || r.Flushed("never-launched") != nil {
		t.Error("[unknown] expected nil")
	}
}
