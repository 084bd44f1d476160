package execrt

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// Capture keeps an agent's output bounded as it is written. The agent's
// stdout and stderr are pipes; a small capture process (herd re-executed as
// `herd capture`, see RunCapture) reads them and writes each to its file,
// rotating it to <path>.1 before a write would take it past the cap. So no
// file is ever over the cap on disk, whatever the agent writes and however
// fast: the agent blocks on a full pipe instead of the disk filling up. The
// capture process has its own session, like the agent, so it outlives the
// daemon; it exits when every writer of both pipes has closed them (the
// agent and whatever it started that kept them).
//
// Files on disk per stream: <path> (at most the cap) and <path>.1 (the
// previous <path>, at most the cap). ReadTail reads both.

// Capture file descriptors in the capture process: the read ends of the
// agent's stdout and stderr pipes.
const (
	captureStdoutFD = 3
	captureStderrFD = 4
)

// captureBuf is the size of one read from a pipe, and so of one write.
const captureBuf = 64 << 10

// captureArgs are the arguments the capture process gets after
// Runtime.CaptureCommand.
func captureArgs(maxBytes int64, stdout, stderr string) []string {
	return []string{"--max-bytes", strconv.FormatInt(maxBytes, 10), "--stdout", stdout, "--stderr", stderr}
}

// RunCapture is the body of the capture process: it parses args (as
// written by Launch: --max-bytes N --stdout PATH --stderr PATH), copies
// descriptor 3 to the stdout file and descriptor 4 to the stderr file with
// rotation at the cap, and returns when both reach end of file. Problems
// are written to errOut; the exit code is 0, or 2 for bad arguments. A
// file that cannot be written loses what is written to it, but its pipe is
// still drained: the agent must never block on its output.
func RunCapture(args []string, errOut io.Writer) int {
	fl := flag.NewFlagSet("capture", flag.ContinueOnError)
	fl.SetOutput(errOut)
	maxBytes := fl.Int64("max-bytes", DefaultMaxLogBytes, "cap of each file")
	stdout := fl.String("stdout", "", "stdout file")
	stderr := fl.String("stderr", "", "stderr file")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *stdout == "" || *stderr == "" || *maxBytes <= 0 || fl.NArg() != 0 {
		fmt.Fprintln(errOut, "capture: want --max-bytes N (> 0) --stdout PATH --stderr PATH and nothing else")
		return 2
	}
	// Its own session keeps terminal signals away; these keep a hangup or
	// an interrupt sent to it by mistake from cutting the agent's output.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)

	var wg sync.WaitGroup
	for _, s := range []struct {
		fd   uintptr
		path string
	}{{captureStdoutFD, *stdout}, {captureStderrFD, *stderr}} {
		in := os.NewFile(s.fd, s.path+" pipe")
		if in == nil {
			fmt.Fprintf(errOut, "capture: no descriptor %d\n", s.fd)
			continue
		}
		wg.Go(func() {
			defer in.Close()
			w := &RotatingFile{Path: s.path, MaxBytes: *maxBytes}
			defer w.Close()
			if err := Drain(in, w); err != nil {
				fmt.Fprintf(errOut, "capture: %s: %v\n", s.path, err)
			}
		})
	}
	wg.Wait()
	return 0
}

// Drain copies in to w until in ends. A failed write is reported once, at
// the end, and reading goes on: the writer of in must never block on it.
func Drain(in io.Reader, w io.Writer) error {
	buf := make([]byte, captureBuf)
	var werr error
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, e := w.Write(buf[:n]); e != nil && werr == nil {
				werr = e
			}
		}
		if errors.Is(err, io.EOF) {
			return werr
		}
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return errors.Join(werr, err)
		}
	}
}

// RotatingFile appends to Path and keeps it at most MaxBytes on disk at all
// times: a write that would take it past MaxBytes fills it to exactly
// MaxBytes, renames it to Path+".1" (replacing the previous one) and goes
// on in a new, empty Path. Not safe for concurrent use.
type RotatingFile struct {
	Path     string
	MaxBytes int64

	f    *os.File
	size int64 // of f as written through it
}

// Write writes b, rotating as often as it takes. After a failed open or
// write the bytes are dropped and the next Write tries again.
func (r *RotatingFile) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if r.f == nil {
			if err := r.open(); err != nil {
				return written, err
			}
		}
		if r.size >= r.MaxBytes {
			if err := r.rotate(); err != nil {
				return written, err
			}
			continue
		}
		n := int(min(int64(len(b)), r.MaxBytes-r.size))
		m, err := r.f.Write(b[:n])
		r.size += int64(m)
		written += m
		b = b[m:]
		if err != nil {
			// Drop the descriptor: a file removed or truncated under us
			// is reopened at its real size next time.
			r.f.Close()
			r.f = nil
			return written, err
		}
	}
	return written, nil
}

// open opens Path for appending and learns its size (a restarted capture,
// or one appending to an existing incarnation's file).
func (r *RotatingFile) open() error {
	f, err := os.OpenFile(r.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, info.Size()
	return nil
}

// rotate moves the full file to Path+".1" and starts an empty Path.
func (r *RotatingFile) rotate() error {
	r.f.Close()
	r.f = nil
	if err := os.Rename(r.Path, r.Path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return r.open()
}

// Close closes the file.
func (r *RotatingFile) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
