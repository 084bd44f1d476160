package cgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/testenv"
)

// detect returns a Manager with a subtree of the test's own, or skips
// with the reason this host offers no writable cgroup.
func detect(t *testing.T) *Manager {
	t.Helper()
	name := fmt.Sprintf("herd-test-%d", os.Getpid())
	m, err := Detect(Options{Name: name})
	if err != nil {
		testenv.Require(t, "cgroup v2", err.Error(), testenv.InstallCgroup)
	}
	if !m.kill {
		testenv.Lacks(t, "cgroup.kill", "the kernel has no cgroup.kill: groups are frozen and killed process by process", testenv.InstallCgroup)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		incs, _ := m.List()
		for _, inc := range incs {
			if g, err := m.Open(inc); err == nil {
				_ = g.Remove(ctx)
			}
		}
		_ = syscall.Rmdir(m.Root())
	})
	t.Logf("containment: %s", m.Describe())
	return m
}

// startIn starts argv inside g from the first instruction (CgroupFD).
func startIn(t *testing.T, g *Group, marker string, argv ...string) *started {
	t.Helper()
	f, err := g.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return start(t, marker, &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}, argv...)
}

func TestCgroupStopsDetachedTree(t *testing.T) {
	m := detect(t)
	boot := bootID(t)
	fsys := proc.Real()
	marker := "inc-cg-tree"
	cleanupMarked(t, boot, marker)

	g, err := m.Create(marker, Limits{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	canary := start(t, "", nil, "sleep", "1000")
	canaryID, _ := fsys.Identify(canary.cmd.Process.Pid, boot)
	agent := startIn(t, g, marker, "sh", "-c", treeScript)

	waitFor(t, "52 processes in the cgroup", 15*time.Second, func() bool {
		return treeUp(boot, marker) && groupHolds(g, treeSize)
	})
	if pop, err := g.Populated(); err != nil || !pop {
		t.Fatalf("expected populated, got %v (%v)", pop, err)
	}

	const grace = 1 * time.Second
	begin := time.Now()
	killed, err := g.Stop(t.Context(), grace)
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("cgroup: stopped a tree of %d processes in %v (grace %v, killed: %v)", treeSize, took, grace, killed)
	if !killed {
		t.Error("expected the kill to be needed: the tree ignores SIGTERM")
	}
	if took > grace+time.Second {
		t.Errorf("expected the tree gone within grace + 1s, took %v", took)
	}
	if pids, _ := g.Procs(); len(pids) != 0 {
		t.Errorf("expected an empty cgroup, got %v", pids)
	}
	if left, _ := Marked(fsys, boot, marker); len(left) != 0 {
		t.Errorf("expected no marked process left, got %d", len(left))
	}
	select {
	case <-agent.reaped:
	case <-time.After(5 * time.Second):
		t.Error("expected the agent to have exited")
	}
	if got := fsys.Check(canaryID, boot); got != herd.Alive {
		t.Errorf("[canary] expected alive, got %s", got)
	}
	st, err := g.Stats()
	if err != nil || st.CPUUsage <= 0 {
		t.Errorf("expected CPU usage counted by the cgroup, got %+v (%v)", st, err)
	}
	if err := g.Remove(t.Context()); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Stat(g.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("expected %s removed, got %v", g.Path, err)
	}
	if err := g.Remove(t.Context()); err != nil {
		t.Errorf("expected a second remove to be a no-op, got %v", err)
	}
}

func TestCgroupAddAndReopen(t *testing.T) {
	m := detect(t)
	boot := bootID(t)
	fsys := proc.Real()
	g, err := m.Create("inc-add", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "inc-add", nil, "sleep", "1000")
	id, err := fsys.Identify(p.cmd.Process.Pid, boot)
	if err != nil {
		t.Fatal(err)
	}
	wrong := id
	wrong.StartTime++
	if err := g.Add(fsys, wrong, boot); !errors.Is(err, proc.ErrIdentityMismatch) {
		t.Fatalf("[wrong identity] expected ErrIdentityMismatch, got %v", err)
	}
	if err := g.Add(fsys, id, boot); err != nil {
		t.Fatalf("add: %v", err)
	}
	again, err := m.Open("inc-add")
	if err != nil {
		t.Fatal(err)
	}
	if pids, _ := again.Procs(); !slices.Equal(pids, []int{id.PID}) {
		t.Fatalf("expected the reopened group to hold pid %d, got %v", id.PID, pids)
	}
	if incs, _ := m.List(); !slices.Contains(incs, "inc-add") {
		t.Errorf("expected List to name inc-add, got %v", incs)
	}
	if _, err := m.Open("inc-missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("[missing] expected ErrNotExist, got %v", err)
	}
	if _, err := m.Create("../escape", Limits{}); err == nil {
		t.Error("[bad name] expected an error")
	}
	if err := again.Remove(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("expected Remove to kill what was left in the group")
	}
}

func TestCgroupMemoryMaxOOM(t *testing.T) {
	m := detect(t)
	if !m.Memory() {
		testenv.Skip(t, "cgroup v2 memory controller", fmt.Sprintf("not usable here (%s); memory_max falls back to the watchdog, tested by TestMarkedMemoryReal", m.Describe()))
	}
	g, err := m.Create("inc-oom", Limits{MemoryMax: 64 << 20, PidsMax: 100})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	f, err := g.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	hog := startHog(t, "inc-oom", &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}, 256)
	f.Close()
	select {
	case <-hog.reaped:
	case <-time.After(30 * time.Second):
		t.Fatal("expected the kernel to kill the hog past memory.max")
	}
	ws := hog.cmd.ProcessState.Sys().(syscall.WaitStatus)
	st, err := g.Stats()
	if err != nil || st.OOMKills == nil || *st.OOMKills < 1 || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("expected an OOM kill (SIGKILL, oom_kill >= 1), got status %v stats %+v (%v)", ws, st, err)
	}
}

