package daemon

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"herd/internal/execrt"
)

// Tail bounds.
const (
	// adoptWindow is how much of an existing file the first poll reads: an
	// adopted agent's recent lines (its session id, its last event) without
	// replaying hours of output.
	adoptWindow = 64 << 10
	// maxPollRead bounds one poll, so a flooding agent cannot stall the tick.
	maxPollRead = 1 << 20
	// maxLine bounds a line; a longer one is cut and still counts.
	maxLine = 64 << 10
)

// tailer follows one output file the agent appends to (O_APPEND) and that
// the daemon caps with execrt.Cap. Not safe for concurrent use.
type tailer struct {
	path    string
	off     int64
	started bool
	// skipToLine drops the first, partial line of an adoption window.
	skipToLine bool
	partial    []byte
}

// poll reads what was appended since the last poll and calls line for each
// complete line with the time it was written (the file's mtime, never in
// the future). The first poll starts at most adoptWindow from the end, at
// a line start, so output from before the daemon started is not replayed.
func (t *tailer) poll(now time.Time, line func(b []byte, at time.Time)) error {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	at := info.ModTime()
	if at.After(now) {
		at = now
	}
	size := info.Size()
	if !t.started {
		t.started = true
		if size > adoptWindow {
			t.off = size - adoptWindow
			t.skipToLine = true
		}
	}
	if size < t.off {
		// Truncated by someone else: what was between is lost to us.
		t.off, t.partial = 0, nil
	}
	if size == t.off {
		return nil
	}
	n := min(size-t.off, maxPollRead)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, t.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	t.off += int64(got)
	t.feed(buf[:got], at, line)
	return nil
}

// feed splits b into lines, carrying an unfinished one to the next call.
func (t *tailer) feed(b []byte, at time.Time, line func([]byte, time.Time)) {
	if t.skipToLine {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return
		}
		b = b[i+1:]
		t.skipToLine = false
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.partial = append(t.partial, b...)
			if len(t.partial) > maxLine {
				line(t.partial[:maxLine], at)
				t.partial = nil
			}
			return
		}
		if len(t.partial) > 0 {
			full := append(t.partial, b[:i]...)
			t.partial = nil
			line(full[:min(len(full), maxLine)], at)
		} else {
			line(b[:min(i, maxLine)], at)
		}
		b = b[i+1:]
	}
}

// capFile keeps the file under max bytes with execrt.Cap, then reads the
// bytes the agent appended between the last poll and the rotation from the
// rotated copy, so no line is lost to the rotation.
func (t *tailer) capFile(max int64, now time.Time, line func([]byte, time.Time)) error {
	info, err := os.Stat(t.path)
	if err != nil || info.Size() <= max {
		return nil
	}
	if err := t.poll(now, line); err != nil {
		return err
	}
	if err := execrt.Cap(t.path, max); err != nil {
		return err
	}
	rotated, err := os.ReadFile(t.path + ".1")
	if err == nil && int64(len(rotated)) > t.off {
		t.feed(rotated[t.off:], now, line)
	}
	t.off = 0
	return nil
}
