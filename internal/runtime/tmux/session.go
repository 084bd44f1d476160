package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// NewSession starts a detached session running argv in workdir with env added
// to its environment, and returns the pid of its pane's process.
//
// argv is executed directly, never through a shell: tmux runs a one-element
// command with "sh -c", so a lone argv[0] is started as "env -- argv[0]"
// (env execs it in place, so the pid is the agent's). remain-on-exit is set
// on the session's window in the same tmux invocation, before tmux can notice
// the process's exit, so even an agent that dies at once leaves a dead pane
// with its exit status. workdir, when not empty, must be an existing absolute
// directory (tmux would silently start elsewhere).
//
// The pid is returned as soon as tmux has forked: until the child has
// exec'd, /proc/<pid>/comm and /proc/<pid>/environ are still the tmux
// server's, so a caller checking the agent's identity there must retry
// briefly. The pid and its start time do not change across the exec.
//
// On error the session does not exist, unless the error is a timeout after
// tmux created it; callers reconcile by name.
func (c *Client) NewSession(ctx context.Context, name, workdir string, env map[string]string, argv []string) (int, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	cmdArgv, err := launchArgv(argv)
	if err != nil {
		return 0, err
	}
	newSession := []string{"new-session", "-d", "-P", "-F", "#{pane_pid}", "-s", escapeFormat(name)}
	if workdir != "" {
		if err := checkWorkdir(workdir); err != nil {
			return 0, err
		}
		newSession = append(newSession, "-c", escapeFormat(workdir))
	}
	envArgs, err := envArgs(env)
	if err != nil {
		return 0, err
	}
	newSession = append(newSession, envArgs...)
	newSession = append(newSession, "--")
	newSession = append(newSession, cmdArgv...)
	remain := []string{"set-option", "-w", "-t", target(name), "remain-on-exit", "on"}

	out, err := c.run(ctx, nil, newSession, remain)
	pid, perr := parsePID(out)
	if err != nil {
		if perr == nil {
			// The session exists but is not set up as promised; do not
			// leave it behind.
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = c.KillSession(kctx, name)
			cancel()
		}
		return 0, err
	}
	if perr != nil {
		return 0, perr
	}
	return pid, nil
}

// launchArgv is the argv handed to tmux for the agent's argv.
func launchArgv(argv []string) ([]string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("tmux: empty command")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, fmt.Errorf("tmux: command argument %q contains a NUL byte", a)
		}
	}
	if len(argv) > 1 {
		return argv, nil
	}
	if strings.ContainsRune(argv[0], '=') {
		// env would read it as an assignment.
		return nil, fmt.Errorf("tmux: command %q contains '=' and has no arguments", argv[0])
	}
	return []string{"env", "--", argv[0]}, nil
}

func checkWorkdir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("tmux: workdir %q is not absolute", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("tmux: workdir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("tmux: workdir %q is not a directory", dir)
	}
	return nil
}

// envArgs turns env into sorted -e arguments.
func envArgs(env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var args []string
	for _, k := range keys {
		v := env[k]
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("tmux: invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("tmux: environment variable %s contains a NUL byte", k)
		}
		args = append(args, "-e", k+"="+v)
	}
	return args, nil
}

func parsePID(out []byte) (int, error) {
	s := strings.TrimSpace(string(out))
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("tmux: new-session printed %q, not a pane pid", s)
	}
	return pid, nil
}

// Reach asks the server for nothing but an answer: nil when one answers,
// an error wrapping ErrNoSocket when its socket file is missing (tmux's own
// idea of the path), ErrNoServer when nothing listens there.
func (c *Client) Reach(ctx context.Context) error {
	// A server option: an answer of one line whatever the number of
	// sessions (list-sessions grew with every one), from an empty server
	// too.
	_, err := c.run(ctx, nil, []string{"show-options", "-s", "-v", "escape-time"})
	return err
}

// KillSessionOfPane kills the session that holds pane paneID (%N), only
// if that pane's pid is still pid. The check and the kill are one tmux
// command, run by the server with nothing in between: a session that
// replaced the pane's own meanwhile — under the same name, even on a new
// server that reuses pane ids — is never killed. A pane that is gone or
// has another pid is left alone without an error (tmux evaluates the
// check with no pane, and it fails); no server is ErrNoServer.
func (c *Client) KillSessionOfPane(ctx context.Context, paneID string, pid int) error {
	if err := checkPaneID(paneID); err != nil {
		return err
	}
	if pid <= 0 {
		return fmt.Errorf("tmux: kill session of pane %s: no pane pid to check", paneID)
	}
	_, err := c.run(ctx, nil, []string{"if-shell", "-F", "-t", paneID,
		fmt.Sprintf("#{==:#{pane_pid},%d}", pid), "kill-session -t " + paneID})
	return err
}

// KillSessionIfPanePID kills the session called exactly name only if its
// active pane's pid is pid, checked and killed in one command run by the
// server with nothing in between, and no listing to misread: a session
// that replaced it under the same name (another pane pid) is never
// killed. A session whose active pane has another pid, or no such
// session, is left alone without an error (tmux evaluates the check with
// no pane, and it fails); no server is ErrNoServer.
func (c *Client) KillSessionIfPanePID(ctx context.Context, name string, pid int) error {
	if err := checkName(name); err != nil {
		return err
	}
	if pid <= 0 {
		return fmt.Errorf("tmux: kill session %s: no pane pid to check", name)
	}
	_, err := c.run(ctx, nil, []string{"if-shell", "-F", "-t", target(name),
		fmt.Sprintf("#{==:#{pane_pid},%d}", pid), "kill-session -t " + target(name)})
	return err
}

// KillSession kills the session called exactly name. A missing session is an
// error wrapping ErrNoSession (or ErrNoServer); callers that want
// idempotence test for those.
func (c *Client) KillSession(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := c.run(ctx, nil, []string{"kill-session", "-t", target(name)})
	return err
}

// HasSession reports whether a session called exactly name exists. It is the
// naive one-call-per-session probe; supervisors use ListPanes. No server
// means no session.
func (c *Client) HasSession(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	_, err := c.run(ctx, nil, []string{"has-session", "-t", target(name)})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNoSession), errors.Is(err, ErrNoServer):
		return false, nil
	}
	return false, err
}

// AttachCommand is the command that attaches a terminal to the session called
// exactly name, for the caller to run with the user's terminal. It carries
// the caller's environment unchanged (inside another tmux, tmux refuses to
// nest unless TMUX is removed; that choice is the caller's).
func (c *Client) AttachCommand(name string) *exec.Cmd {
	var args []string
	if c.Socket != "" {
		args = append(args, "-L", c.Socket)
	}
	args = append(args, "attach-session", "-t", escapeArg("="+name))
	return exec.Command(c.binary(), args...)
}

// KillServer kills the server and every session on it. With no server it
// returns an error wrapping ErrNoServer.
func (c *Client) KillServer(ctx context.Context) error {
	_, err := c.runOnce(ctx, nil, []string{"kill-server"})
	if errors.Is(err, ErrServerExited) {
		// The client saw the server go away before its reply: that is
		// the kill succeeding.
		return nil
	}
	return err
}
