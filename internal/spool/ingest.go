package spool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"herd/internal/api"
)

// Ingestion bounds.
const (
	// ingestLockWait bounds how long ingestion waits for a writer's lock.
	// Writers hold it for one write; one holding it longer is stuck (a
	// `herd hook` stopped with Ctrl-Z), and its file waits for a rescan.
	ingestLockWait = time.Second
	// DefaultRescanEvery is the safety net beside fsnotify.
	DefaultRescanEvery = 30 * time.Second
	// maxProblems bounds the problems a Result lists (all are counted).
	maxProblems = 10
)

// Apply applies one spooled report. An error skips that report (it is
// counted and logged) and ingestion goes on with the next.
type Apply func(ctx context.Context, rep api.ActivityReport) error

// Result counts what one ingestion did.
type Result struct {
	Files   int // spool files read to the end and removed
	Applied int // reports applied
	Skipped int // lines skipped: over-long, garbled, or refused by Apply
	Left    int // files left for later (a writer holds the lock, or ctx ended)
	// Problems describes the first skipped lines and left files.
	Problems []string
}

func (r *Result) add(o Result) {
	r.Files += o.Files
	r.Applied += o.Applied
	r.Skipped += o.Skipped
	r.Left += o.Left
	for _, p := range o.Problems {
		r.problem("%s", p)
	}
}

func (r *Result) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Ingest applies every report spooled in dir, in order per file, leftovers
// of an interrupted ingestion first, and removes each file read to its
// end. A bad line (over MaxLine, not a report, refused by apply) is skipped
// and every line after it is still applied. Files a writer holds locked
// are left for a later call. It is one pass of an Ingester with no log.
func Ingest(ctx context.Context, dir string, apply func(api.ActivityReport) error) (Result, error) {
	in := &Ingester{Dir: dir, Apply: func(_ context.Context, rep api.ActivityReport) error { return apply(rep) }}
	return in.IngestAll(ctx)
}

// Ingester ingests a spool directory: all of it at start, then each file
// as fsnotify reports it, with a periodic rescan as a safety net.
type Ingester struct {
	Dir         string
	Apply       Apply
	Log         *slog.Logger  // nil: no log
	RescanEvery time.Duration // 0: DefaultRescanEvery

	// mu guards the fields below.
	mu sync.Mutex
	// ignored holds the entries already reported as not regular files,
	// by name and inode, so a FIFO is warned about once, not every rescan.
	ignored map[ignoredKey]bool
}

// ignoredKey names one directory entry that is not a regular file.
type ignoredKey struct {
	name  string
	inode uint64
}

func (in *Ingester) log() *slog.Logger {
	if in.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Log
}

// Run ingests until ctx ends.
func (in *Ingester) Run(ctx context.Context) {
	if err := os.MkdirAll(in.Dir, 0o700); err != nil {
		in.log().Warn("activity spool unavailable", "dir", in.Dir, "err", err)
		return
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		in.log().Warn("activity spool: no file notifications; rescanning", "err", err)
	} else if err := w.Add(in.Dir); err != nil {
		w.Close()
		in.log().Warn("activity spool: no file notifications; rescanning", "dir", in.Dir, "err", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	every := in.RescanEvery
	if every <= 0 {
		every = DefaultRescanEvery
	}
	in.logged(in.IngestAll(ctx))
	rescan := time.NewTicker(every)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rescan.C:
			in.logged(in.IngestAll(ctx))
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create|fsnotify.Write) && strings.HasSuffix(ev.Name, Suffix) {
				in.logged(in.IngestFile(ctx, ev.Name), nil)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			in.log().Warn("activity spool: notifications", "err", err)
			in.logged(in.IngestAll(ctx))
		}
	}
}

// logged logs a pass's result.
func (in *Ingester) logged(r Result, err error) {
	if err != nil {
		in.log().Warn("activity spool: read dir", "dir", in.Dir, "err", err)
	}
	if r.Files > 0 || r.Applied > 0 {
		in.log().Debug("activity spool ingested", "files", r.Files, "reports", r.Applied)
	}
}

// IngestAll ingests every spool file of the directory, leftovers of an
// interrupted ingestion first.
func (in *Ingester) IngestAll(ctx context.Context) (Result, error) {
	var total Result
	entries, err := os.ReadDir(in.Dir)
	if err != nil {
		return total, fmt.Errorf("spool: %w", err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), Suffix+ingestSuffix) {
			total.add(in.ingestTaken(ctx, filepath.Join(in.Dir, e.Name())))
		}
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), Suffix) {
			total.add(in.IngestFile(ctx, filepath.Join(in.Dir, e.Name())))
		}
	}
	return total, nil
}

// IngestFile takes a spool file over by renaming it (writers then start a
// fresh one), and ingests it.
func (in *Ingester) IngestFile(ctx context.Context, path string) Result {
	info, err := os.Lstat(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			in.log().Warn("activity spool: stat", "path", path, "err", err)
		}
		return Result{}
	}
	if !info.Mode().IsRegular() {
		// A FIFO would block the open; a symlink would point elsewhere.
		in.ignore(path, info)
		return Result{}
	}
	taken := path + ingestSuffix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.Rename(path, taken); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			in.log().Warn("activity spool: take file", "path", path, "err", err)
		}
		return Result{}
	}
	return in.ingestTaken(ctx, taken)
}

