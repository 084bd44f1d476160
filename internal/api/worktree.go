package api

// PruneRequest asks the daemon to remove the worktrees it kept for
// sessions that no longer exist (herd worktree prune).
type PruneRequest struct {
	// Force removes dirty worktrees too (their uncommitted changes are lost).
	Force bool `json:"force,omitempty"`
}

// WorktreeRemoval is what a prune did with one worktree.
type WorktreeRemoval struct {
	Session string `json:"session"`
	Path    string `json:"path"`
	Branch  string `json:"branch"`
	// Removed: the worktree directory is gone.
	Removed bool `json:"removed"`
	// Reason says what was kept and why ("" when nothing was).
	Reason string `json:"reason,omitempty"`
}

// PruneResult lists what a prune did, by path; Error is set when some
// repository could not be pruned (what was done is listed all the same).
type PruneResult struct {
	Worktrees []WorktreeRemoval `json:"worktrees"`
	Error     string            `json:"error,omitempty"`
}

// Worktree is a session's git worktree as views show it.
type Worktree struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
	// Dirty: changes not committed (files copied in by worktree_include
	// do not count).
	Dirty bool `json:"dirty"`
	// Ahead counts the branch's commits its base lacks; -1 when the base
	// is gone.
	Ahead int `json:"ahead"`
}
