package tasks

import "herd"

// AddRequest asks for a new task (herd task add).
type AddRequest struct {
	Role string `json:"role"`
	// Repo is a directory inside the repository; "" is the role's workdir.
	Repo string `json:"repo,omitempty"`
	// Base is the branch to start from and land on; "" is the branch
	// checked out in Repo.
	Base  string `json:"base,omitempty"`
	Title string `json:"title,omitempty"`
	// Check replaces the role's check; nil keeps it.
	Check  []string `json:"check,omitempty"`
	Prompt string   `json:"prompt"`
	// By is who asked (the API's caller, an MCP session, a trigger).
	By string `json:"by,omitempty"`
}

// VerbRequest is a person's (or an agent's) verb on one task: cancel,
// retry, approve, comment (Text), done (Text, a summary) or blocked
// (Text, a question).
type VerbRequest struct {
	ID   string `json:"id"`
	Text string `json:"text,omitempty"`
	By   string `json:"by,omitempty"`
}

// Described is a task with the events that tell its story.
type Described struct {
	herd.Task
	Events []herd.Event `json:"events"`
}

// Diff is a task's change against its base.
type Diff struct {
	Task string `json:"task"`
	Base string `json:"base"`
	// Branch is the task's branch; Diff is `git diff base...branch`.
	Branch    string `json:"branch"`
	Diff      string `json:"diff"`
	Truncated bool   `json:"truncated"`
}

// MaxDiff bounds a diff returned whole.
const MaxDiff = 4 << 20

// MaxComment bounds a comment or an agent's note.
const MaxComment = 64 << 10
