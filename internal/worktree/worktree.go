// Package worktree gives each session its own git worktree and branch, and removes it only when nothing would be lost.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/gitx"
)

// BranchPrefix starts the name of every session branch: herd/<session>.
const BranchPrefix = "herd/"

// DefaultDir is where worktrees go, relative to the repository's top
// level, when Options.Root is empty. Its first element is added to the
// repository's .git/info/exclude.
const DefaultDir = ".herd/worktrees"

// DefaultSetupTimeout bounds the setup command when Manager.SetupTimeout is zero.
const DefaultSetupTimeout = 10 * time.Minute

// Files herd keeps in a worktree's private git directory (.git/worktrees/<name>),
// outside the working tree.
const (
	baseFile  = "herd-base"  // the base ref the branch was made from
	readyFile = "herd-ready" // written once the setup command succeeded
)

// Errors for a repository in a state where no worktree can be made; each is
// wrapped with the details.
var (
	ErrNotRepo    = errors.New("not inside a git repository")
	ErrDetached   = errors.New("HEAD is detached; set worktree_base to the branch to start from")
	ErrNoCommits  = errors.New("repository has no commits yet")
	ErrNoBase     = errors.New("base does not name a commit")
	ErrLocked     = errors.New("index is locked: another git process runs, or one crashed and left its lock file")
	ErrPathTaken  = errors.New("path exists and is not this session's worktree")
	ErrSetup      = errors.New("setup command failed")
	ErrBadSession = errors.New("not a session name")
)

// Options describe one session's worktree.
type Options struct {
	Workdir string   // the role's workdir; must be inside a git repository
	Session string   // session name, <role>-<index>
	Root    string   // directory of the worktrees; "" is <repo>/.herd/worktrees, relative is under <repo>
	Base    string   // ref to branch from; "" is the branch checked out in Workdir
	Include []string // globs, relative to Workdir, of untracked files copied in at creation
	Setup   []string // argv run once in the new worktree; nil for none
	Env     []string // environment of Setup; nil is herd's own
	// Fetch: a branch missing here is fetched from the repository's
	// remote origin first, where another host published it (a task's).
	Fetch bool
}

// Worktree is a session's worktree, ready to run in.
type Worktree struct {
	Repo    string // top level of the repository Workdir is in
	Path    string // top level of the worktree
	Dir     string // where the session runs: Workdir's counterpart inside Path
	Branch  string // herd/<session>
	Base    string // the ref the branch was made from
	Created bool   // made by this call (false: an existing one reused)
	Copied  []string
	Output  string // the setup command's combined output, when it ran
}

// Status is what get sessions and describe show about a worktree.
type Status struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Dirty  bool   `json:"dirty"`
	Ahead  int    `json:"ahead"`
}

// Manager creates, inspects and removes session worktrees. Its zero value
// works, and one Manager may serve many goroutines: changes to one
// repository are made one at a time (git's own locks would otherwise fail
// concurrent worktree adds and exclude edits).
type Manager struct {
	Git          *gitx.Client  // nil means a default client
	SetupTimeout time.Duration // 0 means DefaultSetupTimeout

	mu    sync.Mutex             // guards the fields below
	repos map[string]*sync.Mutex // per shared git directory
}

// lockRepo serializes changes to the repository whose shared git directory
// is commonDir; it returns the unlock function.
func (m *Manager) lockRepo(commonDir string) func() {
	m.mu.Lock()
	if m.repos == nil {
		m.repos = map[string]*sync.Mutex{}
	}
	l, ok := m.repos[commonDir]
	if !ok {
		l = &sync.Mutex{}
		m.repos[commonDir] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (m *Manager) git() *gitx.Client {
	if m.Git == nil {
		return &gitx.Client{}
	}
	return m.Git
}

// repo is what Ensure learns about the repository of a workdir.
type repo struct {
	top       string // top level of the worktree Workdir is in
	prefix    string // Workdir relative to top ("" or "sub/dir/")
	commonDir string // the shared .git directory
	gitDir    string // the git directory of Workdir's worktree
}

// locate finds the repository of workdir.
func (m *Manager) locate(ctx context.Context, workdir string) (repo, error) {
	if st, err := os.Stat(workdir); err != nil || !st.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return repo{}, fmt.Errorf("worktree: workdir %s: %w", workdir, err)
	}
	out, err := m.git().Run(ctx, workdir, "rev-parse", "--path-format=absolute",
		"--show-toplevel", "--show-prefix", "--git-common-dir", "--absolute-git-dir")
	if err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return repo{}, fmt.Errorf("worktree: %s: %w", workdir, ErrNotRepo)
		}
		return repo{}, fmt.Errorf("worktree: %w", err)
	}
	// One value per line; --show-prefix prints an empty line at the top level.
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 4 || lines[0] == "" {
		return repo{}, fmt.Errorf("worktree: %s: unexpected rev-parse output %q", workdir, out)
	}
	return repo{top: lines[0], prefix: lines[1], commonDir: lines[2], gitDir: lines[3]}, nil
}

