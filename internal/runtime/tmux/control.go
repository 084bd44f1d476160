package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"herd/internal/runtime/tmux/controlmode"
)

// The control transport: one long-lived `tmux -C` client per Client, its
// commands written on its stdin and its answers read as %begin … %end (or
// %error) blocks, instead of one tmux process per call (~9 ms each with
// 1000 sessions on a quiet machine, 16–60 ms under load; a line over the
// connection costs under 1 ms).
//
// The client stays attached to a session of its own, ControlSession: a
// control client with no session exits, and one attached to an agent's
// session would exit with it. That session keeps the server running
// while the connection lives (tmux exits with its last session); Close
// kills it. The connection is only ever opened with -N, so it never starts
// a server, and only after a call through exec reached one.
//
// A call goes over the connection only when it can be written on one
// control line (no newline, carriage return or NUL in any argument, no
// stdin) and its command's answer is tmux's own text (a listing, a pid),
// never a pane's content, which could hold a line that reads like %end.
// Anything else, and every call while there is no connection, goes
// through exec, as before.

// ControlSession is the session the control connection attaches to. It is
// outside herd's namespace (herd.InNamespace): never an agent's session,
// never unmanaged, never reaped; runtime snapshots leave it out.
const ControlSession = "_herd"

// controlHold is the command of ControlSession's pane: silent, and alive
// as long as the session is wanted.
var controlHold = []string{"sleep", "2147483647"}

// Reconnection backoff after a connection failed or ended.
const (
	controlBackoffMin = 500 * time.Millisecond
	// Each attempt follows an exec call a server answered, so the cap
	// stays short: a connection lost under load comes back within
	// seconds of the server answering again.
	controlBackoffMax = 5 * time.Second
)

// controlCommands are the commands sent over the connection: their output
// (through cmdq_print) is text tmux formats itself, one line per item.
var controlCommands = map[string]bool{
	"list-panes":    true,
	"list-sessions": true,
	"new-session":   true,
	"set-option":    true,
	"kill-session":  true,
	"if-shell":      true,
	"has-session":   true,
	"send-keys":     true,
	"delete-buffer": true,
}

// Stats counts how a Client's calls went.
type Stats struct {
	Control  int64 // calls answered over the control connection
	Exec     int64 // tmux processes run for calls
	Connects int64 // control connections established
	Closes   int64 // control connections that ended (EOF, timeout, Close)
}

// control is a Client's control transport. Its zero value is ready: it
// connects on demand (kick) once a server is known to run.
type control struct {
	stats struct{ control, exec, connects, closes atomic.Int64 }

	mu sync.Mutex // guards the fields below
	// conn is the live connection, nil when there is none.
	conn *controlmode.Conn
	// connecting is true while a connection is being set up.
	connecting bool
	// retryAt is when the next connection may be tried.
	retryAt time.Time
	// backoff is the wait after the next failure.
	backoff time.Duration
	// used is true once a connection attached: Close then removes
	// ControlSession.
	used bool
	// closed stops reconnecting for good.
	closed bool
	// wg waits for the connecting goroutine.
	wg sync.WaitGroup
}

// Stats returns the counts of c's calls so far.
func (c *Client) Stats() Stats {
	s := &c.ctl.stats
	return Stats{Control: s.control.Load(), Exec: s.exec.Load(), Connects: s.connects.Load(), Closes: s.closes.Load()}
}

// Connected reports whether c's control connection is up.
func (c *Client) Connected() bool {
	c.ctl.mu.Lock()
	defer c.ctl.mu.Unlock()
	return c.ctl.conn != nil
}

// connect starts a control client attached to ControlSession (created
// when missing, with -N: never a new server) with pane output off, and
// returns once it is attached, within the client's timeout.
func (c *Client) connect() (*controlmode.Conn, error) {
	cn, err := controlmode.New(ControlSession, ErrServerExited)
	if err != nil {
		return nil, err
	}
	args := append(c.globalArgs(), "-N", "-C", "new-session", "-A", "-s", ControlSession, "-f", "no-output", "--")
	args = append(args, controlHold...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("tmux: control connection: %w", err)
	}
	cmd := exec.Command(c.binary(), args...)
	cmd.Env = clientEnv()
	cmd.Stdin = pr
	cmd.Stderr = cn.Stderr()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("tmux: control connection: %w", err)
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, callError(args, "", err, nil)
	}
	pr.Close()
	cn.Run(cmd, pw, stdout)

	// Set up in the background, so it may take longer than one call
	// (a short per-call timeout on a loaded machine failed every attempt).
	wait := max(c.timeout(), DefaultTimeout)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-cn.Attached():
		return cn, nil
	case <-cn.Done():
		return nil, callError(args, cn.StderrText(), cn.Cause(), nil)
	case <-timer.C:
		cn.Close(fmt.Errorf("%w: not attached within %v", controlmode.ErrClosed, wait))
		<-cn.Done()
		return nil, callError(args, cn.StderrText(), cn.Cause(), context.DeadlineExceeded)
	}
}

