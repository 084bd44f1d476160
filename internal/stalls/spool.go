package stalls

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"herd"
	"herd/internal/api"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// Spool files: hook reports written while no daemon answered.
const (
	spoolSuffix = ".jsonl"
	// ingestSuffix marks a spool file the daemon took over (renamed) and
	// is reading; one left by a crash is read at the next start.
	ingestSuffix = ".ingest"
	// maxSpoolFile bounds what one spool file may hold; beyond, reports
	// are dropped (the agent must never be blocked by herd).
	maxSpoolFile = 16 << 20
	// spoolLockWait bounds how long a writer waits for the file lock.
	spoolLockWait = 200 * time.Millisecond
	// ingestLockWait bounds how long ingestion waits for a writer's lock.
	// Writers hold it for one write; one holding it longer is stuck (a
	// `herd hook` stopped with Ctrl-Z), and its file waits for a rescan.
	ingestLockWait = time.Second
	// rescanEvery is a safety net beside fsnotify.
	rescanEvery = 30 * time.Second
)

// ActivityDir is where `herd hook` spools reports when the daemon of
// stateDir does not answer; the daemon ingests them.
func ActivityDir(stateDir string) string { return filepath.Join(stateDir, "activity") }

// SpoolActivity appends one report to <state-dir>/activity/<session>.jsonl,
// for the daemon to ingest later. It never waits long: the file lock is
// tried for a short while only, and a report that cannot be written is
// returned as an error for the caller to log.
func SpoolActivity(stateDir string, rep api.ActivityReport) error {
	if !herd.InNamespace(rep.Session) {
		return fmt.Errorf("activity: invalid session name %q", rep.Session)
	}
	line, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("activity: %w", err)
	}
	line = append(line, '\n')
	dir := ActivityDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("activity: %w", err)
	}
	path := filepath.Join(dir, rep.Session+spoolSuffix)
	deadline := time.Now().Add(spoolLockWait)
	for {
		done, err := appendLocked(path, line, deadline)
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("activity: spool file busy")
		}
	}
}

// appendLocked appends line to path under an exclusive lock. It reports
// done=false when the daemon renamed the file away meanwhile (the caller
// retries on the new file).
func appendLocked(path string, line []byte, deadline time.Time) (done bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return false, fmt.Errorf("activity: %w", err)
	}
	defer f.Close()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			return false, fmt.Errorf("activity: lock spool file: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("activity: %w", err)
	}
	named, err := os.Stat(path)
	if err != nil || !os.SameFile(held, named) {
		return false, nil // taken over by the daemon: write to a fresh file
	}
	if held.Size()+int64(len(line)) > maxSpoolFile {
		return true, errors.New("activity: spool file full; report dropped")
	}
	if _, err := f.Write(line); err != nil {
		return false, fmt.Errorf("activity: %w", err)
	}
	return true, nil
}

// ingestLoop ingests spooled reports: all of them at start, then each file
// as fsnotify reports it, with a periodic rescan as a safety net.
func (w *Stalls) ingestLoop(ctx context.Context) {
	dir := ActivityDir(w.o.StateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.o.Log.Warn("activity spool unavailable", "dir", dir, "err", err)
		return
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fw, err := fsnotify.NewWatcher(); err != nil {
		w.o.Log.Warn("activity spool: no file notifications; rescanning", "err", err)
	} else if err := fw.Add(dir); err != nil {
		fw.Close()
		w.o.Log.Warn("activity spool: no file notifications; rescanning", "dir", dir, "err", err)
	} else {
		defer fw.Close()
		events, errs = fw.Events, fw.Errors
	}
	w.ingestAll(ctx, dir)
	rescan := time.NewTicker(rescanEvery)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rescan.C:
			w.ingestAll(ctx, dir)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create|fsnotify.Write) && strings.HasSuffix(ev.Name, spoolSuffix) {
				w.ingestFile(ctx, ev.Name)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.o.Log.Warn("activity spool: notifications", "err", err)
			w.ingestAll(ctx, dir)
		}
	}
}

// IngestAll ingests every spool file now, leftovers of a crash first.
func (w *Stalls) IngestAll(ctx context.Context) { w.ingestAll(ctx, ActivityDir(w.o.StateDir)) }

// ingestAll ingests every spool file of dir, leftovers of a crash first.
func (w *Stalls) ingestAll(ctx context.Context, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.o.Log.Warn("activity spool: read dir", "dir", dir, "err", err)
		return
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), spoolSuffix+ingestSuffix) {
			w.ingestTaken(ctx, filepath.Join(dir, e.Name()))
		}
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), spoolSuffix) {
			w.ingestFile(ctx, filepath.Join(dir, e.Name()))
		}
	}
}

// ingestFile takes a spool file over by renaming it (writers then start a
// fresh one), and ingests it.
func (w *Stalls) ingestFile(ctx context.Context, path string) {
	info, err := os.Lstat(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.o.Log.Warn("activity spool: stat", "path", path, "err", err)
		}
		return
	}
	if !info.Mode().IsRegular() {
		// A FIFO would block the open; a symlink would point elsewhere.
		w.o.Log.Warn("activity spool: not a regular file; ignored", "path", path, "mode", info.Mode().String())
		return
	}
	taken := path + ingestSuffix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.Rename(path, taken); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.o.Log.Warn("activity spool: take file", "path", path, "err", err)
		}
		return
	}
	w.ingestTaken(ctx, taken)
}

// ingestTaken reads a taken-over spool file once its last writer is done
// (the writers' lock), applies each report in order and removes the file.
func (w *Stalls) ingestTaken(ctx context.Context, path string) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; the file is
	// checked to be regular before any read.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.o.Log.Warn("activity spool: open", "path", path, "err", err)
		}
		return
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		w.o.Log.Warn("activity spool: not a regular file; ignored", "path", path, "err", err)
		return
	}
	if err := lockSpool(ctx, f, ingestLockWait); err != nil {
		w.o.Log.Warn("activity spool: file left for the next rescan", "path", path, "err", err)
		return
	}
	n, bad := 0, 0
	sc := bufio.NewScanner(io.LimitReader(f, maxSpoolFile))
	sc.Buffer(make([]byte, 0, 64<<10), MaxReportBody)
	for sc.Scan() {
		if ctx.Err() != nil {
			return // the file stays; the next start ingests it
		}
		var rep api.ActivityReport
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			bad++
			continue
		}
		if _, err := w.ApplyReport(ctx, rep, true); err != nil {
			bad++
			continue
		}
		n++
	}
	if err := sc.Err(); err != nil {
		w.o.Log.Warn("activity spool: read", "path", path, "err", err)
	}
	if bad > 0 {
		w.o.Log.Warn("activity spool: skipped bad reports", "path", path, "skipped", bad)
	}
	w.o.Log.Debug("activity spool ingested", "path", path, "reports", n)
	if err := os.Remove(path); err != nil {
		w.o.Log.Warn("activity spool: remove", "path", path, "err", err)
	}
}

// lockSpool takes f's exclusive lock, trying without blocking until ctx
// ends or wait has passed: a writer that holds the lock (stopped, or
// stuck) must not block ingestion nor the daemon's shutdown.
func lockSpool(ctx context.Context, f *os.File, wait time.Duration) error {
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
