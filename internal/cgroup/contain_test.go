package cgroup

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/testenv"
)

// containments returns the marker mode always, and the cgroup mode when
// the host allows it.
func containments(t *testing.T) map[Mode]*Containment {
	t.Helper()
	boot := bootID(t)
	out := map[Mode]*Containment{ModeMarker: {fs: proc.Real(), bootID: boot, why: "forced for the test"}}
	var logs bytes.Buffer
	c := New(slog.New(slog.NewTextHandler(&logs, nil)), Options{Name: "herd-test-contain"}, boot)
	t.Logf("detected %s; logged: %s", c.Describe(), strings.TrimSpace(logs.String()))
	if strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("expected one log line about containment, got %q", logs.String())
	}
	if c.Mode() == ModeCgroup {
		out[ModeCgroup] = c
		t.Cleanup(func() { _ = syscall.Rmdir(c.cg.Root()) })
	} else {
		testenv.Lacks(t, "cgroup v2", "cgroup mode not tested, the marker only: "+c.Describe(), testenv.InstallCgroup)
	}
	return out
}

func TestContainmentStop(t *testing.T) {
	boot := bootID(t)
	fsys := proc.Real()
	for mode, c := range containments(t) {
		inc := "inc-contain-" + string(mode)
		cleanupMarked(t, boot, inc)
		canary := start(t, "", nil, "sleep", "1000")
		canaryID, _ := fsys.Identify(canary.cmd.Process.Pid, boot)

		l, err := c.Prepare(inc, Limits{MemoryMax: 64 << 20})
		if err != nil {
			t.Fatalf("[%s] prepare: %v", mode, err)
		}
		if !c.KernelMemoryMax() && l.Unenforced == nil {
			t.Errorf("[%s] expected the unenforced memory_max reported", mode)
		}
		attr := &syscall.SysProcAttr{}
		l.Apply(attr)
		if (mode == ModeCgroup) != attr.UseCgroupFD {
			t.Errorf("[%s] expected UseCgroupFD=%v", mode, mode == ModeCgroup)
		}
		agent := start(t, inc, attr, "sh", "-c", treeScript)
		l.Close()
		waitFor(t, "the tree", 15*time.Second, func() bool {
			return treeUp(boot, inc)
		})
		u, err := c.Usage(inc)
		if err != nil || u.Memory <= 0 || u.Source != mode {
			t.Errorf("[%s] expected memory use from %s, got %+v (%v)", mode, mode, u, err)
		}

		const grace = time.Second
		rep, err := c.Stop(t.Context(), inc, grace)
		if err != nil {
			t.Fatalf("[%s] stop: %v", mode, err)
		}
		t.Logf("[%s] stopped a %d-process tree in %v (killed: %v, swept by marker: %d)", mode, treeSize, rep.Took, rep.Killed, rep.Swept)
		// grace + 1s on an idle machine (0.1 s past the grace measured);
		// a loaded one scans /proc far slower, hence the margin.
		if rep.Took > grace+3*time.Second || !rep.Killed {
			t.Errorf("[%s] expected a kill within grace + 3s, got %+v", mode, rep)
		}
		if mode == ModeCgroup && rep.Swept != 0 {
			t.Errorf("[%s] expected nothing outside the cgroup, swept %d", mode, rep.Swept)
		}
		if left, _ := Marked(fsys, boot, inc); len(left) != 0 {
			t.Errorf("[%s] expected nothing left, got %d", mode, len(left))
		}
		<-agent.reaped
		if got := fsys.Check(canaryID, boot); got != herd.Alive {
			t.Errorf("[%s] canary: expected alive, got %s", mode, got)
		}
		if l.CgroupPath != "" {
			if _, err := os.Stat(l.CgroupPath); !os.IsNotExist(err) {
				t.Errorf("[%s] expected the cgroup removed, got %v", mode, err)
			}
		}
		if c.OOMKilled(inc) {
			t.Errorf("[%s] expected no OOM reported", mode)
		}
	}
}

func TestExecInEntersCgroup(t *testing.T) {
	cs := containments(t)
	c, ok := cs[ModeCgroup]
	if !ok {
		testenv.Require(t, "cgroup v2", "no writable cgroup here", testenv.InstallCgroup)
	}
	l, err := c.Prepare("inc-execin", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, l.CgroupPath, "cat", "/proc/self/cgroup")
	cmd.Env = append(os.Environ(), envMode+"=execin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wrapper: %v: %s", err, out)
	}
	own, err := parseOwnCgroup(string(out))
	if err != nil || !strings.HasSuffix(l.CgroupPath, own) || own == "/" {
		t.Fatalf("expected the exec'd command inside %s, got %q", l.CgroupPath, out)
	}
	if removed, _ := c.RemoveStale(t.Context(), func(string) bool { return false }, time.Hour); len(removed) != 0 {
		t.Fatalf("expected a cgroup made just now kept … got %v removed", removed)
	}
	removed, err := c.RemoveStale(t.Context(), func(string) bool { return false }, 0)
	if err != nil || len(removed) != 1 || removed[0] != "inc-execin" {
		t.Fatalf("expected the empty stale cgroup removed, got %v (%v)", removed, err)
	}
	if err := ExecIn("", nil); err == nil {
		t.Error("expected an error for an empty command")
	}
}

func TestContainmentAfterCrash(t *testing.T) {
	// The agent dies on its own; its 51 descendants live on until the
	// crash path stops the incarnation.
	boot := bootID(t)
	fsys := proc.Real()
	for mode, c := range containments(t) {
		inc := "inc-crash-" + string(mode)
		cleanupMarked(t, boot, inc)
		l, err := c.Prepare(inc, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		attr := &syscall.SysProcAttr{}
		l.Apply(attr)
		agent := start(t, inc, attr, "sh", "-c", treeScript)
		l.Close()
		waitFor(t, "the tree", 15*time.Second, func() bool {
			return treeUp(boot, inc)
		})
		if err := agent.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-agent.reaped
		if ids, _ := Marked(fsys, boot, inc); len(ids) != treeSize-1 {
			t.Fatalf("[%s] expected %d orphans after the crash, got %d", mode, treeSize-1, len(ids))
		}
		rep, err := c.Stop(t.Context(), inc, time.Second)
		if err != nil {
			t.Fatalf("[%s] stop: %v", mode, err)
		}
		t.Logf("[%s] crash cleanup: %d orphans gone in %v", mode, treeSize-1, rep.Took)
		if left, _ := Marked(fsys, boot, inc); len(left) != 0 || rep.Took > 2*time.Second {
			t.Errorf("[%s] expected nothing left within grace + 1s, got %d left after %v", mode, len(left), rep.Took)
		}
	}
}
