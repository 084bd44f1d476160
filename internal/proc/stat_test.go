package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/herdtest"
)

func TestParseStat(t *testing.T) {
	tail := " 1 1234 1234 0 -1 4194304 0 0 0 0 7 3 0 0 20 0 2 0 98765 1000 42 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0"
	cases := []struct {
		name string
		in   string
		want Stat
		bad  bool
	}{
		{
			name: "plain",
			in:   "1234 (sleep) S" + tail,
			want: Stat{PID: 1234, PPID: 1, PGRP: 1234, Session: 1234, Comm: "sleep", State: 'S', UTime: 7, STime: 3, NumThreads: 2, StartTime: 98765, RSSPages: 42},
		},
		{
			name: "comm with spaces and parentheses",
			in:   "1234 (a) b (c)) Z" + tail,
			want: Stat{PID: 1234, PPID: 1, PGRP: 1234, Session: 1234, Comm: "a) b (c)", State: 'Z', UTime: 7, STime: 3, NumThreads: 2, StartTime: 98765, RSSPages: 42},
		},
		{
			name: "empty comm",
			in:   "1234 () R" + tail,
			want: Stat{PID: 1234, PPID: 1, PGRP: 1234, Session: 1234, Comm: "", State: 'R', UTime: 7, STime: 3, NumThreads: 2, StartTime: 98765, RSSPages: 42},
		},
		{name: "empty", in: "", bad: true},
		{name: "no parentheses", in: "1234 sleep S" + tail, bad: true},
		{name: "closing before opening", in: "1234 )sleep( S" + tail, bad: true},
		{name: "pid not a number", in: "x (sleep) S" + tail, bad: true},
		{name: "negative pid", in: "-3 (sleep) S" + tail, bad: true},
		{name: "truncated", in: "1234 (sleep) S 1 1234 1234 0", bad: true},
		{name: "state too long", in: "1234 (sleep) SS" + tail, bad: true},
		{name: "start time not a number", in: "1234 (sleep) S" + strings.Replace(tail, "98765", "9x", 1), bad: true},
		{name: "binary junk", in: "\x00\xff(\x01)\x02", bad: true},
	}
	for _, c := range cases {
		got, err := ParseStat([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("[%s] expected an error, got %+v", c.name, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%s] expected no error, got %v", c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] expected … got (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestFSStatFixture(t *testing.T) {
	f := newFakeProc(t)
	f.proc(fakeStat{pid: 1234, ppid: 1, comm: "a) b (c", start: 555})
	f.file(77, "stat", "77 (x) S 1 2\n")    // garbled: too short
	f.file(88, "stat", "99 (x) S"+f.tail()) // names another pid

	st, err := f.fs().Stat(1234)
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	if st.Comm != "a) b (c" || st.StartTime != 555 || st.PPID != 1 || st.State != 'S' {
		t.Errorf("expected comm %q start 555 ppid 1 state S, got %+v", "a) b (c", st)
	}

	if _, err := f.fs().Stat(77); err == nil || isNoProcess(err) {
		t.Errorf("[garbled] expected a parse error, got %v", err)
	}
	if _, err := f.fs().Stat(88); err == nil || isNoProcess(err) {
		t.Errorf("[other pid] expected a parse error, got %v", err)
	}
	_, err = f.fs().Stat(4321)
	if !isNoProcess(err) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("[absent] expected ErrNoProcess wrapping ErrNotExist, got %v", err)
	}
	_, err = FS{Root: filepath.Join(f.root, "nope")}.Stat(1234)
	if err == nil || isNoProcess(err) {
		t.Errorf("[no root] expected an error other than ErrNoProcess, got %v", err)
	}
	if _, err := f.fs().Stat(0); err == nil || isNoProcess(err) {
		t.Errorf("[pid 0] expected an error other than ErrNoProcess, got %v", err)
	}
}

// tail returns the fields after the state of a well-formed stat line.
func (f fakeProc) tail() string {
	line := fakeStat{pid: 1, comm: "x"}.line()
	return strings.TrimSuffix(line[strings.Index(line, ") S")+3:], "\n")
}

func TestEnvironCmdlineFixture(t *testing.T) {
	f := newFakeProc(t)
	f.file(10, "environ", "A=1\x00B=x=y\x00junk\x00=nokey\x00A=2\x00EMPTY=\x00")
	f.file(10, "cmdline", "/usr/bin/claude\x00--resume\x00\x00last\x00")
	f.file(11, "cmdline", "")

	env, err := f.fs().Environ(10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"A": "1", "B": "x=y", "EMPTY": ""}, env); diff != "" {
		t.Errorf("environ (-want +got):\n%s", diff)
	}
	argv, err := f.fs().Cmdline(10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/usr/bin/claude", "--resume", "", "last"}, argv); diff != "" {
		t.Errorf("cmdline (-want +got):\n%s", diff)
	}
	argv, err = f.fs().Cmdline(11)
	if err != nil || len(argv) != 0 {
		t.Errorf("[empty cmdline] expected no args, got %q, %v", argv, err)
	}
	if _, err := f.fs().Environ(12); !isNoProcess(err) {
		t.Errorf("[absent] expected ErrNoProcess, got %v", err)
	}
}

// TestEnvironReadWhole: environments and argument vectors larger than the
// first read buffer are read whole, with the marker at their end (each is
// read in one read(2): a read in pieces across an exec is cut short).
func TestEnvironReadWhole(t *testing.T) {
	pad := strings.Repeat("x", 100<<10)
	f := newFakeProc(t)
	f.file(10, "environ", "PAD="+pad+"\x00"+herd.EnvIncarnation+"=inc-big\x00")
	f.file(10, "cmdline", "agent\x00"+pad+"\x00last\x00")
	env, err := f.fs().Environ(10)
	if err != nil || env[herd.EnvIncarnation] != "inc-big" || env["PAD"] != pad {
		t.Errorf("[fixture] expected the whole environment, got %d entries, marker %q, %v", len(env), env[herd.EnvIncarnation], err)
	}
	argv, err := f.fs().Cmdline(10)
	if err != nil || len(argv) != 3 || argv[2] != "last" {
		t.Errorf("[fixture] expected 3 arguments ending in last, got %d, %v", len(argv), err)
	}

	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "PAD="+pad[:20<<10], herd.EnvIncarnation+"=inc-real")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	herdtest.AwaitExec(t, cmd.Process.Pid)
	ok, err := Real().HasEnv(cmd.Process.Pid, herd.EnvIncarnation, "inc-real")
	if err != nil || !ok {
		t.Errorf("[real] expected the marker at the end of a 20 KiB environment, got %v, %v", ok, err)
	}
}

