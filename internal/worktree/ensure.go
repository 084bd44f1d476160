package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"herd/internal/gitx"
)

// Ensure returns the worktree of opts.Session, creating it when it does
// not exist: git worktree add <root>/<session> on branch herd/<session>
// from opts.Base, the root's top directory added to the repository's
// info/exclude, the opts.Include files copied in, and opts.Setup run once.
// An existing worktree of the session is reused as it is (it outlives
// crashes and restarts of the session, so a resumed agent finds its cwd).
// When creation or setup fails, nothing of it is left behind: no directory,
// no branch, no registration.
func (m *Manager) Ensure(ctx context.Context, opts Options) (Worktree, error) {
	if err := checkSession(opts.Session); err != nil {
		return Worktree{}, err
	}
	r, err := m.locate(ctx, opts.Workdir)
	if err != nil {
		return Worktree{}, err
	}
	path := filepath.Join(opts.root(r), opts.Session)
	wt := Worktree{Repo: r.top, Path: path, Dir: filepath.Join(path, r.prefix), Branch: Branch(opts.Session)}

	unlock := m.lockRepo(r.commonDir)
	all, err := m.list(ctx, r.top)
	if err != nil {
		unlock()
		return Worktree{}, err
	}
	if l, ok := find(all, path); ok && !l.prunable {
		unlock()
		return m.reuse(ctx, opts, wt, l, r.commonDir)
	}
	if err := m.prepare(ctx, opts, r, &wt); err != nil {
		unlock()
		return Worktree{}, err
	}
	return m.create(ctx, opts, wt, r.commonDir, unlock)
}

// prepare checks that a worktree can be added at wt.Path and readies the
// repository for it: the base resolved, stale registrations pruned, the
// worktree root excluded. The repository is locked.
func (m *Manager) prepare(ctx context.Context, opts Options, r repo, wt *Worktree) error {
	if err := checkIndexLock(r); err != nil {
		return err
	}
	if _, err := os.Lstat(wt.Path); err == nil {
		return fmt.Errorf("worktree: %s: %w", wt.Path, ErrPathTaken)
	}
	// A registration whose directory is gone (deleted by hand) would make
	// worktree add refuse the path.
	if _, err := m.git().Run(ctx, r.top, "worktree", "prune"); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	base, err := m.resolveBase(ctx, opts, r)
	if err != nil {
		return err
	}
	wt.Base = base
	return addExclude(r, opts.root(r))
}

// reuse returns an existing worktree. One whose setup never finished (the
// daemon died during it, so no agent ever ran there) is discarded and
// made again; if its branch has commits of its own after all, it is
// somebody's work and is used as it is.
func (m *Manager) reuse(ctx context.Context, opts Options, wt Worktree, l listed, commonDir string) (Worktree, error) {
	if l.branch != wt.Branch {
		return Worktree{}, fmt.Errorf("worktree: %s has branch %q, want %q: %w", wt.Path, l.branch, wt.Branch, ErrPathTaken)
	}
	ready, err := m.readMeta(ctx, wt.Path, readyFile)
	if err != nil {
		return Worktree{}, err
	}
	base, err := m.readMeta(ctx, wt.Path, baseFile)
	if err != nil {
		return Worktree{}, err
	}
	wt.Base = base
	if ready != "" {
		return wt, nil
	}
	unlock := m.lockRepo(commonDir)
	ahead, err := m.ahead(ctx, wt.Path, base, wt.Branch)
	if err == nil && ahead != 0 {
		err = m.writeMeta(ctx, wt.Path, readyFile, "ok")
		unlock()
		return wt, err
	}
	m.discard(ctx, wt, true)
	unlock()
	return m.Ensure(ctx, opts)
}

// discard force-removes a worktree herd made (and its branch, when
// deleteBranch). Errors are ignored: it cleans up after a failure, and
// each step works on whatever the previous one left.
func (m *Manager) discard(ctx context.Context, wt Worktree, deleteBranch bool) {
	// A fresh context: the caller's may be what ended the creation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gitx.DefaultTimeout)
	defer cancel()
	g := m.git()
	_, _ = g.Run(ctx, wt.Repo, "worktree", "remove", "--force", "--force", wt.Path)
	_ = os.RemoveAll(wt.Path)
	_, _ = g.Run(ctx, wt.Repo, "worktree", "prune")
	if deleteBranch {
		_, _ = g.Run(ctx, wt.Repo, "branch", "-D", wt.Branch)
	}
}