func TestCgroupLimitsWithoutControllers(t *testing.T) {
	m := detect(t)
	g, err := m.Create("inc-limits", Limits{MemoryMax: 64 << 20, PidsMax: 10})
	switch {
	case m.Memory() && m.Pids():
		if err != nil {
			t.Fatalf("expected limits applied, got %v", err)
		}
		b, _ := os.ReadFile(filepath.Join(g.Path, "memory.max"))
		if strings.TrimSpace(string(b)) != fmt.Sprint(64<<20) {
			t.Errorf("expected memory.max 67108864, got %q", b)
		}
	default:
		if !errors.Is(err, ErrUnavailable) || g == nil {
			t.Fatalf("expected the group made and ErrUnavailable for the limits, got %v, %v", g, err)
		}
		t.Logf("limits not enforceable by the kernel here: %v", err)
	}
}

func TestParseMountinfo(t *testing.T) {
	cases := []struct {
		line, mp, fstype string
		ok               bool
	}{
		{"30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate", "/sys/fs/cgroup", "cgroup2", true},
		{"35 25 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw", "/sys/fs/cgroup/unified", "cgroup2", true},
		{"36 25 0:31 / /sys/fs/cgroup/memory rw,relatime shared:5 - cgroup cgroup rw,memory", "/sys/fs/cgroup/memory", "cgroup", true},
		{`40 25 0:40 / /mnt/with\040space rw - cgroup2 none rw`, "/mnt/with space", "cgroup2", true},
		{"garbage", "", "", false},
		{"1 2 3 4 5 6 -", "", "", false},
	}
	for _, c := range cases {
		mp, fs, ok := parseMountinfo(c.line)
		if mp != c.mp || fs != c.fstype || ok != c.ok {
			t.Errorf("[%q] expected (%q, %q, %v), got (%q, %q, %v)", c.line, c.mp, c.fstype, c.ok, mp, fs, ok)
		}
	}
}

func TestParseOwnCgroup(t *testing.T) {
	cases := []struct {
		content, want string
		ok            bool
	}{
		{"0::/\n", "/", true},
		{"0::/user.slice/user-1000.slice/user@1000.service/app.slice/herd.scope\n", "/user.slice/user-1000.slice/user@1000.service/app.slice/herd.scope", true},
		{"9:name=systemd:/\n4:memory:/x\n0::/\n", "/", true},
		{"4:memory:/x\n1:cpu:/\n", "", false},
		{"0::/../outside\n", "", false},
	}
	for _, c := range cases {
		got, err := parseOwnCgroup(c.content)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("[%q] expected (%q, ok=%v), got (%q, %v)", c.content, c.want, c.ok, got, err)
		}
		if err != nil && !errors.Is(err, ErrUnavailable) {
			t.Errorf("[%q] expected ErrUnavailable, got %v", c.content, err)
		}
	}
}

