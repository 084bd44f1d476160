package peer

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/frontdoor"
	"herd/internal/herdtest"
	"herd/internal/proc"
)

// envConnect makes the test binary a client: it connects to the socket
// named, says hello, and waits for the server to hang up.
const envConnect = "PEER_TEST_CONNECT"

// envExit makes the client exit at once, its connection left open.
const envExit = "PEER_TEST_EXIT"

func TestMain(m *testing.M) {
	if sock := os.Getenv(envConnect); sock != "" {
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		c.Write([]byte("x"))
		if os.Getenv(envExit) == "" {
			io.Copy(io.Discard, c)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// server is a unix socket whose connections are handed to the test.
type server struct {
	path  string
	conns chan net.Conn
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{path: filepath.Join(t.TempDir(), "s.sock"), conns: make(chan net.Conn, 1)}
	raw, err := net.Listen("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	// Connections come wrapped, as a front door's listener hands them.
	ln := &frontdoor.Listener{Listener: raw}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns <- c
		}
	}()
	return s
}

// accept returns the next connection, once its client said hello.
func (s *server) accept(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { c.Close() })
		b := make([]byte, 1)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no client connected")
	}
	return nil
}

// start runs argv with the client's environment plus env.
func start(t *testing.T, s *server, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), envConnect+"="+s.path)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	herdtest.AwaitExec(t, cmd.Process.Pid)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// records is a fake record: incarnations live on record, and ended.
type records map[string]Record

// ended marks an incarnation on record that is not live.
var ended = Record{Session: "ended"}

func (r records) lookup(_ context.Context, id string) (Record, State, error) {
	rec, ok := r[id]
	switch {
	case !ok:
		return Record{}, Unrecorded, nil
	case rec.Session == ended.Session:
		return Record{}, Ended, nil
	}
	return rec, Live, nil
}

func identify(t *testing.T, f *Finder, c net.Conn) Caller {
	t.Helper()
	cr, err := readCred(c, bootTicks())
	if err != nil {
		t.Fatal(err)
	}
	defer cr.close()
	return f.Identify(context.Background(), cr)
}

// TestIdentifyRealProcesses connects real processes, marked as herd marks
// an incarnation's, to a real unix socket and tells who they are.
func TestIdentifyRealProcesses(t *testing.T) {
	boot, err := proc.BootID()
	if err != nil {
		t.Skip(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fs := proc.Real()
	id := func(pid int) herd.Identity {
		t.Helper()
		i, err := fs.Identify(pid, boot)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	recs := records{}
	f := &Finder{FS: fs, BootID: boot, Lookup: recs.lookup}
	s := newServer(t)
	marker := func(inc string) []string { return []string{herd.EnvIncarnation + "=" + inc} }

	// The agent's own process connects.
	cmd := start(t, s, marker("inc-a"), self)
	recs["inc-a"] = Record{Session: "lead-0", Root: id(cmd.Process.Pid)}
	if c := identify(t, f, s.accept(t)); c.Session != "lead-0" || c.Incarnation != "inc-a" || c.Unplaced != "" {
		t.Errorf("[agent itself] expected lead-0 of inc-a, got %+v", c)
	}

	// A child of the agent's shell that dropped the marker: its parent
	// carries it (the shell forks: the command is not its last).
	sh := start(t, s, marker("inc-b"), "sh", "-c", `env -u `+herd.EnvIncarnation+` "$0"; exit $?`, self)
	recs["inc-b"] = Record{Session: "worker-1", Agent: id(sh.Process.Pid)}
	if c := identify(t, f, s.accept(t)); c.Session != "worker-1" || c.Unplaced != "" {
		t.Errorf("[child of the agent, no marker of its own] expected worker-1, got %+v", c)
	}

	// No marker anywhere above: the user.
	start(t, s, nil, self)
	if c := identify(t, f, s.accept(t)); !c.User() || c.PID == 0 {
		t.Errorf("[outside every agent] expected the user, got %+v", c)
	}

	// A marker of an incarnation on record, ended.
	recs["inc-gone"] = ended
	start(t, s, marker("inc-gone"), self)
	if c := identify(t, f, s.accept(t)); c.User() || c.Session != "" || !strings.Contains(c.Unplaced, "not live on record") || c.Claimed != "inc-gone" {
		t.Errorf("[incarnation not on record] expected unplaced, got %+v", c)
	}

	// A marker set by hand to another live incarnation's: the caller does
	// not descend from its process.
	start(t, s, marker("inc-a"), self)
	if c := identify(t, f, s.accept(t)); c.Session != "" || !strings.Contains(c.Unplaced, "does not descend") {
		t.Errorf("[forged marker] expected unplaced, got %+v", c)
	}

	// An agent's child that sets another live incarnation's marker: two
	// marks on the path.
	start(t, s, marker("inc-b"), "sh", "-c", herd.EnvIncarnation+`=inc-a "$0"; exit $?`, self)
	if c := identify(t, f, s.accept(t)); c.Session != "" || !strings.Contains(c.Unplaced, "several incarnations") {
		t.Errorf("[two marks] expected unplaced, got %+v", c)
	}

	// A marker this daemon never recorded is another herd's: a herd
	// run inside an agent of this one, or around it. Alone, the user;
	// above a marker of this herd's, passed over.
	start(t, s, marker("inc-other-herd"), self)
	if c := identify(t, f, s.accept(t)); !c.User() {
		t.Errorf("[another herd's marker] expected the user, got %+v", c)
	}
	sh = start(t, s, marker("inc-b"), "sh", "-c", herd.EnvIncarnation+`=inc-other-herd "$0"; exit $?`, self)
	recs["inc-b"] = Record{Session: "worker-1", Agent: id(sh.Process.Pid)}
	if c := identify(t, f, s.accept(t)); c.Session != "worker-1" || c.Unplaced != "" {
		t.Errorf("[another herd's marker in an agent of this one] expected worker-1, got %+v", c)
	}

	// A caller gone (exited and reaped) before it was told: never the
	// user.
	gone := start(t, s, []string{envExit + "=1"}, self)
	c := s.accept(t)
	gone.Wait()
	if got := identify(t, f, c); got.User() || got.Unplaced == "" {
		t.Errorf("[caller gone] expected unplaced, got %+v", got)
	}
}

// TestIdentifyOutsideNamespace: a peer the kernel gives no pid for here
// (another pid namespace, above the daemon's) is not an agent's.
func TestIdentifyOutsideNamespace(t *testing.T) {
	f := &Finder{FS: proc.Real(), Lookup: records{}.lookup}
	if c := f.Identify(context.Background(), Cred{PID: 0, pidfd: -1}); !c.User() {
		t.Errorf("expected the user, got %+v", c)
	}
}

// TestIdentifyUnreadable: /proc unreadable is never the user.
func TestIdentifyUnreadable(t *testing.T) {
	f := &Finder{FS: proc.FS{Root: filepath.Join(t.TempDir(), "none")}, Lookup: records{}.lookup}
	if c := f.Identify(context.Background(), Cred{PID: os.Getpid(), pidfd: -1}); c.User() || !strings.Contains(c.Unplaced, "cannot be read") {
		t.Errorf("expected unplaced, got %+v", c)
	}
}
