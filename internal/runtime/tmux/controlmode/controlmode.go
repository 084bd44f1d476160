// Package controlmode speaks tmux's control-mode protocol over one `tmux -C`
// client: command lines written on its stdin, answers read back as %begin …
// %end|%error blocks and matched to their calls by an end word of each
// call's own. The tmux Client starts the client process and calls it; it
// must never choose which commands go over the connection, nor retry one.
package controlmode

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
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

// ErrClosed is the error of a call pending on a connection that was
// closed under it (another call timed out: the server may be wedged, so
// the call is not repeated).
var ErrClosed = errors.New("control connection closed")

// ErrControl is what a command answered with %error, as a non-zero
// exit is for an exec call.
var ErrControl = errors.New("tmux answered %error")

// Conn is one control-mode tmux client: its stdin takes command lines,
// its stdout gives one %begin … %end|%error block per command run, in
// the order written, between notifications (%sessions-changed, …) that
// are skipped. Each call's line is followed by a display-message of a
// word of its own, whose block ends the call's answer: a line of several
// commands gives a block per command run, a failed command skips the
// rest of its line, and if-shell adds the block of the command it runs,
// so blocks cannot simply be counted.
type Conn struct {
	cmd   *exec.Cmd
	stdin *os.File
	// stdout is read by read. The server holds the client's stdout too
	// (a control client hands it over): killing the client ends nothing
	// while a wedged server keeps it open, so close closes our end.
	stdout io.Closer
	// token starts every call's end word.
	token string
	// session is the session the client attaches to.
	session string
	// lostErr is what a call on a connection that ended wraps: the
	// server went away.
	lostErr error
	// stderr keeps what the client wrote on stderr, for errors.
	stderr *capped
	// attached is closed once the client is attached to session.
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

// request is one call on a Conn.
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

// New returns the connection of a client about to start: attached once
// the client reports session, its calls wrapping lost once the client has
// gone (the server exited).
func New(session string, lost error) (*Conn, error) {
	tok, err := token()
	if err != nil {
		return nil, err
	}
	return &Conn{
		token: tok, session: session, lostErr: lost, stderr: &capped{},
		attached: make(chan struct{}), done: make(chan struct{}), wsem: make(chan struct{}, 1),
	}, nil
}

// Stderr is where the client's stderr goes: kept, bounded, for errors.
func (cn *Conn) Stderr() io.Writer { return cn.stderr }

// StderrText is what the client wrote on stderr.
func (cn *Conn) StderrText() string { return cn.stderr.String() }

// Run hands cn its started client: cmd, the write end of its stdin, and
// its stdout, which cn reads until it ends.
func (cn *Conn) Run(cmd *exec.Cmd, stdin *os.File, stdout io.ReadCloser) {
	cn.cmd, cn.stdin, cn.stdout = cmd, stdin, stdout
	go cn.read(stdout)
}

// Attached is closed once the client is attached to its session.
func (cn *Conn) Attached() <-chan struct{} { return cn.attached }

// Done is closed once the client has exited and every pending call has
// its answer or error.
func (cn *Conn) Done() <-chan struct{} { return cn.done }

// Ended reports whether cn has ended (or is ending): calls go through
// exec meanwhile.
func (cn *Conn) Ended() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err != nil
}

// Cause is why cn ended.
func (cn *Conn) Cause() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err == nil {
		return errors.New("control client exited")
	}
	return cn.err
}

// Close ends the connection: the client's whole process group is killed,
// our end of its output closed, and every pending call gets why.
func (cn *Conn) Close(why error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = why
	}
	cn.mu.Unlock()
	cn.stdin.Close()
	_ = syscall.Kill(-cn.cmd.Process.Pid, syscall.SIGKILL)
	cn.stdout.Close()
}

// Call writes line and its end word and waits for the answer: the output
// of the line's blocks, and the lines of its %error block if one failed
// (err then wraps ErrControl).
func (cn *Conn) Call(ctx context.Context, line string) ([]byte, string, error) {
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
		cn.Close(fmt.Errorf("%w: write: %w", ErrClosed, werr))
	}
	select {
	case <-req.done:
		return req.out, strings.Join(req.stderr, "\n"), req.err
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// lost is the error of a call on a connection that ended: the server
// exited or was killed (lost, which the tmux Client repeats through
// exec), or the connection was closed (not repeated).
func (cn *Conn) lost() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil && errors.Is(cn.err, ErrClosed) {
		return cn.err
	}
	return fmt.Errorf("%w: control connection lost", cn.lostErr)
}

// read parses the client's output until it ends, then fails what is
// still pending.
func (cn *Conn) read(stdout io.Reader) {
	if err := cn.scan(stdout); err != nil {
		cn.Close(err)
	}
	_ = cn.cmd.Wait()
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = fmt.Errorf("%w: control client exited", cn.lostErr)
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

// scan reads the client's output lines until it ends: each %begin …
// %end|%error block goes to block, the attach notification closes
// attached. It returns the error that breaks the connection (answers
// out of order); the output merely ending is nil.
func (cn *Conn) scan(stdout io.Reader) error {
	br := bufio.NewReaderSize(stdout, 64<<10)
	var (
		inBlock bool
		head    string
		lines   []string
	)
	attached := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil
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
					return err
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
		case !attached && strings.HasPrefix(line, "%session-changed ") && strings.HasSuffix(line, " "+cn.session):
			attached = true
			close(cn.attached)
		}
	}
}

// block hands one finished block to the oldest pending call: its end
// word completes the call, an %error block marks it failed, any other
// block's lines are its output. Blocks of commands not written on stdin
// (the flags field is 0: the attach command itself) are no call's. The
// end word of another call while this one is pending means the answers
// come out of order: block returns an error, and the connection must go.
func (cn *Conn) block(head string, lines []string, failed bool) error {
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
		return fmt.Errorf("%w: answers out of order (%s while %s is pending)", ErrClosed, lines[0], req.end)
	case !failed && len(lines) == 1 && lines[0] == req.end:
		cn.pending = cn.pending[1:]
		if req.failed {
			req.err = ErrControl
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

// token is a random word that marks the end of each call's answer.
func token() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tmux: control token: %w", err)
	}
	return "herd-ctl-" + hex.EncodeToString(b[:]), nil
}
