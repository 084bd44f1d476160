package execrt

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// Follower reads what is appended to a capture file, across the capture
// process's rotations (the full file renamed to <path>.1, a new one started)
// and across the older truncation by Cap. It holds the file it reads open
// between polls, so the bytes written just before a rotation are read from
// the renamed file, not lost; it lets go of that file within the poll that
// sees the rotation, so a reader never keeps a rotated-away file on disk.
// Not safe for concurrent use.
type Follower struct {
	// Path is the capture file (an incarnation's .stdout or .stderr).
	Path string
	// Window is how far from the end the first poll starts, so output from
	// before the reader began is not replayed whole; 0 starts at the end.
	Window int64

	f       *os.File // the file being read, or nil before the first poll
	off     int64    // next offset to read in f
	started bool
}

// Poll returns at most max bytes written since the last poll, in order.
// gap reports that bytes before the returned ones were skipped (the first
// poll's window started inside the file, the reader fell more than a
// rotation behind, or the file was truncated): the returned bytes may start
// inside a line. A missing file is no output yet.
func (fo *Follower) Poll(max int64) (b []byte, gap bool, err error) {
	if max <= 0 {
		return nil, false, nil
	}
	if fo.f == nil {
		opened, err := fo.open()
		if err != nil || !opened {
			return nil, false, err
		}
		if !fo.started {
			fo.started = true
			size, err := fo.size()
			if err != nil {
				return nil, false, err
			}
			if size > fo.Window {
				fo.off = size - fo.Window
				gap = fo.off > 0
			}
		}
	}
	b, err = fo.read(max)
	if err != nil {
		return b, gap, err
	}
	rotated, err := fo.rotated()
	if err != nil || !rotated {
		return b, gap, err
	}
	// The file was renamed away: what is left of it was written before the
	// rotation. Read it (within max), then move to the new file for good.
	more, err := fo.read(max - int64(len(b)))
	b = append(b, more...)
	if err != nil {
		return b, gap, err
	}
	if size, err := fo.size(); err != nil || fo.off < size {
		gap = true // the rest of the old file is skipped
	}
	if !fo.wasRotatedTo(fo.f) {
		gap = true // rotated more than once since the last poll
	}
	fo.f.Close()
	fo.f, fo.off = nil, 0
	if _, err := fo.open(); err != nil {
		return b, gap, err
	}
	more, err = fo.read(max - int64(len(b)))
	return append(b, more...), gap, err
}

// Close lets go of the file.
func (fo *Follower) Close() error {
	if fo.f == nil {
		return nil
	}
	err := fo.f.Close()
	fo.f = nil
	return err
}

// open opens Path, reporting false when it does not exist yet.
func (fo *Follower) open() (bool, error) {
	f, err := os.Open(fo.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	fo.f = f
	return true, nil
}

func (fo *Follower) size() (int64, error) {
	info, err := fo.f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// read reads at most max bytes from the current offset; a file truncated
// under the reader (Cap) is read again from its start.
func (fo *Follower) read(max int64) ([]byte, error) {
	if max <= 0 {
		return nil, nil
	}
	size, err := fo.size()
	if err != nil {
		return nil, err
	}
	if size < fo.off {
		fo.off = 0
	}
	n := min(size-fo.off, max)
	if n <= 0 {
		return nil, nil
	}
	buf := make([]byte, n)
	got, err := fo.f.ReadAt(buf, fo.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	fo.off += int64(got)
	return buf[:got], nil
}

// rotated reports whether Path now names another file than the one read.
func (fo *Follower) rotated() (bool, error) {
	held, err := fo.f.Stat()
	if err != nil {
		return false, err
	}
	named, err := os.Stat(fo.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // between the rename and the new file: not yet
	}
	if err != nil {
		return false, err
	}
	return !os.SameFile(held, named), nil
}

// wasRotatedTo reports whether f is the file now at Path+".1", that is, it
// was rotated once, not twice.
func (fo *Follower) wasRotatedTo(f *os.File) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	rot, err := os.Stat(fo.Path + ".1")
	return err == nil && os.SameFile(held, rot)
}
