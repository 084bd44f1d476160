// Package gitx runs git for herd, one bounded call at a time, never through a shell.
package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds a call when Client.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// waitDelay is how long a killed call may keep its output pipes open (a
// hook's children) before Wait gives up on them.
const waitDelay = 500 * time.Millisecond

// Client runs git commands. Its zero value works; it holds no state, so one
// Client may be used from many goroutines.
type Client struct {
	Binary  string        // git executable; "" means "git"
	Timeout time.Duration // per call, applied when ctx has no earlier deadline; 0 means DefaultTimeout
	// Isolated ignores the user's global and system git configuration.
	Isolated bool
}

// Error is a failed git call: the directory, the arguments, git's stderr
// and the cause (the exit error, or one wrapping context.DeadlineExceeded
// when the call timed out).
type Error struct {
	Dir    string
	Args   []string
	Stderr string
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	msg := fmt.Sprintf("git %s (in %s): %v", strings.Join(e.Args, " "), e.Dir, e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns git's exit status, or -1 when git did not exit on its
// own (not started, killed on timeout).
func (e *Error) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) && ee.Exited() {
		return ee.ExitCode()
	}
	return -1
}

func (c *Client) binary() string {
	if c.Binary == "" {
		return "git"
	}
	return c.Binary
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// env is the environment of a git call: ours, minus the variables that
// would point git at another repository or change its output, plus
// settings that keep git from prompting, paging, translating its messages
// (errors are matched on), or taking optional locks (herd's status reads
// must not make an agent's own git commands fail on index.lock).
//
// The user's global and system configuration is read unless isolated: a
// session's worktree must be checked out the way the user's own checkouts
// are (LFS filters, autocrlf, hooks path), and the output herd parses is
// unaffected by it (-z and porcelain formats, no pager, no terminal).
func env(isolated bool) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
			"GIT_CONFIG", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_TERMINAL_PROMPT",
			"GIT_ASKPASS", "SSH_ASKPASS", "GIT_PAGER", "PAGER", "GIT_OPTIONAL_LOCKS",
			"LANG", "LC_ALL", "LANGUAGE":
			continue
		case "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM":
			if isolated {
				continue
			}
		}
		out = append(out, kv)
	}
	out = append(out,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"GIT_OPTIONAL_LOCKS=0",
		"LC_ALL=C",
	)
	if isolated {
		out = append(out, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	}
	return out
}

// Run runs git with args in dir and returns its stdout. It is bounded by
// the client's timeout; on timeout the whole process group of the call is
// killed.
func (c *Client) Run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()

	cmd := exec.CommandContext(ctx, c.binary(), args...)
	cmd.Dir = dir
	cmd.Env = env(c.Isolated)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		e := &Error{Dir: dir, Args: args, Stderr: strings.TrimSpace(stderr.String()), Err: err}
		if ctxErr := ctx.Err(); ctxErr != nil {
			e.Err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return stdout.Bytes(), e
	}
	return stdout.Bytes(), nil
}

// Line runs git and returns its stdout with surrounding white space removed.
func (c *Client) Line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := c.Run(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
}

// Exit runs git for its exit status alone: (true, nil) on status 0,
// (false, nil) on status 1, and an error otherwise (git's way of saying
// something is wrong rather than "no").
func (c *Client) Exit(ctx context.Context, dir string, args ...string) (bool, error) {
	_, err := c.Run(ctx, dir, args...)
	if err == nil {
		return true, nil
	}
	var e *Error
	if errors.As(err, &e) && e.ExitCode() == 1 {
		return false, nil
	}
	return false, err
}