// checkIndexLock refuses to work on a repository whose index is locked.
func checkIndexLock(r repo) error {
	for _, d := range []string{r.gitDir, r.commonDir} {
		lock := filepath.Join(d, "index.lock")
		if _, err := os.Stat(lock); err == nil {
			return fmt.Errorf("worktree: %s: %w", lock, ErrLocked)
		}
	}
	return nil
}

// resolveBase returns the ref to branch from: opts.Base, which must name a
// commit, or the branch checked out in the workdir.
func (m *Manager) resolveBase(ctx context.Context, opts Options, r repo) (string, error) {
	g := m.git()
	if opts.Base != "" {
		if strings.HasPrefix(opts.Base, "-") {
			return "", fmt.Errorf("worktree: base %q: %w", opts.Base, ErrNoBase)
		}
		ok, err := g.Exit(ctx, r.top, "rev-parse", "--verify", "--quiet", "--end-of-options", opts.Base+"^{commit}")
		if err != nil {
			return "", fmt.Errorf("worktree: %w", err)
		}
		if !ok {
			return "", fmt.Errorf("worktree: base %q: %w", opts.Base, ErrNoBase)
		}
		return opts.Base, nil
	}
	head, err := g.Line(ctx, opts.Workdir, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) && ge.ExitCode() == 1 {
			sha, _ := g.Line(ctx, opts.Workdir, "rev-parse", "--short", "HEAD")
			return "", fmt.Errorf("worktree: %s at %s: %w", opts.Workdir, sha, ErrDetached)
		}
		return "", fmt.Errorf("worktree: %w", err)
	}
	ok, err := g.Exit(ctx, r.top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("worktree: %s (branch %s): %w", r.top, head, ErrNoCommits)
	}
	return head, nil
}

// create adds the worktree, copies the included files and runs setup,
// undoing everything when any step fails. It is called with the
// repository (shared git directory commonDir) locked, and releases the
// lock with unlock once the worktree is registered.
func (m *Manager) create(ctx context.Context, opts Options, wt Worktree, commonDir string, unlock func()) (Worktree, error) {
	g := m.git()
	relock := func() { unlock = m.lockRepo(commonDir) }
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	branchExists, err := g.Exit(ctx, wt.Repo, "show-ref", "--verify", "--quiet", "refs/heads/"+wt.Branch)
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree: %w", err)
	}
	if !branchExists && opts.Fetch {
		// Another host may have carried it and published it.
		if branchExists, err = m.fetchBranch(ctx, wt.Repo, wt.Branch); err != nil {
			return Worktree{}, err
		}
	}
	rootDir := filepath.Dir(wt.Path)
	madeDirs, err := mkdirAll(rootDir)
	if err != nil {
		return Worktree{}, fmt.Errorf("worktree: %w", err)
	}
	args := []string{"worktree", "add", "--quiet"}
	if branchExists {
		// The branch outlived its worktree (removed by hand): its work
		// continues where it was.
		args = append(args, wt.Path, wt.Branch)
	} else {
		args = append(args, "-b", wt.Branch, wt.Path, wt.Base)
	}
	undo := func() {
		if !locked {
			relock()
			locked = true
		}
		m.discard(ctx, wt, !branchExists)
		for i := len(madeDirs) - 1; i >= 0; i-- {
			_ = os.Remove(madeDirs[i]) // only when empty
		}
	}
	if _, err := g.Run(ctx, wt.Repo, args...); err != nil {
		undo()
		return Worktree{}, fmt.Errorf("worktree: create %s: %w", wt.Path, err)
	}
	if err := m.writeMeta(ctx, wt.Path, baseFile, wt.Base); err != nil {
		undo()
		return Worktree{}, err
	}
	// Copying and setup touch only the new worktree; other sessions of
	// the repository need not wait for them.
	unlock()
	locked = false
	copied, err := copyIncluded(opts.Workdir, wt.Dir, opts.Include)
	if err != nil {
		undo()
		return Worktree{}, err
	}
	wt.Copied = copied
	if len(copied) > 0 {
		prefix, _ := filepath.Rel(wt.Path, wt.Dir)
		rels := make([]string, len(copied))
		for i, c := range copied {
			rels[i] = filepath.ToSlash(filepath.Join(prefix, c))
		}
		if err := m.writeMeta(ctx, wt.Path, copiedFile, strings.Join(rels, "\n")); err != nil {
			undo()
			return Worktree{}, err
		}
	}
	if len(opts.Setup) > 0 {
		out, err := m.setup(ctx, wt.Dir, opts)
		wt.Output = out
		if err != nil {
			undo()
			return wt, err
		}
	}
	if err := m.writeMeta(ctx, wt.Path, readyFile, "ok"); err != nil {
		undo()
		return Worktree{}, err
	}
	wt.Created = true
	return wt, nil
}

