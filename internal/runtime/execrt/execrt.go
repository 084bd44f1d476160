// Package execrt launches agents as detached child processes with their output captured to files.
package execrt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"herd"
	"herd/internal/proc"
	"herd/internal/runtime"
)

// DefaultMaxLogBytes caps each captured output file; see Cap.
const DefaultMaxLogBytes = 8 << 20

// Runtime launches agents as children in their own session and process
// group, so that signals to the daemon never reach them and they outlive it.
type Runtime struct {
	// LogDir holds one directory per session with each incarnation's
	// <incarnation>.stdout and .stderr.
	LogDir string
	// MaxLogBytes caps each output file (DefaultMaxLogBytes when 0).
	MaxLogBytes int64
	// CaptureCommand, when set, is the argv of the capture process (herd
	// itself: {os.Executable(), "capture"}); Launch appends the files and
	// the cap. The agent's output then goes through pipes to that process,
	// which never lets a file pass the cap (see RunCapture). When empty the
	// agent writes to the files itself and they are only capped after the
	// fact, by Cap.
	CaptureCommand []string
	// CaptureEnv is added to the capture process's environment.
	CaptureEnv []string

	mu sync.Mutex // guards the field below
	// flushing holds, by incarnation, the Captured channel of agents whose
	// capture process has not exited yet.
	flushing map[string]chan struct{}
}

// Flushed returns a channel closed once every byte the agent of
// incarnation inc wrote is in its files; nil when there is nothing to wait
// for (no capture process, or it has exited already). A reader of the
// last lines of an agent that just ended waits on it, bounded: an agent's
// background child holding its stdout keeps the capture process alive.
func (r *Runtime) Flushed(inc string) <-chan struct{} {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushing[inc]
}

// track remembers an agent's Captured channel until it is closed.
func (r *Runtime) track(inc string, captured chan struct{}) {
	r.mu.Lock()
	if r.flushing == nil {
		r.flushing = map[string]chan struct{}{}
	}
	r.flushing[inc] = captured
	r.mu.Unlock()
	go func() {
		<-captured
		r.mu.Lock()
		delete(r.flushing, inc)
		r.mu.Unlock()
	}()
}

// LogCap is the size each output file is capped at: MaxLogBytes or its
// default.
func (r *Runtime) LogCap() int64 { return r.maxLogBytes() }

// maxLogBytes is MaxLogBytes or its default.
func (r *Runtime) maxLogBytes() int64 {
	if r.MaxLogBytes <= 0 {
		return DefaultMaxLogBytes
	}
	return r.MaxLogBytes
}

// Spec describes one launch; Env is added to the daemon's environment
// (role env plus HERD_*).
type Spec = runtime.Spec

// Proc is a launched agent process, a child of this daemon.
type Proc struct {
	PID int
	cmd *exec.Cmd
	// captured is closed once the capture process (if any) has exited:
	// all output has been written to the files.
	captured chan struct{}
}

// Captured is closed once every byte the agent wrote is in its files: when
// the capture process has exited (at once when there is none). Only then
// is the capture process reaped, so a daemon never leaves it a zombie.
func (p *Proc) Captured() <-chan struct{} { return p.captured }

// Wait blocks until the process exits and returns how it ended.
func (p *Proc) Wait() herd.Exit {
	// Parked on the netpoller first: the wait(2) below then holds no OS
	// thread while the agent lives.
	_ = proc.ParkChild(p.cmd.Process.Pid)
	err := p.cmd.Wait()
	return ExitOf(p.cmd.ProcessState, err)
}

// ExitOf converts a wait result to an Exit.
func ExitOf(ps *os.ProcessState, err error) herd.Exit {
	if ps == nil {
		return herd.Exit{Reason: herd.ReasonProcessGone}
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		sig := int(ws.Signal())
		return herd.Exit{Signal: &sig, Reason: herd.ReasonSignal}
	default:
		code := ps.ExitCode()
		return herd.Exit{Code: &code, Reason: herd.ReasonExitCode}
	}
}

// Paths returns the stdout and stderr files of an incarnation.
func (r *Runtime) Paths(session, incarnation string) (stdout, stderr string) {
	dir := filepath.Join(r.LogDir, session)
	return filepath.Join(dir, incarnation+".stdout"), filepath.Join(dir, incarnation+".stderr")
}