// ignore warns, once per entry, that path is not a regular file.
func (in *Ingester) ignore(path string, info os.FileInfo) {
	key := ignoredKey{name: path}
	if st, ok := info.Sys().(*unix.Stat_t); ok {
		key.inode = st.Ino
	}
	in.mu.Lock()
	seen := in.ignored[key]
	if !seen {
		if in.ignored == nil {
			in.ignored = map[ignoredKey]bool{}
		}
		in.ignored[key] = true
	}
	in.mu.Unlock()
	if !seen {
		in.log().Warn("activity spool: not a regular file; ignored", "path", path, "mode", info.Mode().String())
	}
}

// ingestTaken reads a taken-over spool file once its last writer is done
// (the writers' lock), applies each report in order and removes the file.
func (in *Ingester) ingestTaken(ctx context.Context, path string) Result {
	var r Result
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the file is
	// checked to be regular before any read.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			if info, lerr := os.Lstat(path); lerr == nil && !info.Mode().IsRegular() {
				in.ignore(path, info)
			} else {
				in.log().Warn("activity spool: open", "path", path, "err", err)
			}
		}
		return r
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		in.log().Warn("activity spool: stat", "path", path, "err", err)
		return r
	}
	if !info.Mode().IsRegular() {
		in.ignore(path, info)
		return r
	}
	if err := lockFile(ctx, f, ingestLockWait); err != nil {
		in.log().Warn("activity spool: file left for the next rescan", "path", path, "err", err)
		r.Left++
		r.problem("%s: left for later: %v", filepath.Base(path), err)
		return r
	}
	if !in.readReports(ctx, f, path, &r) {
		r.Left++
		return r // the file stays; the next pass (or start) reads it again
	}
	if r.Skipped > 0 {
		in.log().Warn("activity spool: skipped bad reports", "path", path, "skipped", r.Skipped, "applied", r.Applied)
	}
	if err := os.Remove(path); err != nil {
		in.log().Warn("activity spool: remove", "path", path, "err", err)
	}
	r.Files++
	return r
}

// readReports applies the reports of f in order. It returns false when ctx
// ended before the end of the file.
func (in *Ingester) readReports(ctx context.Context, f io.Reader, path string, r *Result) bool {
	lines := newLineReader(io.LimitReader(f, MaxFile), MaxLine)
	for n := 1; ; n++ {
		line, long, err := lines.next()
		if errors.Is(err, io.EOF) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			in.log().Warn("activity spool: read", "path", path, "err", err)
			r.problem("%s: read: %v", filepath.Base(path), err)
			return true
		}
		if long > 0 {
			r.Skipped++
			r.problem("%s:%d: line of %d bytes is over the %d-byte limit; skipped", filepath.Base(path), n, long, MaxLine)
			in.log().Warn("activity spool: over-long line skipped", "path", path, "line", n, "bytes", long)
			continue
		}
		if len(line) == 0 {
			continue
		}
		var rep api.ActivityReport
		if err := json.Unmarshal(line, &rep); err != nil {
			r.Skipped++
			r.problem("%s:%d: not a report: %v", filepath.Base(path), n, err)
			in.log().Warn("activity spool: garbled line skipped", "path", path, "line", n, "err", err)
			continue
		}
		if err := in.Apply(ctx, rep); err != nil {
			r.Skipped++
			r.problem("%s:%d: report refused: %v", filepath.Base(path), n, err)
			continue
		}
		r.Applied++
	}
}

// lineReader splits a stream into lines of at most max bytes. A longer
// line is read past, not kept: next reports its length, and the line after
// it is read as usual. bufio.Scanner, by contrast, stops for good at the
// first over-long line, dropping every report after it.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline; or, for a line over max
// bytes, its length as long (and no line). The last line may lack a
// newline. At the end it returns io.EOF.
func (l *lineReader) next() (line []byte, long int, err error) {
	l.buf = l.buf[:0]
	total := 0
	for {
		chunk, err := l.r.ReadSlice('\n')
		total += len(chunk)
		if total <= l.max+1 { // +1: the newline
			l.buf = append(l.buf, chunk...)
		}
		switch {
		case err == nil:
			if total > l.max+1 {
				return nil, total - 1, nil
			}
			return l.buf[:len(l.buf)-1], 0, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if total == 0 {
				return nil, 0, io.EOF
			}
			if total > l.max {
				return nil, total, nil
			}
			return l.buf, 0, nil // a last line with no newline
		default:
			return nil, 0, err
		}
	}
}

// lockFile takes f's exclusive lock, trying without blocking until ctx
// ends or wait has passed: a writer that holds the lock (stopped, or
// stuck) must not block ingestion nor the daemon's shutdown.
func lockFile(ctx context.Context, f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("lock: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("lock: still held by a writer after %v", wait)
		}
		t := time.NewTimer(min(left, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lock: %w", ctx.Err())
		case <-t.C:
		}
	}
}