// maxSetupOutput caps how much setup output is kept (the tail).
const maxSetupOutput = 64 << 10

// setup runs the setup argv in dir, bounded by the setup timeout, and
// returns its combined output (the tail, when long).
func (m *Manager) setup(ctx context.Context, dir string, opts Options) (string, error) {
	timeout := m.SetupTimeout
	if timeout <= 0 {
		timeout = DefaultSetupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, opts.Setup[0], opts.Setup[1:]...)
	cmd.Dir = dir
	cmd.Env = opts.Env
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	out := buf.Bytes()
	if len(out) > maxSetupOutput {
		out = out[len(out)-maxSetupOutput:]
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return string(out), fmt.Errorf("worktree: %w: %s: %w: %s", ErrSetup, strings.Join(opts.Setup, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// mkdirAll creates dir and its missing parents and returns the ones it
// created, outermost first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append([]string{d}, missing...)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return missing, nil
}

// addExclude adds the first directory of root below the repository's top
// level (".herd/") to info/exclude, once, so the worktrees never show up as
// untracked files of the repository. A root outside the repository needs
// nothing.
func addExclude(r repo, root string) error {
	rel, err := filepath.Rel(r.top, root)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return nil
	}
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	line := "/" + first + "/"
	file := filepath.Join(r.commonDir, "info", "exclude")
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("worktree: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	b = append(b, []byte(line+"\n")...)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// copyIncluded copies the files matching globs under src (the workdir)
// into dst (its counterpart in the worktree). Files already present in dst
// (tracked ones) are left alone; a matched directory is copied whole. It
// returns the copied paths relative to src.
func copyIncluded(src, dst string, globs []string) ([]string, error) {
	var copied []string
	for _, g := range globs {
		if filepath.IsAbs(g) || strings.HasPrefix(filepath.Clean(g), "..") {
			return nil, fmt.Errorf("worktree: include %q: must be relative to the workdir", g)
		}
		matches, err := filepath.Glob(filepath.Join(src, g))
		if err != nil {
			return nil, fmt.Errorf("worktree: include %q: %w", g, err)
		}
		for _, from := range matches {
			rel, err := filepath.Rel(src, from)
			if err != nil || skipInclude(rel) {
				continue
			}
			err = filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				r, _ := filepath.Rel(src, p)
				if d.IsDir() {
					if skipInclude(r) {
						return filepath.SkipDir
					}
					return nil
				}
				to := filepath.Join(dst, r)
				if _, err := os.Lstat(to); err == nil {
					return nil
				}
				if err := copyFile(p, to, d); err != nil {
					return err
				}
				copied = append(copied, r)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("worktree: include %q: %w", g, err)
			}
		}
	}
	return copied, nil
}

// skipInclude reports whether a relative path is git's or herd's own.
func skipInclude(rel string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
	return first == ".git" || first == ".herd"
}

// copyFile copies one regular file or symlink, keeping its mode.
func copyFile(from, to string, d fs.DirEntry) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if d.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	if !d.Type().IsRegular() {
		return nil // sockets, fifos: nothing to copy
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
