package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/herdtest"
	"herd/internal/proc"
)

// envMode makes the test binary act as a helper process instead of
// running tests.
const envMode = "HERD_CGROUP_TEST_MODE"

func TestMain(m *testing.M) {
	switch os.Getenv(envMode) {
	case "hog":
		hog()
		return
	case "nested":
		// Move into the cgroup named by the first argument, as a daemon
		// in a delegated cgroup would be, and detect from there.
		if err := Enter(os.Args[1]); err != nil {
			fmt.Println("enter:", err)
			os.Exit(3)
		}
		m, err := Detect(Options{})
		if err != nil {
			fmt.Println("detect:", err)
			os.Exit(3)
		}
		fmt.Println(m.Root())
		os.Exit(0)
	case "execin":
		// Enter the cgroup named by the first argument and exec the rest.
		fmt.Fprintln(os.Stderr, ExecIn(os.Args[1], os.Args[2:]))
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// hog allocates HOG_MB megabytes, touching every page, reports on stdout,
// and then holds them until killed.
func hog() {
	var mb int
	fmt.Sscan(os.Getenv("HOG_MB"), &mb)
	chunks := make([][]byte, 0, mb)
	for range mb {
		c := make([]byte, 1<<20)
		for i := 0; i < len(c); i += 4096 {
			c[i] = 1
		}
		chunks = append(chunks, c)
	}
	fmt.Println("allocated", len(chunks))
	for {
		time.Sleep(time.Hour)
	}
}

// treeScript is an agent that forks 50 children and ignores SIGTERM (as do
// its children, which inherit the ignored disposition): 49 sleeps, and one
// shell that setsid's and double-forks a daemon.
const treeScript = `trap '' TERM
i=0
while [ $i -lt 49 ]; do sleep 1000 & i=$((i+1)); done
setsid sh -c "trap '' TERM; (sleep 1000 &); exec sleep 1000" &
wait`

// treeSize is how many processes treeScript makes once it settled: the
// agent and 51 sleeps (49, the setsid'd shell after its exec, and the
// double-forked daemon).
const treeSize = 52

// treeUp reports whether the tree of marker inc has settled: the agent
// shell and 51 sleeps, no transient subshell left.
func treeUp(boot, inc string) bool {
	fsys := proc.Real()
	ids, _ := Marked(fsys, boot, inc)
	if len(ids) != treeSize {
		return false
	}
	sleeps := 0
	for _, id := range ids {
		if st, err := fsys.Stat(id.PID); err == nil && st.Comm == "sleep" {
			sleeps++
		}
	}
	return sleeps == treeSize-1
}

// started is a process a test started and reaps.
type started struct {
	cmd    *exec.Cmd
	reaped chan struct{}
}

// start starts argv with HERD_INCARNATION=marker (none when empty) and
// attr, reaps it in the background and kills it (its group too) when the
// test ends.
func start(t *testing.T, marker string, attr *syscall.SysProcAttr, argv ...string) *started {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	if marker != "" {
		cmd.Env = append(cmd.Env, herd.EnvIncarnation+"="+marker)
	}
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid = true
	cmd.SysProcAttr = attr
	return startCmd(t, cmd)
}

// newTreeCmd returns the command of treeScript with marker inc.
func newTreeCmd(inc string, attr *syscall.SysProcAttr) *exec.Cmd {
	cmd := exec.Command("sh", "-c", treeScript)
	cmd.Env = append(os.Environ(), herd.EnvIncarnation+"="+inc)
	attr.Setpgid = true
	cmd.SysProcAttr = attr
	return cmd
}

// startCmd starts cmd, reaps it in the background and kills it (its group
// too) when the test ends.
func startCmd(t *testing.T, cmd *exec.Cmd) *started {
	t.Helper()
	argv := cmd.Args
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	herdtest.AwaitExec(t, cmd.Process.Pid)
	s := &started{cmd: cmd, reaped: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.reaped)
	}()
	t.Cleanup(func() {
		select {
		case <-s.reaped:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.reaped
		}
	})
	return s
}

// startHog starts this test binary as a process that allocates mb MiB
// and holds it.
func startHog(t *testing.T, marker string, attr *syscall.SysProcAttr, mb int) *started {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envMode, "hog")
	t.Setenv("HOG_MB", fmt.Sprint(mb))
	s := start(t, marker, attr, exe)
	os.Unsetenv(envMode)
	return s
}

// cleanupMarked kills, when the test ends, whatever still carries marker
// (a failed test must not leave 50 sleeps behind).
func cleanupMarked(t *testing.T, boot, marker string) {
	t.Cleanup(func() {
		ids, _ := Marked(proc.Real(), boot, marker)
		for _, id := range ids {
			_ = proc.Signal(proc.Real(), id, boot, syscall.SIGKILL)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	herdtest.WaitFor(t, what, limit, cond)
}

// bootID returns the current boot id or skips.
func bootID(t *testing.T) string {
	t.Helper()
	b, err := proc.BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	return b
}

// groupHolds reports whether g holds n processes.
func groupHolds(g *Group, n int) bool {
	pids, err := g.Procs()
	return err == nil && len(pids) == n
}