func TestParseKeyed(t *testing.T) {
	in := "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\nnr_periods 0\nbroken\noom_kill x\n"
	got, err := parseKeyed(bufio.NewScanner(strings.NewReader(in)))
	want := map[string]int64{"usage_usec": 1234, "user_usec": 1000, "system_usec": 234, "nr_periods": 0}
	if err != nil || len(got) != len(want) {
		t.Fatalf("expected %v, got %v (%v)", want, got, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("[%s] expected %d, got %d", k, v, got[k])
		}
	}
}

func TestDetectUnavailable(t *testing.T) {
	fake := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(fake, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("v1only/self/mountinfo", "36 25 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
	write("v1only/self/cgroup", "4:memory:/\n")
	write("nozero/self/mountinfo", "35 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	write("nozero/self/cgroup", "4:memory:/\n")
	write("plain/self/mountinfo", "")
	write("plain/self/cgroup", "0::/\n")
	notCgroupfs := t.TempDir() // a directory, but no cgroup files appear in it

	cases := []struct {
		name string
		opts Options
		says string
	}{
		{"no cgroup2 mounted", Options{ProcRoot: filepath.Join(fake, "v1only")}, "no cgroup2"},
		{"no 0:: line", Options{ProcRoot: filepath.Join(fake, "nozero")}, "no cgroup v2"},
		{"mount missing", Options{ProcRoot: filepath.Join(fake, "plain"), Mount: filepath.Join(fake, "absent")}, "cannot create"},
		{"not a cgroup file system", Options{ProcRoot: filepath.Join(fake, "plain"), Mount: notCgroupfs}, "not writable"},
		{"bad name", Options{ProcRoot: filepath.Join(fake, "plain"), Mount: notCgroupfs, Name: "a/b"}, "invalid name"},
	}
	for _, c := range cases {
		_, err := Detect(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("[%s] expected an error saying %q, got %v", c.name, c.says, err)
		}
	}
}

func TestCgroupFreezeKillFallback(t *testing.T) {
	// The path kernels older than 5.14 take, forced here.
	m := detect(t)
	old := *m
	old.kill = false
	boot := bootID(t)
	marker := "inc-freeze"
	cleanupMarked(t, boot, marker)
	g, err := old.Create(marker, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	agent := startIn(t, g, marker, "sh", "-c", treeScript)
	waitFor(t, "52 processes in the cgroup", 15*time.Second, func() bool {
		return treeUp(boot, marker) && groupHolds(g, treeSize)
	})
	begin := time.Now()
	if err := g.Kill(t.Context()); err != nil {
		t.Fatalf("freeze+kill: %v", err)
	}
	t.Logf("freeze+kill: %d processes gone in %v", treeSize, time.Since(begin))
	if pids, _ := g.Procs(); len(pids) != 0 {
		t.Fatalf("expected an empty cgroup, got %v", pids)
	}
	<-agent.reaped
	if b, _ := os.ReadFile(filepath.Join(g.Path, "cgroup.freeze")); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("expected the group thawed afterwards, got %q", b)
	}
}

func TestDetectInNonRootCgroup(t *testing.T) {
	// A daemon running in a cgroup of its own below the root (a delegated
	// systemd scope) gets its subtree beneath that cgroup.
	m := detect(t)
	own := filepath.Join(m.Root(), "daemon-scope")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(own, DefaultName)
	t.Cleanup(func() {
		_ = syscall.Rmdir(want)
		_ = syscall.Rmdir(own)
	})
	exe, _ := os.Executable()
	cmd := exec.Command(exe, own)
	cmd.Env = append(os.Environ(), envMode+"=nested")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nested detect: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("expected herd's subtree at %s, got %q", want, got)
	}
}