// controlLine is cmds as one control-mode line, or false when one of them
// may not go over the connection. Each argument is single-quoted, so
// tmux's command parser takes it whole: no $VAR or ~ expansion, no #
// comment, no ';' or brace, no escapes; a quote inside is closed, given
// as \' and reopened. The command names are ours, matched against
// controlCommands, and left bare.
func controlLine(cmds [][]string) (string, bool) {
	var b strings.Builder
	for i, cmd := range cmds {
		if len(cmd) == 0 || !controlCommands[cmd[0]] {
			return "", false
		}
		if i > 0 {
			b.WriteString(" ; ")
		}
		b.WriteString(cmd[0])
		for _, a := range cmd[1:] {
			if strings.ContainsAny(a, "\n\r\x00") {
				return "", false
			}
			b.WriteString(" '")
			b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
			b.WriteByte('\'')
		}
	}
	return b.String(), b.Len() > 0
}

// call sends cmds over the connection when there is one and they may go
// there; handled is false when the caller must use exec.
func (c *Client) callControl(ctx context.Context, cmds [][]string) (out []byte, handled bool, err error) {
	k := &c.ctl
	k.mu.Lock()
	cn := k.conn
	k.mu.Unlock()
	if cn == nil || cn.Ended() {
		return nil, false, nil
	}
	line, ok := controlLine(cmds)
	if !ok {
		return nil, false, nil
	}
	k.stats.control.Add(1)
	out, stderr, err := cn.Call(ctx, line)
	if err == nil {
		k.mu.Lock()
		k.backoff = 0
		k.mu.Unlock()
		return out, true, nil
	}
	args := append(c.globalArgs(), commandLine(cmds)...)
	switch {
	case ctx.Err() != nil:
		// The server did not answer in time: it may be wedged. The
		// connection goes; later calls use exec until it is back.
		cn.Close(fmt.Errorf("%w: a call timed out", controlmode.ErrClosed))
		return out, true, callError(args, stderr, err, ctx.Err())
	case errors.Is(err, controlmode.ErrControl):
		return out, true, callError(args, stderr, err, nil)
	}
	return out, true, &CallError{Args: args, Stderr: strings.TrimSpace(stderr), Err: err}
}

// dropped forgets cn as the live connection, after it ended, and sets
// the time of the next attempt.
func (k *control) dropped(cn *controlmode.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conn == cn {
		k.conn = nil
	}
	k.failedLocked()
	k.stats.closes.Add(1)
}

// failedLocked pushes the next connection attempt back.
func (k *control) failedLocked() {
	k.backoff = min(max(2*k.backoff, controlBackoffMin), controlBackoffMax)
	k.retryAt = time.Now().Add(k.backoff)
}

// kick starts connecting in the background when there is no connection,
// none is being set up and the backoff is over. It is called after an
// exec call reached a server.
func (c *Client) kick() {
	k := &c.ctl
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.conn != nil || k.connecting || time.Now().Before(k.retryAt) {
		return
	}
	k.connecting = true
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		cn, err := c.connect()
		k.mu.Lock()
		defer k.mu.Unlock()
		k.connecting = false
		if err != nil {
			k.failedLocked()
			return
		}
		k.used = true
		if k.closed {
			cn.Close(fmt.Errorf("%w: client closed", controlmode.ErrClosed))
			<-cn.Done()
			return
		}
		k.conn = cn
		k.stats.connects.Add(1)
		go func() {
			<-cn.Done()
			k.dropped(cn)
		}()
	}()
}

// Close ends c's control connection and removes ControlSession, so the
// server exits as before when no other session is left. Calls made later
// go through exec; c never connects again.
func (c *Client) Close(ctx context.Context) error {
	k := &c.ctl
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.wg.Wait() // a connection set up meanwhile is closed by its goroutine
	k.mu.Lock()
	cn, used := k.conn, k.used
	k.conn = nil
	k.mu.Unlock()
	if cn != nil {
		cn.Close(fmt.Errorf("%w: client closed", controlmode.ErrClosed))
		<-cn.Done()
	}
	if !used {
		return nil
	}
	_, err := c.runOnce(ctx, nil, []string{"kill-session", "-t", target(ControlSession)})
	if err == nil || errors.Is(err, ErrNoSession) || errors.Is(err, ErrNoServer) || errors.Is(err, ErrServerExited) {
		return nil
	}
	return fmt.Errorf("tmux: remove the control session: %w", err)
}

// Close ends the runtime's control connection and removes its session
// (see Client.Close).
func (r *Runtime) Close(ctx context.Context) error { return r.client.Close(ctx) }
