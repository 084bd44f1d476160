package usage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxChunk bounds what one read of a file takes in; a file further
// behind is read on in the next chunks.
const maxChunk = 16 << 20

// fileIdent tells one file from another put at the same path: device and
// inode.
func fileIdent(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	}
	return ""
}

// chunk is the whole lines read from a file at one offset.
type chunk struct {
	lines [][]byte
	// next is the offset just after the last whole line (or after the
	// overlong line skipped).
	next int64
	// skipped is set when a line longer than maxChunk was skipped.
	skipped bool
}

// readLines reads the whole lines of f from off on, at most maxChunk
// bytes of them. A last line without its newline is left for a later
// read (the agent is still writing it); a line longer than maxChunk is
// passed over up to its end.
func readLines(f *os.File, off, size int64) (chunk, error) {
	n := min(size-off, maxChunk)
	if n <= 0 {
		return chunk{next: off}, nil
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return chunk{next: off}, err
	}
	buf = buf[:got]
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		if int64(got) < maxChunk {
			return chunk{next: off}, nil // a line being written
		}
		// One line longer than a chunk: passed over to its end, found by
		// reading on.
		skip, err := skipLine(f, off+int64(got))
		return chunk{next: skip, skipped: true}, err
	}
	c := chunk{next: off + int64(end) + 1}
	for line := range bytes.SplitSeq(buf[:end], []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) > 0 {
			c.lines = append(c.lines, line)
		}
	}
	return c, nil
}

// skipLine returns the offset just after the next newline at or after
// off, or off itself when the line has no end yet.
func skipLine(f *os.File, off int64) (int64, error) {
	buf := make([]byte, 1<<20)
	for at := off; ; {
		n, err := f.ReadAt(buf, at)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return at + int64(i) + 1, nil
		}
		at += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return off, nil
			}
			return off, err
		}
	}
}
