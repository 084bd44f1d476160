package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/internal/herdtest"
)

// fakeProc is a fixture proc tree under a temporary directory.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) fakeProc {
	t.Helper()
	return fakeProc{t: t, root: t.TempDir()}
}

func (f fakeProc) fs() FS { return FS{Root: f.root} }

// file writes <root>/<pid>/<name>.
func (f fakeProc) file(pid int, name, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, fmt.Sprint(pid), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// proc writes a stat file (and an environ with marker, when not empty).
func (f fakeProc) proc(p fakeStat) {
	f.t.Helper()
	f.file(p.pid, "stat", p.line())
	env := "PATH=/bin\x00"
	if p.marker != "" {
		env += "HERD_INCARNATION=" + p.marker + "\x00"
	}
	f.file(p.pid, "environ", env)
	argv := p.argv
	if argv == "" {
		argv = p.comm + "\x00"
	}
	f.file(p.pid, "cmdline", argv)
}

// unreadableEnviron replaces the environ file of pid by a directory, so
// reading it fails with an error other than "does not exist" even as root.
func (f fakeProc) unreadableEnviron(pid int) {
	f.t.Helper()
	p := filepath.Join(f.root, fmt.Sprint(pid), "environ")
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		f.t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// fakeStat describes one fixture process.
type fakeStat struct {
	pid, ppid, pgrp int
	comm            string
	state           byte
	start           uint64
	threads         int // defaults to 1
	marker          string
	argv            string // NUL-separated; defaults to comm
}

// line renders a /proc/<pid>/stat line with all 52 fields.
func (p fakeStat) line() string {
	state := p.state
	if state == 0 {
		state = 'S'
	}
	pgrp := p.pgrp
	if pgrp == 0 {
		pgrp = p.pid
	}
	f := make([]string, 52)
	for i := range f {
		f[i] = "0"
	}
	f[0] = fmt.Sprint(p.pid)
	f[1] = "(" + p.comm + ")"
	f[2] = string(state)
	f[3] = fmt.Sprint(p.ppid)
	f[4] = fmt.Sprint(pgrp)
	f[5] = fmt.Sprint(pgrp)
	f[13] = "7" // utime
	f[14] = "3" // stime
	f[19] = "1" // threads
	if p.threads > 0 {
		f[19] = fmt.Sprint(p.threads)
	}
	f[21] = fmt.Sprint(p.start)
	f[23] = "42" // rss
	return strings.Join(f, " ") + "\n"
}

// startCmd starts a real process, reaps it in the background as soon as it
// exits (done is closed then), and kills it when the test ends.
func startCmd(t *testing.T, marker string, setpgid bool, name string, args ...string) (cmd *exec.Cmd, done <-chan struct{}) {
	t.Helper()
	cmd = exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "HERD_INCARNATION="+marker)
	if setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	reaped := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(reaped)
	}()
	herdtest.AwaitExec(t, cmd.Process.Pid)
	t.Cleanup(func() {
		// The group id stays reserved while the unreaped leader exists,
		// so killing the group cannot hit a stranger.
		select {
		case <-reaped:
		default:
			if setpgid {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}
		_ = cmd.Process.Kill()
		<-reaped
	})
	return cmd, reaped
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, 10*time.Second, cond)
}

// isNoProcess reports whether err says the process is gone.
func isNoProcess(err error) bool { return errors.Is(err, ErrNoProcess) }
