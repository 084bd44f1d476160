// Package tmux drives herd's tmux server through the tmux binary: bounded
// calls over one control-mode connection, or a tmux process each.
package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultTimeout bounds a call when Client.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// waitDelay is how long a killed call may keep its output pipes open (a
// wrapper's children) before Wait gives up on them.
const waitDelay = 500 * time.Millisecond

// Error kinds, matched with errors.Is.
var (
	// ErrNoServer means no tmux server listens on the socket: nothing runs there.
	ErrNoServer = errors.New("no server running")
	// ErrNoSession means the server runs but has no session of that name.
	ErrNoSession = errors.New("session not found")
	// ErrNoWindow means the server runs but the target's window does not
	// exist.
	ErrNoWindow = errors.New("window not found")
	// ErrNoPane means the server runs but has no pane of that id.
	ErrNoPane = errors.New("pane not found")
	// ErrEmptyServer means the server runs but holds no session at all. tmux
	// then answers every command that takes a target, whatever the target,
	// with "no current target" (it resolves the current session before the
	// target, and there is none): between its last session's kill and its
	// exit, or with exit-empty off. No session, window or pane of any name
	// exists there, so it matches ErrNoSession, ErrNoWindow and ErrNoPane.
	ErrEmptyServer error = emptyServer{}
	// ErrDuplicateSession means a session of that name already exists.
	ErrDuplicateSession = errors.New("duplicate session")
	// ErrServerExited means the server went away while the call was
	// connected: tmux exits when its last session is killed, so a call
	// racing that kill sees this. The command did not run; run retries it.
	ErrServerExited = errors.New("server exited")
	// ErrNoSocket means the server's socket file does not exist. It wraps
	// ErrNoServer, which is what it usually means (no server was ever
	// started there), but not always: a /tmp cleaner may delete the
	// socket of a server that still runs, every session in it. A server
	// that exits, even killed, leaves its socket behind (ErrNoServer
	// alone), so a caller that saw a server there should check whether it
	// still runs before reading this as "nothing runs".
	ErrNoSocket = fmt.Errorf("%w: socket file missing", ErrNoServer)
)

// emptyServer is ErrEmptyServer.
type emptyServer struct{}

func (emptyServer) Error() string { return "no session on the server" }

// Is makes an empty server match every "not found" kind.
func (emptyServer) Is(target error) bool {
	return target == ErrNoSession || target == ErrNoWindow || target == ErrNoPane
}

// serverExitRetries is how many times run repeats a call that met an
// exiting server; the next attempt finds no server, or starts a new one.
const serverExitRetries = 3

// Client runs tmux commands against one server. Its zero value (plus Binary)
// works, and one Client may be used from many goroutines; with Control it
// holds a connection, so it is used through a pointer and never copied.
type Client struct {
	Binary  string        // tmux executable; "" means "tmux"
	Socket  string        // -L value; "" means the user's default server
	Timeout time.Duration // per call, applied when ctx has no earlier deadline; 0 means DefaultTimeout
	// Control sends calls over one long-lived control-mode client once a
	// server runs (see control.go); Close ends it. Without it every call
	// is a tmux process of its own.
	Control bool

	ctl control
	// server is the last server NudgeServer proved (see server.go).
	server provenServer
}

// CallError is a failed tmux call: its arguments, tmux's stderr and the cause.
// Err is one of the error kinds above (wrapping the exit error) when stderr
// says so, wraps
// context.DeadlineExceeded when the call timed out, and is the exit or start
// error otherwise.
type CallError struct {
	Args   []string
	Stderr string
	Err    error
}

// maxErrorArgs caps how much of the argument list an error message repeats.
const maxErrorArgs = 200

