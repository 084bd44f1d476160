package execrt

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
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

// Tailer follows one output file the agent appends to (O_APPEND) and that
// the daemon caps with Cap. Not safe for concurrent use.
type Tailer struct {
	// Path is the file followed.
	Path    string
	off     int64
	started bool
	// skipToLine drops the first, partial line of an adoption window or
	// of what follows bytes skipped (see skip).
	skipToLine bool
	partial    []byte
	// Lost counts the bytes never read: dropped by the rotation (the
	// rotated copy keeps only the end) or beyond maxPollRead in it.
	Lost int64
	// held is the file last read: when Path names another one, the
	// capture process rotated it to Path.1 (see RotatingFile).
	held os.FileInfo
	// seenAt is the now of the last poll and seenSize the size of the
	// file it saw (-1: none), for a CapFile right after it.
	seenAt   time.Time
	seenSize int64
}

// Poll reads what was appended since the last poll and calls line for each
// complete line with the time it was written (the file's mtime, never in
// the future). The first poll starts at most adoptWindow from the end, at
// a line start, so output from before the daemon started is not replayed.
//
// A file that does not exist yet, or that neither grew nor was rotated
// since the last poll, costs one stat: a quiet agent's files are not
// opened at every poll.
func (t *Tailer) Poll(now time.Time, line func(b []byte, at time.Time)) error {
	info, err := os.Stat(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		t.seenAt, t.seenSize = now, -1
		return nil
	}
	if err == nil {
		t.seenAt, t.seenSize = now, info.Size()
		if t.held != nil && os.SameFile(t.held, info) && info.Size() == t.off {
			t.held = info
			return nil
		}
	}
	f, err := os.Open(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		t.seenAt, t.seenSize = now, -1
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err = f.Stat()
	if err != nil {
		return err
	}
	at := info.ModTime()
	if at.After(now) {
		at = now
	}
	if t.held != nil && !os.SameFile(t.held, info) {
		// Rotated by the capture process: read the rest of the old file
		// from its new name, then the new file from its start.
		t.readRenamed(now, line)
		t.off = 0
	}
	t.held, t.seenAt, t.seenSize = info, now, info.Size()
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
func (t *Tailer) feed(b []byte, at time.Time, line func([]byte, time.Time)) {
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

// CapFile keeps the file under max bytes with Cap, then reads the
// bytes the agent appended between the last poll and the rotation from the
// rotated copy, so no line is lost to an ordinary rotation. A flood is
// bounded: the rotated copy keeps only the file's last max bytes, and at
// most maxPollRead of it is read; the rest counts as lost.
//
// Right after a Poll with the same now, the size that poll saw decides
// (no second stat).
func (t *Tailer) CapFile(max int64, now time.Time, line func([]byte, time.Time)) error {
	size := t.seenSize
	if !t.seenAt.Equal(now) {
		info, err := os.Stat(t.Path)
		if err != nil {
			return nil
		}
		size = info.Size()
	}
	if size <= max {
		return nil
	}
	if err := t.Poll(now, line); err != nil {
		return err
	}
	from, err := Cap(t.Path, max)
	if err != nil {
		return err
	}
	err = t.readRotated(from, now, line)
	t.off = 0
	return err
}

// readRotated reads what is left unread in the rotated copy, which holds
// the file's bytes from offset from on: from t.off (or from, when the
// rotation dropped bytes the tailer had not read), at most maxPollRead.
func (t *Tailer) readRotated(from int64, now time.Time, line func([]byte, time.Time)) error {
	f, err := os.Open(t.Path + ".1")
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	start, end := max(t.off, from), from+info.Size()
	if start >= end {
		return nil
	}
	if start > t.off {
		t.skip(start-t.off, now, line)
	}
	n := min(end-start, maxPollRead)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, start-from)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	t.feed(buf[:got], now, line)
	if rest := end - start - int64(got); rest > 0 {
		t.skip(rest, now, line)
		// The file went on from a line start if the copy ends a line.
		var last [1]byte
		if _, err := f.ReadAt(last[:], end-1-from); err == nil && last[0] == '\n' {
			t.skipToLine = false
		}
	}
	return nil
}

// skip accounts for n bytes that will never be read. The line they cut is
// delivered as far as it got (a cut line still counts), and reading
// resumes at the next line start: the bytes after the gap are the middle
// of some line.
func (t *Tailer) skip(n int64, at time.Time, line func([]byte, time.Time)) {
	t.Lost += n
	if len(t.partial) > 0 {
		line(t.partial[:min(len(t.partial), maxLine)], at)
		t.partial = nil
	}
	t.skipToLine = true
}

// readRenamed reads what is left unread of the file last followed, now
// Path.1 after a rotation by the capture process, at most maxPollRead. A
// file rotated twice since the last poll is gone: what it held counts as
// skipped.
func (t *Tailer) readRenamed(now time.Time, line func([]byte, time.Time)) {
	f, err := os.Open(t.Path + ".1")
	if err != nil {
		t.skip(0, now, line)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !os.SameFile(info, t.held) {
		t.skip(0, now, line)
		return
	}
	rest := info.Size() - t.off
	if rest <= 0 {
		return
	}
	buf := make([]byte, min(rest, maxPollRead))
	got, err := f.ReadAt(buf, t.off)
	if err != nil && !errors.Is(err, io.EOF) {
		t.skip(rest, now, line)
		return
	}
	t.feed(buf[:got], now, line)
	if left := rest - int64(got); left > 0 {
		t.skip(left, now, line)
	}
	// The new file starts a line when the old one ended one.
	if t.skipToLine && len(t.partial) == 0 && got > 0 && buf[got-1] == '\n' {
		t.skipToLine = false
	}
}