func TestRealSelf(t *testing.T) {
	pid := os.Getpid()
	st, err := Real().Stat(pid)
	if err != nil {
		t.Fatalf("stat self: %v", err)
	}
	if st.PID != pid || st.PPID != os.Getppid() || st.State == 0 || st.StartTime == 0 || st.NumThreads < 1 {
		t.Errorf("expected a plausible stat of self, got %+v", st)
	}
	argv, err := Real().Cmdline(pid)
	if err != nil || len(argv) != len(os.Args) || argv[0] != os.Args[0] {
		t.Errorf("expected cmdline %q, got %q, %v", os.Args, argv, err)
	}
	env, err := Real().Environ(pid)
	if err != nil || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("expected PATH %q in environ, got %q, %v", os.Getenv("PATH"), env["PATH"], err)
	}

	bt, err := Real().BootTime()
	if err != nil {
		t.Fatalf("boot time: %v", err)
	}
	started := StartedAt(bt, st.StartTime)
	now := time.Now()
	if started.After(now.Add(2*time.Second)) || started.Before(now.Add(-10*time.Minute)) {
		t.Errorf("expected the test to have started within 10 minutes, got %v (now %v)", started, now)
	}
}

func TestStartedAt(t *testing.T) {
	boot := time.Unix(1000, 0)
	got := StartedAt(boot, 250)
	if want := time.Unix(1002, 500_000_000); !got.Equal(want) {
		t.Errorf("expected %v, got %v", want, got)
	}
	if ClockTicks() != 100 {
		t.Errorf("expected 100 ticks per second, got %d", ClockTicks())
	}
}

func TestBootID(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("  abc-123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Setenv(EnvBootIDFile, good)
	if id, err := BootID(); err != nil || id != "abc-123" {
		t.Errorf("[override] expected abc-123, got %q, %v", id, err)
	}
	t.Setenv(EnvBootIDFile, empty)
	if id, err := BootID(); err == nil {
		t.Errorf("[empty] expected an error, got %q", id)
	}
	t.Setenv(EnvBootIDFile, filepath.Join(dir, "missing"))
	if id, err := BootID(); err == nil {
		t.Errorf("[missing] expected an error, got %q", id)
	}
	t.Setenv(EnvBootIDFile, "")
	real, err := os.ReadFile(DefaultBootIDFile)
	if err != nil {
		t.Skipf("no kernel boot id: %v", err)
	}
	if id, err := BootID(); err != nil || id != strings.TrimSpace(string(real)) {
		t.Errorf("[kernel] expected %q, got %q, %v", strings.TrimSpace(string(real)), id, err)
	}
}
