package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDecodeWaitStatus(t *testing.T) {
	cases := []struct {
		ws   int
		want Exit
	}{
		{0, Exit{}},
		{1 << 8, Exit{Code: 1}},
		{199 << 8, Exit{Code: 199}},
		{11, Exit{Signal: 11}},
		{11 | 0x80, Exit{Signal: 11, Core: true}},
		{9, Exit{Signal: 9}},
	}
	for _, c := range cases {
		if got := DecodeWaitStatus(c.ws); got != c.want {
			t.Errorf("[%#x] expected %+v, got %+v", c.ws, c.want, got)
		}
	}
}

// listenExits opens the proc connector, or skips where the kernel refuses
// it to this process (no CAP_NET_ADMIN, not the initial namespaces).
func listenExits(t *testing.T) *Exits {
	t.Helper()
	e, err := OpenExits()
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || os.Geteuid() != 0 {
			t.Skipf("the proc connector is not open to this process: %v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("exits: %v", err)
		}
	})
	return e
}

// launcherLike runs a launcher the way Gemini CLI's behaves: it starts a
// child, prints the child's pid, and turns the child's death into an
// exit code of its own (1). The child ends as script says.
func launcherLike(t *testing.T, script string) (childPID int, launcher *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `sh -c 'echo $$; `+script+`' & wait $!; exit 1`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return pid, cmd
}

// TestExitsTellsTheChildsSignal: a child killed by SIGSEGV under a
// launcher that exits 1 is reported killed by SIGSEGV, and one that exits
// 199 with 199; the launcher's own status says 1 either way.
func TestExitsTellsTheChildsSignal(t *testing.T) {
	e := listenExits(t)
	cases := []struct {
		name, script string
		want         Exit
	}{
		{"segv", `kill -SEGV $$`, Exit{Signal: int(unix.SIGSEGV)}},
		{"kill", `kill -KILL $$`, Exit{Signal: int(unix.SIGKILL)}},
		{"relaunch code", `exit 199`, Exit{Code: 199}},
	}
	for _, c := range cases {
		since := time.Now()
		pid, cmd := launcherLike(t, c.script)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("[%s] the launcher: expected exit 1, got %v", c.name, err)
		}
		got, ok := e.Lookup(context.Background(), pid, since, 5*time.Second)
		got.Core = false // whether a core is dumped is the host's setting
		if !ok || got != c.want {
			t.Errorf("[%s] expected %+v, got %+v (reported %v)", c.name, c.want, got, ok)
		}
	}
}

// TestExitsFiltered: on kernels that filter the connector's events (6.6
// and later), the socket gets exits only, not the forks and execs of
// every process of the host.
func TestExitsFiltered(t *testing.T) {
	var u unix.Utsname
	_ = unix.Uname(&u)
	var major, minor int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	if major < 6 || major == 6 && minor < 6 {
		t.Skipf("kernel %d.%d does not filter the connector's events", major, minor)
	}
	e := listenExits(t)
	since := time.Now()
	pid, cmd := launcherLike(t, "exit 3")
	cmd.Wait()
	if x, ok := e.Lookup(context.Background(), pid, since, 5*time.Second); !ok || x.Code != 3 {
		t.Fatalf("expected the child's exit 3, got %+v %v", x, ok)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.others != 0 {
		t.Errorf("expected exits only, got %d other events", e.others)
	}
}

// TestExitsLookupIgnoresEarlierExits: an exit reported before since is
// another process's that had the pid.
func TestExitsLookupIgnoresEarlierExits(t *testing.T) {
	e := &Exits{byPID: map[int]exitRecord{}, changed: make(chan struct{})}
	e.add(42, Exit{Code: 3}, time.Now().Add(-time.Minute))
	if _, ok := e.Lookup(context.Background(), 42, time.Now().Add(-time.Second), 10*time.Millisecond); ok {
		t.Error("an exit older than since was taken")
	}
	go e.add(42, Exit{Signal: 11}, time.Now())
	if got, ok := e.Lookup(context.Background(), 42, time.Now().Add(-time.Second), 5*time.Second); !ok || got.Signal != 11 {
		t.Errorf("expected the later exit (signal 11), got %+v %v", got, ok)
	}
}

// TestExitOfZombie: a child its parent does not reap shows how it ended
// in its stat; once reaped, nothing is told.
func TestExitOfZombie(t *testing.T) {
	fs := Real()
	// The parent execs sleep, which never reaps the background child;
	// the child ends once the parent is sleep (a shell would reap it).
	cmd := exec.Command("sh", "-c", `sh -c 'until grep -qx sleep /proc/$PPID/comm; do :; done; kill -SEGV $$' & echo $!; exec sleep 30`)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	var st Stat
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = fs.Stat(pid)
		if err != nil {
			t.Fatalf("stat of the child: %v", err)
		}
		if st.Zombie() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never became a zombie")
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, ok := fs.ExitOfZombie(pid, st.StartTime)
	if !ok || got.Signal != int(unix.SIGSEGV) {
		t.Errorf("expected SIGSEGV, got %+v %v", got, ok)
	}
	if _, ok := fs.ExitOfZombie(pid, st.StartTime+1); ok {
		t.Error("another start time was told the exit")
	}
	if _, ok := fs.ExitOfZombie(cmd.Process.Pid, 0); ok {
		t.Error("a live process was told an exit")
	}
}
