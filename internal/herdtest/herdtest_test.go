package herdtest

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestLogProblems(t *testing.T) {
	expected := []*regexp.Regexp{regexp.MustCompile(`msg="store write failed"`)}
	for _, tc := range []struct {
		name, log string
		want      []string // substrings, one per problem
	}{
		{"clean", "time=x level=INFO msg=\"daemon starting\"\ntime=x level=WARN msg=\"launch failed\"\n", nil},
		{"recovered panic", "time=x level=ERROR msg=\"recovered from a panic; going on\" loop=prober panic=boom\n", []string{"a panic"}},
		{"unrecovered panic", "panic: runtime error: index out of range\n\ngoroutine 1 [running]:\n", []string{"a panic"}},
		{"fatal error", "fatal error: concurrent map writes\n", []string{"a panic"}},
		{"data race", "==================\nWARNING: DATA RACE\nWrite at 0x1 by goroutine 7:\n", []string{"a data race"}},
		{"unexpected error", "time=x level=ERROR msg=\"probe failed\"\n", []string{`an ERROR the test did not expect: time=x level=ERROR msg="probe failed"`}},
		{"expected error", "time=x level=ERROR msg=\"store write failed\" err=full\n", nil},
		{"expected never covers a panic", "time=x level=ERROR msg=\"recovered from a panic; going on\" msg=\"store write failed\"\n", []string{"a panic"}},
	} {
		got := LogProblems([]byte(tc.log), expected)
		if len(got) != len(tc.want) {
			t.Errorf("[%s] expected %d problems … got %q", tc.name, len(tc.want), got)
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("[%s] expected %q … got %q", tc.name, w, got[i])
			}
		}
	}
}

func TestScrub(t *testing.T) {
	in := []string{"PATH=/bin", "HERD_STATE_DIR=/home/u/.local/state/herd", "HERD_CONFIG=/etc/herd.toml", "HERD_SOCKET=/s",
		"TMUX=/tmp/tmux-1/default,1,0", "TMUX_PANE=%1", "TMUX_TMPDIR=/run/t", EnvSandbox + "=other/1", "HOME=/home/u"}
	want := []string{"PATH=/bin", "TMUX_TMPDIR=/run/t", "HOME=/home/u"}
	if got := Scrub(in); !slices.Equal(got, want) {
		t.Errorf("expected %q … got %q", want, got)
	}
}

func TestNamesSocket(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"tmux", "-L", "herdt1-2", "new-session"}, true},
		{[]string{"tmux", "-L", "herdt1-2-ui", "attach"}, true},
		{[]string{"tmux", "-L", "herdt1-23", "new-session"}, false},
		{[]string{"tmux", "-L", "herd"}, false},
	} {
		if got := namesSocket(tc.argv, "herdt1-2"); got != tc.want {
			t.Errorf("[%q] expected %v … got %v", tc.argv, tc.want, got)
		}
	}
}

// TestLeftovers: a process carrying the run's marker, or naming one of its
// tmux sockets, is a leftover; one of another run is not.
func TestLeftovers(t *testing.T) {
	start := func(env []string, args ...string) *exec.Cmd {
		// The shell stays (a command follows sleep) with args in its argv.
		cmd := exec.Command("sh", append([]string{"-c", "sleep 300; :"}, args...)...)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	marked := start([]string{EnvSandbox + "=" + Run + "/7"})
	named := start(nil, "-L", Run+"-7")
	other := start([]string{EnvSandbox + "=herdt1other/7"}, "-L", "herdt1other-7")
	pids := map[int]bool{}
	for _, p := range Leftovers() {
		pids[p.PID] = true
	}
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want bool
	}{{"marked", marked, true}, {"naming a socket of the run", named, true}, {"another run's", other, false}} {
		if got := pids[c.cmd.Process.Pid]; got != c.want {
			t.Errorf("[%s] expected a leftover: %v … got %v", c.name, c.want, got)
		}
	}
}