// checkSession refuses names that are not herd session names, so a branch
// or path can never be built from arbitrary text.
func checkSession(s string) error {
	if !herd.InNamespace(s) {
		return fmt.Errorf("worktree: %q: %w", s, ErrBadSession)
	}
	return nil
}

// root returns the directory holding the worktrees of r.
func (o Options) root(r repo) string {
	switch {
	case o.Root == "":
		return filepath.Join(r.top, DefaultDir)
	case filepath.IsAbs(o.Root):
		return filepath.Clean(o.Root)
	}
	return filepath.Join(r.top, o.Root)
}

// Path returns where the worktree of opts.Session lives, without creating it.
func (m *Manager) Path(ctx context.Context, opts Options) (string, error) {
	p, _, err := m.path(ctx, opts)
	return p, err
}

// path is Path with the repository it found.
func (m *Manager) path(ctx context.Context, opts Options) (string, repo, error) {
	if err := checkSession(opts.Session); err != nil {
		return "", repo{}, err
	}
	r, err := m.locate(ctx, opts.Workdir)
	if err != nil {
		return "", repo{}, err
	}
	return filepath.Join(opts.root(r), opts.Session), r, nil
}

// Branch returns the branch of a session.
func Branch(session string) string { return BranchPrefix + session }

// listed is one entry of git worktree list --porcelain.
type listed struct {
	path     string
	branch   string // short name, "" when detached
	prunable bool
}

// list returns the worktrees git knows in the repository of dir.
func (m *Manager) list(ctx context.Context, dir string) ([]listed, error) {
	out, err := m.git().Run(ctx, dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	var all []listed
	var cur *listed
	for _, f := range strings.Split(string(out), "\x00") {
		switch {
		case f == "":
			cur = nil
		case strings.HasPrefix(f, "worktree "):
			all = append(all, listed{path: strings.TrimPrefix(f, "worktree ")})
			cur = &all[len(all)-1]
		case cur == nil:
		case strings.HasPrefix(f, "branch "):
			cur.branch = strings.TrimPrefix(strings.TrimPrefix(f, "branch "), "refs/heads/")
		case f == "prunable" || strings.HasPrefix(f, "prunable "):
			cur.prunable = true
		}
	}
	return all, nil
}

// find returns the listed worktree at path, if any.
func find(all []listed, path string) (listed, bool) {
	for _, l := range all {
		if samePath(l.path, path) {
			return l, true
		}
	}
	return listed{}, false
}

// samePath compares two paths after resolving symlinks where possible.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// privateDir returns the worktree's own git directory (.git/worktrees/<name>).
func (m *Manager) privateDir(ctx context.Context, path string) (string, error) {
	// A linked worktree's .git is a file naming that directory; reading
	// it spares a git call per lookup (get sessions asks for every
	// session).
	if b, err := os.ReadFile(filepath.Join(path, ".git")); err == nil {
		if d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); ok {
			if !filepath.IsAbs(d) {
				d = filepath.Join(path, d)
			}
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d, nil
			}
		}
	}
	d, err := m.git().Line(ctx, path, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	return d, nil
}

// readMeta reads one of herd's files in the worktree's git directory; ""
// when absent.
func (m *Manager) readMeta(ctx context.Context, path, name string) (string, error) {
	d, err := m.privateDir(ctx, path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(d, name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeMeta writes one of herd's files in the worktree's git directory.
func (m *Manager) writeMeta(ctx context.Context, path, name, value string) error {
	d, err := m.privateDir(ctx, path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, name), []byte(value+"\n"), 0o644); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}

// OptionsFor describes the worktree of session of role.
func OptionsFor(role herd.Role, session string) Options {
	return Options{
		Workdir: role.Workdir, Session: session, Base: role.WorktreeBase,
		Include: role.WorktreeInclude, Setup: role.WorktreeSetup,
	}
}

// TaskOptions describes the worktree of a task run by a replica of
// role: in the task's repository, on branch herd/<task id> from its base,
// with the role's included files and setup.
func TaskOptions(role herd.Role, task herd.Task) Options {
	return Options{
		Workdir: task.Repo, Session: task.ID, Base: task.Base,
		Include: role.WorktreeInclude, Setup: role.WorktreeSetup, Fetch: true,
	}
}
