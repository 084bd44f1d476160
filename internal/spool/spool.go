// Package spool keeps hook reports written while no daemon answered, for the daemon to ingest later.
package spool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
)

// Spool files: one per session, <dir>/<session>.jsonl, one JSON report a
// line.
const (
	// Suffix ends every spool file.
	Suffix = ".jsonl"
	// ingestSuffix marks a spool file the daemon took over (renamed) and
	// is reading; one left by a crash is read at the next start.
	ingestSuffix = ".ingest"
	// MaxFile bounds what one spool file may hold; beyond, reports are
	// dropped (the agent must never be blocked by herd).
	MaxFile = 16 << 20
	// MaxLine bounds one report line: the hook payload limit,
	// base64-encoded, plus the envelope. A longer line is skipped.
	MaxLine = agents.MaxPayload*4/3 + 4096
	// appendLockWait bounds how long a writer waits for the file lock.
	appendLockWait = 200 * time.Millisecond
)

// Dir is where `herd hook` spools reports for the daemon of stateDir.
func Dir(stateDir string) string { return filepath.Join(stateDir, "activity") }

// Append appends one report to <dir>/<session>.jsonl. It never waits long:
// the file lock is tried for a short while only, and a report that cannot
// be written is returned as an error for the caller to log.
func Append(dir string, rep api.ActivityReport) error {
	if !herd.InNamespace(rep.Session) {
		return fmt.Errorf("spool: invalid session name %q", rep.Session)
	}
	line, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if len(line) >= MaxLine {
		return fmt.Errorf("spool: report of %d bytes is over the %d-byte line limit; dropped", len(line), MaxLine)
	}
	line = append(line, '\n')
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	path := filepath.Join(dir, rep.Session+Suffix)
	deadline := time.Now().Add(appendLockWait)
	for {
		done, err := appendLocked(path, line, deadline)
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("spool: file busy")
		}
	}
}

// appendLocked appends line to path under an exclusive lock. It reports
// done=false when the daemon renamed the file away meanwhile (the caller
// retries on the new file).
func appendLocked(path string, line []byte, deadline time.Time) (done bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	if !held.Mode().IsRegular() {
		return true, fmt.Errorf("spool: %s is not a regular file; report dropped", path)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) || time.Now().After(deadline) {
			return false, fmt.Errorf("spool: lock file: %w", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	if held, err = f.Stat(); err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	named, err := os.Lstat(path)
	if err != nil || !os.SameFile(held, named) {
		return false, nil // taken over by the daemon: write to a fresh file
	}
	if held.Size()+int64(len(line)) > MaxFile {
		return true, errors.New("spool: file full; report dropped")
	}
	if _, err := f.Write(line); err != nil {
		return false, fmt.Errorf("spool: %w", err)
	}
	return true, nil
}