// Launch starts spec.Argv without a shell. The child gets its own session
// (setsid), so its process group id equals its pid. With CaptureCommand
// set, its output goes through the capture process; see RunCapture.
func (r *Runtime) Launch(ctx context.Context, spec Spec) (*Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("exec: empty command")
	}
	outPath, errPath := r.Paths(spec.Session, spec.Incarnation)
	if err := os.MkdirAll(filepath.Dir(outPath), 0o700); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	// Not exec.CommandContext: the agent must outlive ctx and the daemon.
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Workdir
	cmd.Env = mergeEnv(os.Environ(), spec.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if spec.Cgroup != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(spec.Cgroup.Fd())
	}
	p := &Proc{cmd: cmd, captured: make(chan struct{})}

	var err error
	if len(r.CaptureCommand) > 0 {
		err = r.startCaptured(cmd, outPath, errPath, p.captured)
	} else {
		err = startToFiles(cmd, outPath, errPath)
		close(p.captured)
	}
	if err != nil {
		return nil, err
	}
	if len(r.CaptureCommand) > 0 {
		r.track(spec.Incarnation, p.captured)
	}
	r.prune(spec.Session, spec.Incarnation)
	p.PID = cmd.Process.Pid
	return p, nil
}

// startToFiles starts cmd writing to the files itself.
func startToFiles(cmd *exec.Cmd, outPath, errPath string) error {
	// O_APPEND lets Cap truncate the file under the running agent safely.
	stdout, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: start %q: %w", cmd.Args[0], err)
	}
	return nil
}

// startCaptured starts the capture process on two pipes, then cmd writing
// to them. captured is closed once the capture process has exited (and is
// reaped). If cmd cannot start, the pipes close and the capture process
// exits on its own.
func (r *Runtime) startCaptured(cmd *exec.Cmd, outPath, errPath string, captured chan struct{}) error {
	var ends []*os.File // every pipe end this daemon still holds
	defer func() {
		for _, f := range ends {
			f.Close()
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("exec: capture pipe: %w", err)
	}
	ends = append(ends, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("exec: capture pipe: %w", err)
	}
	ends = append(ends, errR, errW)

	argv := append(append([]string(nil), r.CaptureCommand...), captureArgs(r.maxLogBytes(), outPath, errPath)...)
	capture := exec.Command(argv[0], argv[1:]...)
	capture.Env = append(os.Environ(), r.CaptureEnv...)
	capture.Dir = "/"                           // hold no directory busy
	capture.ExtraFiles = []*os.File{outR, errR} // descriptors 3 and 4
	capture.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := capture.Start(); err != nil {
		return fmt.Errorf("exec: start capture %q: %w", argv[0], err)
	}
	go func() {
		_ = proc.ParkChild(capture.Process.Pid)
		_ = capture.Wait()
		close(captured)
	}()

	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: start %q: %w", cmd.Args[0], err)
	}
	return nil
}

// keepIncarnations is how many incarnations' output files are kept per session.
const keepIncarnations = 5

// prune removes the output of all but the newest incarnations of a session.
func (r *Runtime) prune(session, current string) {
	dir := filepath.Join(r.LogDir, session)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		mod  int64
	}
	byInc := map[string]int64{}
	for _, e := range entries {
		inc, _, ok := strings.Cut(e.Name(), ".")
		if !ok {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().UnixNano() > byInc[inc] {
			byInc[inc] = info.ModTime().UnixNano()
		}
	}
	var incs []file
	for inc, mod := range byInc {
		if inc != current {
			incs = append(incs, file{inc, mod})
		}
	}
	sort.Slice(incs, func(i, j int) bool { return incs[i].mod > incs[j].mod })
	for i := keepIncarnations - 1; i < len(incs); i++ {
		for _, suffix := range []string{".stdout", ".stdout.1", ".stderr", ".stderr.1"} {
			os.Remove(filepath.Join(dir, incs[i].name+suffix))
		}
	}
}

