package tmux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// conn is one control-mode tmux client: its stdin takes command lines,
// its stdout gives one %begin … %end|%error block per command run, in
// the order written, between notifications (%sessions-changed, …) that
// are skipped. Each call's line is followed by a display-message of a
// word of its own, whose block ends the call's answer: a line of several
// commands gives a block per command run, a failed command skips the
// rest of its line, and if-shell adds the block of the command it runs,
// so blocks cannot simply be counted.
type conn struct {
	cmd   *exec.Cmd
	stdin *os.File
	// stdout is read by read. The server holds the client's stdout too
	// (a control client hands it over): killing the client ends nothing
	// while a wedged server keeps it open, so close closes our end.
	stdout io.Closer
	// token starts every call's end word.
	token string
	// stderr keeps what the client wrote on stderr, for errors.
	stderr *capped
	// attached is closed once the client is attached to ControlSession.
	attached chan struct{}
	// done is closed once the client has exited and every pending call
	// has its answer or error.
	done chan struct{}
	// wsem serializes writes, each with its place in pending; a channel,
	// so a caller gives up waiting for it when its context ends.
	wsem chan struct{}

	mu sync.Mutex // guards the fields below
	// pending are the calls written and not yet answered, oldest first.
	pending []*request
	// seq numbers the calls' end words.
	seq uint64
	// err is why the connection ended, set once.
	err error
}

// request is one call on a conn.
type request struct {
	end    string // the line of output that ends its answer
	out    []byte
	stderr []string // lines of %error blocks
	failed bool
	err    error
	done   chan struct{}
}

// capped is a bounded, locked buffer for a client's stderr.
type capped struct {
	mu  sync.Mutex
	buf []byte
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := 4096 - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.TrimSpace(string(c.buf))
}

// connect starts a control client attached to ControlSession (created
// when missing, with -N: never a new server) with pane output off, and
// returns once it is attached, within the client's timeout.
func (c *Client) connect() (*conn, error) {
	tok, err := token()
	if err != nil {
		return nil, err
	}
	args := append(c.globalArgs(), "-N", "-C", "new-session", "-A", "-s", ControlSession, "-f", "no-output", "--")
	args = append(args, controlHold...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("tmux: control connection: %w", err)
	}
	cn := &conn{
		token: tok, stdin: pw, stderr: &capped{},
		attached: make(chan struct{}), done: make(chan struct{}), wsem: make(chan struct{}, 1),
	}
	cmd := exec.Command(c.binary(), args...)
	cmd.Env = clientEnv()
	cmd.Stdin = pr
	cmd.Stderr = cn.stderr
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
	cn.cmd, cn.stdout = cmd, stdout
	go cn.read(stdout)

	// Set up in the background, so it may take longer than one call
	// (a short per-call timeout on a loaded machine failed every attempt).
	wait := max(c.timeout(), DefaultTimeout)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-cn.attached:
		return cn, nil
	case <-cn.done:
		return nil, callError(args, cn.stderr.String(), cn.cause(), nil)
	case <-timer.C:
		cn.close(fmt.Errorf("%w: not attached within %v", errConnClosed, wait))
		<-cn.done
		return nil, callError(args, cn.stderr.String(), cn.cause(), context.DeadlineExceeded)
	}
}

// ended reports whether cn has ended (or is ending): calls go through
// exec meanwhile.
func (cn *conn) ended() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err != nil
}

// cause is why cn ended.
func (cn *conn) cause() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err == nil {
		return errors.New("control client exited")
	}
	return cn.err
}

// close ends the connection: the client's whole process group is killed,
// our end of its output closed, and every pending call gets why.
func (cn *conn) close(why error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = why
	}
	cn.mu.Unlock()
	cn.stdin.Close()
	_ = syscall.Kill(-cn.cmd.Process.Pid, syscall.SIGKILL)
	cn.stdout.Close()
}