// Error implements error.
func (e *CallError) Error() string {
	args := strings.Join(e.Args, " ")
	if len(args) > maxErrorArgs {
		args = args[:maxErrorArgs] + "…"
	}
	msg := fmt.Sprintf("tmux %s: %v", args, e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns the cause, so errors.Is sees the error kinds above and
// context.DeadlineExceeded.
func (e *CallError) Unwrap() error { return e.Err }

// stderrKinds maps what tmux 3.2 to 3.5 write on stderr to an error kind,
// first match wins. Each pattern is a whole line, or its beginning when it
// ends with a space or ':' (the rest names the target or the socket). The
// strings are tmux's own: client.c (connecting, and the reasons a client
// exits), cmd-find.c (resolving -t), options.c, cmd-set-environment.c and
// cmd-show-environment.c (a target that resolved to nothing), and
// cmd-new-session.c. "lost server" and "session not found: x" are
// tmux 1.x's words for the same things.
var stderrKinds = []struct {
	prefix string
	kind   error
}{
	{"no server running on ", ErrNoServer},
	{"error connecting to ", nil}, // decided by the errno in parentheses, below
	{"server exited unexpectedly", ErrServerExited},
	{"server exited", ErrServerExited},
	{"lost server", ErrServerExited},
	{"no current target", ErrEmptyServer},
	{"no current session", ErrEmptyServer},
	{"no current window", ErrEmptyServer},
	{"no current pane", ErrEmptyServer},
	{"can't find session:", ErrNoSession},
	{"no such session:", ErrNoSession},
	{"session not found:", ErrNoSession},
	{"session not found", ErrNoSession},
	{"can't find window:", ErrNoWindow},
	{"no such window:", ErrNoWindow},
	{"can't find pane:", ErrNoPane},
	{"no such pane:", ErrNoPane},
	{"duplicate session:", ErrDuplicateSession},
}

// classify maps tmux's stderr to an error kind, or nil when it is none of
// them. Every line is read, and the first line that names a kind decides:
// a command may print a resolver error and then the command's own
// (set-option prints "can't find session: x" then "no such session: x").
// Lines are compared whole (or by their fixed beginning), so a kind word
// inside a session name or a longer message does not match.
//
// A server that exists but cannot be reached (permission denied, a socket
// path that is not a socket, a full listen queue) is not "no server":
// something may run there. A missing socket file is ErrNoSocket (which is
// also ErrNoServer); connection refused (tmux says "no server running" for
// it itself) is ErrNoServer.
func classify(stderr string) error {
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if kind := classifyLine(line); kind != nil {
			return kind
		}
	}
	return nil
}

// classifyLine maps one line of tmux's stderr to an error kind, or nil.
func classifyLine(line string) error {
	for _, k := range stderrKinds {
		if !matchPrefix(line, k.prefix) {
			continue
		}
		if k.kind != nil {
			return k.kind
		}
		// "error connecting to PATH (strerror)"
		switch {
		case strings.HasSuffix(line, "(No such file or directory)"):
			return ErrNoSocket
		case strings.HasSuffix(line, "(Connection refused)"):
			return ErrNoServer
		}
		return nil
	}
	return nil
}

// matchPrefix reports whether line is pattern, or starts with it when
// pattern ends in ' ' or ':' (the rest is the target or path tmux names).
func matchPrefix(line, pattern string) bool {
	if line == pattern {
		return true
	}
	if strings.HasSuffix(pattern, " ") || strings.HasSuffix(pattern, ":") {
		return strings.HasPrefix(line, pattern)
	}
	return false
}

// callError builds the error of a call that ended with runErr (non-nil).
// ctxErr is the call context's error, which wins: a killed call's stderr is
// not to be trusted.
func callError(args []string, stderr string, runErr, ctxErr error) *CallError {
	stderr = strings.TrimSpace(stderr)
	e := &CallError{Args: args, Stderr: stderr, Err: runErr}
	if ctxErr != nil {
		e.Err = fmt.Errorf("%w (%w)", ctxErr, runErr)
	} else if kind := classify(stderr); kind != nil {
		e.Err = fmt.Errorf("%w (%w)", kind, runErr)
	}
	return e
}

func (c *Client) binary() string {
	if c.Binary == "" {
		return "tmux"
	}
	return c.Binary
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// globalArgs are the arguments before the command: -u because without it a
// client in a non-UTF-8 locale gets every tab and non-ASCII byte of -F output
// replaced by '_'; -L to pick herd's server.
func (c *Client) globalArgs() []string {
	args := []string{"-u"}
	if c.Socket != "" {
		args = append(args, "-L", c.Socket)
	}
	return args
}

// escapeArg protects one argument from tmux's command splitting: tmux reads
// any argument ending in ';' as a command separator (keeping the text before
// it), and turns a trailing "\;" into ";". Inserting a backslash before a
// trailing ';' makes tmux hand the original argument to the command.
func escapeArg(s string) string {
	if strings.HasSuffix(s, ";") {
		return s[:len(s)-1] + `\;`
	}
	return s
}

// escapeFormat protects a value that tmux expands as a format (new-session's
// -s and -c): '#' starts a format sequence and "##" is a literal '#'.
func escapeFormat(s string) string { return strings.ReplaceAll(s, "#", "##") }

// commandLine joins commands into one tmux invocation, escaping every argument
// and separating the commands with ";" so tmux runs them in one queue, with no
// event processed in between.
func commandLine(cmds [][]string) []string {
	var args []string
	for i, cmd := range cmds {
		if i > 0 {
			args = append(args, ";")
		}
		for _, a := range cmd {
			args = append(args, escapeArg(a))
		}
	}
	return args
}

// clientEnv is the environment of a tmux client: ours without TMUX, which
// would otherwise point a client with no -L at the server it runs inside.
func clientEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "TMUX=") || strings.HasPrefix(kv, "TMUX_PANE=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// run executes the commands in one tmux invocation, with stdin when non-nil,
// and returns stdout. A call that met the server exiting under it (its last
// session killed meanwhile) is repeated, up to serverExitRetries times: the
// command did not run, and the next attempt meets no server or a new one.
func (c *Client) run(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, error) {
	out, _, err := c.runVia(ctx, stdin, cmds...)
	return out, err
}

// runVia is run, and also says whether the answer came over the control
// connection.
func (c *Client) runVia(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, bool, error) {
	var input []byte
	if stdin != nil {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, false, fmt.Errorf("tmux: read input: %w", err)
		}
		input = b
	}
	for attempt := 0; ; attempt++ {
		var in io.Reader
		if stdin != nil {
			in = bytes.NewReader(input)
		}
		out, control, err := c.runOnceVia(ctx, in, cmds...)
		if err == nil || !errors.Is(err, ErrServerExited) || attempt == serverExitRetries {
			return out, control, err
		}
		select {
		case <-ctx.Done():
			return out, control, err
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
}

// runOnce is one call, over the control connection when there is one and
// the commands may go there, else through a tmux process. It is bounded
// by the client's timeout; on timeout the whole process group of the
// tmux process is killed, so a wedged wrapper and its children cannot
// hold the call open, and a connection that did not answer is closed.
func (c *Client) runOnce(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, error) {
	out, _, err := c.runOnceVia(ctx, stdin, cmds...)
	return out, err
}

// runOnceVia is runOnce, and also says whether the answer came over the
// control connection.
func (c *Client) runOnceVia(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()

	if c.Control && stdin == nil {
		if out, handled, err := c.callControl(ctx, cmds); handled {
			return out, true, err
		}
	}
	out, err := c.execOnce(ctx, stdin, cmds...)
	if c.Control && ctx.Err() == nil && !errors.Is(err, ErrNoServer) {
		// A server answered: the control connection may be set up.
		c.kick()
	}
	return out, false, err
}

// execOnce is one call through a tmux process of its own.
func (c *Client) execOnce(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, error) {
	c.ctl.stats.exec.Add(1)
	args := append(c.globalArgs(), commandLine(cmds)...)
	cmd := exec.CommandContext(ctx, c.binary(), args...)
	cmd.Env = clientEnv()
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The client leads its own process group; kill all of it.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay

	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), callError(args, stderr.String(), err, ctx.Err())
	}
	return stdout.Bytes(), nil
}

// checkName rejects session names tmux would silently change (it replaces
// ':' and '.' and escapes control characters), since an exact target for a
// changed name would never match.
func checkName(name string) error {
	if name == "" {
		return errors.New("tmux: empty session name")
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("tmux: session name %q is not valid UTF-8", name)
	}
	if strings.ContainsAny(name, ":.") {
		return fmt.Errorf("tmux: session name %q contains ':' or '.'", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("tmux: session name %q contains a control character", name)
		}
	}
	return nil
}

// target is the exact target of a session's active pane. A bare name would
// prefix-match ("work" finding "work-1" when "work" is gone).
func target(name string) string { return "=" + name + ":" }

// checkPaneID rejects anything but a pane id (%N): a pane id is an exact
// target, unique on its server, whatever pane of the session is active.
func checkPaneID(pane string) error {
	if !paneIDRE.MatchString(pane) {
		return fmt.Errorf("tmux: %q is not a pane id (%%N)", pane)
	}
	return nil
}