// Cap keeps an output file under max bytes: when it is larger, its last
// max bytes (plus what the agent writes during the copy, up to another max)
// move to <path>.1, replacing the previous one, and the file is truncated.
// The last bytes, because the end is where an agent's error is; the rest
// is dropped, so a flood leaves at most 2*max in the copy for readers to
// load. The agent writes with O_APPEND, so its next write lands at the new
// end. from is the offset in the file of the first byte kept in <path>.1
// (0 when the file was not over max), for a reader that followed the file
// to know what it missed.
func Cap(path string, max int64) (from int64, err error) {
	info, err := os.Stat(path)
	if err != nil || info.Size() <= max {
		return 0, err
	}
	src, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	if info, err = src.Stat(); err != nil {
		return 0, err
	}
	from = info.Size() - max
	if from < 0 {
		from = 0 // truncated meanwhile
	}
	dst, err := os.OpenFile(path+".1", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	// From the first byte kept to the end as it is now: what the agent
	// wrote during the copy is kept too (up to another max), not cut off
	// by the truncation below.
	if _, err := io.Copy(dst, io.NewSectionReader(src, from, 2*max)); err != nil {
		dst.Close()
		return 0, err
	}
	if err := dst.Close(); err != nil {
		return 0, err
	}
	return from, os.Truncate(path, 0)
}

// ReadTail bounds.
const (
	// MaxTailBytes bounds what ReadTail reads to find the last n lines:
	// n limits lines, not bytes, and one flooding line must not make the
	// daemon read (and send) a whole file.
	MaxTailBytes = 1 << 20
	// MaxReadAllBytes bounds ReadTail with n <= 0: what a capped file and
	// its rotated copy hold at most with DefaultMaxLogBytes.
	MaxReadAllBytes = 3 * DefaultMaxLogBytes
)

// ReadTail returns at most the last n lines of the captured output of an
// incarnation (rotated part included); n <= 0 means all. It reads from the
// end, at most MaxTailBytes (MaxReadAllBytes for all): when that window
// starts inside a line, the cut line is left out, unless it is the only
// one — then its last bytes are returned.
func ReadTail(path string, n int) ([]byte, error) {
	limit := int64(MaxTailBytes)
	if n <= 0 {
		limit = MaxReadAllBytes
	}
	rotated, err := openSized(path + ".1")
	if err != nil {
		return nil, err
	}
	defer rotated.Close()
	current, err := openSized(path)
	if err != nil {
		return nil, err
	}
	defer current.Close()
	fromCur := min(current.size, limit)
	fromRot := min(rotated.size, limit-fromCur)
	// The window is cut when the byte before it exists and ends no line.
	var cut bool
	switch {
	case fromCur < current.size:
		cut = !current.newlineAt(current.size - fromCur - 1)
	case fromRot < rotated.size:
		cut = !rotated.newlineAt(rotated.size - fromRot - 1)
	}
	buf := make([]byte, 0, fromRot+fromCur)
	if buf, err = rotated.appendLast(buf, fromRot); err != nil {
		return nil, err
	}
	if buf, err = current.appendLast(buf, fromCur); err != nil {
		return nil, err
	}
	return lastLines(buf, n, cut), nil
}

// sizedFile is an output file opened for ReadTail, with its size then. A
// missing file is empty.
type sizedFile struct {
	f    *os.File
	size int64
}

func openSized(path string) (sizedFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return sizedFile{}, nil
	}
	if err != nil {
		return sizedFile{}, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return sizedFile{}, err
	}
	return sizedFile{f: f, size: info.Size()}, nil
}

// appendLast appends the last n bytes (of the size seen at open) to buf;
// fewer when the file was truncated meanwhile.
func (s sizedFile) appendLast(buf []byte, n int64) ([]byte, error) {
	if n <= 0 || s.f == nil {
		return buf, nil
	}
	start := len(buf)
	buf = buf[:start+int(n)]
	got, err := s.f.ReadAt(buf[start:], s.size-n)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:start+got], nil
}

// newlineAt reports whether the byte at off is a newline.
func (s sizedFile) newlineAt(off int64) bool {
	var b [1]byte
	n, _ := s.f.ReadAt(b[:], off)
	return n == 1 && b[0] == '\n'
}

func (s sizedFile) Close() {
	if s.f != nil {
		s.f.Close()
	}
}

// lastLines returns the last n lines of b (all when n <= 0). cut says b
// starts inside the output: its first line is then partial and is left
// out unless it is the only line.
func lastLines(b []byte, n int, cut bool) []byte {
	if n > 0 {
		end := len(b)
		if end > 0 && b[end-1] == '\n' {
			end--
		}
		count := 0
		for i := end - 1; i >= 0; i-- {
			if b[i] == '\n' {
				count++
				if count == n {
					return b[i+1:]
				}
			}
		}
	}
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			return b[i+1:]
		}
	}
	return b
}

func mergeEnv(base []string, extra map[string]string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, overridden := extra[k]; !overridden {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+extra[k])
	}
	return out
}