// call writes line and its end word and waits for the answer: the output
// of the line's blocks, and the lines of its %error block if one failed
// (err then wraps errControlError).
func (cn *conn) call(ctx context.Context, line string) ([]byte, string, error) {
	select {
	case cn.wsem <- struct{}{}:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	case <-cn.done:
		return nil, "", cn.lost()
	}
	req := &request{done: make(chan struct{})}
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		<-cn.wsem
		return nil, "", cn.lost()
	}
	cn.seq++
	req.end = fmt.Sprintf("%s-%d", cn.token, cn.seq)
	cn.pending = append(cn.pending, req)
	cn.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		cn.stdin.SetWriteDeadline(dl)
	} else {
		cn.stdin.SetWriteDeadline(time.Time{})
	}
	_, werr := io.WriteString(cn.stdin, line+"\ndisplay-message -p '"+req.end+"'\n")
	<-cn.wsem
	if werr != nil {
		// A partial line would garble the next one: the connection goes.
		cn.close(fmt.Errorf("%w: write: %w", errConnClosed, werr))
	}
	select {
	case <-req.done:
		return req.out, strings.Join(req.stderr, "\n"), req.err
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// lost is the error of a call on a connection that ended: the server
// exited or was killed (ErrServerExited, which run repeats through exec),
// or the connection was closed (not repeated).
func (cn *conn) lost() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil && errors.Is(cn.err, errConnClosed) {
		return cn.err
	}
	return fmt.Errorf("%w: control connection lost", ErrServerExited)
}

// read parses the client's output until it ends, then fails what is
// still pending.
func (cn *conn) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var (
		inBlock bool
		head    string
		lines   []string
	)
	attached := false
stream:
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if inBlock {
			if line == "%end "+head || line == "%error "+head {
				inBlock = false
				if err := cn.block(head, lines, strings.HasPrefix(line, "%error ")); err != nil {
					// Answers out of order: which call a block belongs
					// to is no longer known, so none is trusted, not
					// even what is already read (a pending call could
					// complete with another's answer).
					cn.close(err)
					break stream
				}
				lines = nil
				continue
			}
			lines = append(lines, line)
			continue
		}
		switch {
		case strings.HasPrefix(line, "%begin "):
			inBlock, head = true, strings.TrimPrefix(line, "%begin ")
		case !attached && strings.HasPrefix(line, "%session-changed ") && strings.HasSuffix(line, " "+ControlSession):
			attached = true
			close(cn.attached)
		}
	}
	_ = cn.cmd.Wait()
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = fmt.Errorf("%w: control client exited", ErrServerExited)
	}
	pending := cn.pending
	cn.pending = nil
	cn.mu.Unlock()
	cn.stdin.Close()
	for _, req := range pending {
		req.err = cn.lost()
		close(req.done)
	}
	close(cn.done)
}

// block hands one finished block to the oldest pending call: its end
// word completes the call, an %error block marks it failed, any other
// block's lines are its output. Blocks of commands not written on stdin
// (the flags field is 0: the attach command itself) are no call's. The
// end word of another call while this one is pending means the answers
// come out of order: block returns an error, and the connection must go.
func (cn *conn) block(head string, lines []string, failed bool) error {
	if !strings.HasSuffix(head, " 1") {
		return nil
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if len(cn.pending) == 0 {
		return nil
	}
	req := cn.pending[0]
	switch {
	case !failed && len(lines) == 1 && cn.token != "" && lines[0] != req.end && strings.HasPrefix(lines[0], cn.token+"-"):
		return fmt.Errorf("%w: answers out of order (%s while %s is pending)", errConnClosed, lines[0], req.end)
	case !failed && len(lines) == 1 && lines[0] == req.end:
		cn.pending = cn.pending[1:]
		if req.failed {
			req.err = errControlError
		}
		close(req.done)
	case failed:
		req.failed = true
		req.stderr = append(req.stderr, lines...)
	default:
		for _, l := range lines {
			req.out = append(req.out, l...)
			req.out = append(req.out, '\n')
		}
	}
	return nil
}
