// Package pgcluster starts a private, throwaway PostgreSQL cluster: a temp
// directory, a unix socket and, unless asked for (StartListening), no TCP
// listener, run by an unprivileged user.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned by Start when initdb or postgres is not
// installed (Debian: the postgresql package).
var ErrNoBinaries = errors.New("pgcluster: initdb and postgres not found in PATH or /usr/lib/postgresql/*/bin")

// User is the cluster's superuser; the socket trusts every local connection.
const User = "herd"

// nobody is the unprivileged uid and gid a root caller runs the cluster as:
// initdb and postgres refuse to run as root.
const nobody = 65534

// debianBins matches the bin directories of Debian's PostgreSQL packages.
var debianBins = "/usr/lib/postgresql/*/bin"

// readyPoll is how often Start tries to connect while the server starts.
const readyPoll = 50 * time.Millisecond

// Cluster is one running private cluster.
type Cluster struct {
	dir  string // everything: data, socket, log
	sock string // the socket directory
	cmd  *exec.Cmd
	// listen are the TCP addresses the server listens on (none: the
	// socket only), at port.
	listen []string
	port   int
	// bin is the directory of the server's binaries; cred the user it
	// runs as (nil: the caller).
	bin  string
	cred *syscall.Credential
	// exited is closed when the server process has been waited for;
	// waitErr is its exit status then.
	exited  chan struct{}
	waitErr error
}

// Start creates a cluster in a new temp directory and starts its server,
// returning once it accepts connections. When the caller is root, the
// directory is given to uid/gid 65534 (nobody) and the server runs as that
// user. If the caller dies, the kernel stops the server (parent-death
// signal); the directory then stays behind in the temp dir.
func Start(ctx context.Context) (*Cluster, error) {
	return StartListening(ctx)
}

// StartListening is Start with the server listening on TCP too, on each
// of addrs (which must exist on this machine) at a free port (Port),
// trusting every client: for tests that reach the server over a network
// of their own (network namespaces). The socket stays as Start's.
func StartListening(ctx context.Context, addrs ...string) (*Cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "herd-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dir: dir, sock: filepath.Join(dir, "sock"), exited: make(chan struct{}), listen: addrs, port: 5432}
	if len(addrs) > 0 {
		if c.port, err = freePort(addrs[0]); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.start(ctx, bin); err != nil {
		if c.cmd != nil {
			_ = c.Stop(context.WithoutCancel(ctx))
		} else {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	return c, nil
}

// start runs initdb, then the server, and waits until it answers.
func (c *Cluster) start(ctx context.Context, bin string) error {
	data := filepath.Join(c.dir, "data")
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	cred := credential()
	if cred != nil {
		for _, p := range []string{c.dir, c.sock} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("pgcluster: %w", err)
			}
		}
	}
	initdb := command(ctx, c.dir, cred, filepath.Join(bin, "initdb"),
		"-D", data, "-U", User, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w: %s", err, bytes.TrimSpace(out))
	}

	if len(c.listen) > 0 {
		hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		_, err = hba.WriteString("host all all 0.0.0.0/0 trust\n")
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgcluster: pg_hba.conf: %w", err)
		}
	}

	c.bin, c.cred = bin, cred
	return c.serve(ctx)
}

// serve starts the server on the cluster's data directory and waits until
// it answers.
func (c *Cluster) serve(ctx context.Context) error {
	data := filepath.Join(c.dir, "data")
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	// Not CommandContext: the server outlives ctx, which bounds only the start.
	cmd := command(context.Background(), c.dir, c.cred, filepath.Join(c.bin, "postgres"),
		"-D", data, "-k", c.sock, "-p", strconv.Itoa(c.port), "-c", "listen_addresses="+strings.Join(c.listen, ","),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr.Setpgid = true // a terminal's ^C reaches it through Stop
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: postgres: %w", err)
	}
	exited := make(chan struct{})
	c.cmd, c.exited = cmd, exited
	go func() {
		c.waitErr = cmd.Wait()
		close(exited)
	}()

	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-exited:
			return fmt.Errorf("pgcluster: postgres exited: %v: %s", c.waitErr, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not ready: %w (last: %v): %s", ctx.Err(), err, c.logTail())
		case <-t.C:
		}
	}
}

// Kill kills the server with SIGKILL, the postmaster and every backend
// of its process group at once (a crash: no shutdown, nothing flushed
// but what was), and waits for the postmaster. Restart brings it back.
func (c *Cluster) Kill() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	// The group is our own unwaited child's: its id cannot have been reused.
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgcluster: kill: %w", err)
	}
	<-c.exited
	return nil
}

// Restart starts the server again on the cluster's data (after Kill: it
// recovers from its log first) and returns once it answers.
func (c *Cluster) Restart(ctx context.Context) error {
	select {
	case <-c.exited:
	default:
		return errors.New("pgcluster: restart: the server is running")
	}
	// Backends of the killed server may linger a moment after the
	// postmaster; the new one refuses to start while they hold its
	// shared memory, so it is started again until it answers.
	for {
		err := c.serve(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(readyPoll):
		}
	}
}

// DSN is the keyword/value connection string of database db, over the
// socket.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", c.sock, c.port, User, db)
}

// Port is the server's port (of its socket, and of its TCP listeners).
func (c *Cluster) Port() int { return c.port }

// freePort returns a TCP port free on addr now.
func freePort(addr string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: a free port on %s: %w", addr, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Stop shuts the server down (fast shutdown: sessions are disconnected),
// waits for it, and removes the cluster's directory. Past ctx's deadline
// the server is killed.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	if c.cmd != nil {
		// The process is our own unwaited child: its pid cannot have been reused.
		select {
		case <-c.exited:
		default:
			if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("pgcluster: stop: %w", err))
			}
			select {
			case <-c.exited:
			case <-ctx.Done():
				_ = c.cmd.Process.Kill()
				<-c.exited
				errs = append(errs, fmt.Errorf("pgcluster: stop: %w; killed", ctx.Err()))
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("pgcluster: %w", err))
	}
	return errors.Join(errs...)
}

// logTail is the end of the server's log, for errors.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(bytes.TrimSpace(b))
}

// credential is who the cluster runs as: nobody for root, else nil (the
// caller itself).
func credential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}
}

// command builds an exec.Cmd run in dir as cred.
func command(ctx context.Context, dir string, cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	// LC_ALL=C: initdb checks the locale of its environment.
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// findBinaries returns a directory holding both initdb and postgres: the
// one initdb is found in through PATH (symlinks resolved), else the newest
// Debian /usr/lib/postgresql/VERSION/bin.
func findBinaries() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	versions, _ := filepath.Glob(debianBins)
	slices.SortFunc(versions, func(a, b string) int { return version(b) - version(a) })
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

// version is the major version in a /usr/lib/postgresql/VERSION/bin path,
// 0 when it is not a number.
func version(binDir string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(filepath.Base(filepath.Dir(binDir))))
	return n
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
