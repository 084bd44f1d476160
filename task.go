package herd

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TaskState is where a task is in its life; see README, "Tasks".
type TaskState string

// Task states.
const (
	TaskQueued    TaskState = "queued"    // waiting for a replica of its role
	TaskAssigned  TaskState = "assigned"  // a replica holds it; its prompt is not yet delivered
	TaskWorking   TaskState = "working"   // its prompt reached the agent
	TaskNeedsYou  TaskState = "needs_you" // the agent stopped without a commit, or asks something
	TaskChecking  TaskState = "checking"  // its check runs on the branch
	TaskReview    TaskState = "review"    // the check passed: a person approves or asks for changes
	TaskChanges   TaskState = "changes"   // a person asked for changes: they went to the agent
	TaskLanded    TaskState = "landed"    // merged into its base
	TaskFailed    TaskState = "failed"    // given up, with its reason
	TaskCancelled TaskState = "cancelled" // cancelled by a person
)

// TaskStates lists the task states in the order of their life.
var TaskStates = []TaskState{TaskQueued, TaskAssigned, TaskWorking, TaskNeedsYou, TaskChecking,
	TaskReview, TaskChanges, TaskLanded, TaskFailed, TaskCancelled}

// Ended reports whether a task in state s is done with: it holds no
// replica and nothing more happens to it unless a person retries it.
func (s TaskState) Ended() bool {
	return s == TaskLanded || s == TaskFailed || s == TaskCancelled
}

// Holds reports whether a task in state s holds its replica (the
// session runs in the task's worktree and takes no other task).
func (s TaskState) Holds() bool {
	switch s {
	case TaskAssigned, TaskWorking, TaskNeedsYou, TaskChecking, TaskReview, TaskChanges:
		return true
	}
	return false
}

// ValidTaskState reports whether s names a task state.
func ValidTaskState(s string) bool {
	for _, st := range TaskStates {
		if string(st) == s {
			return true
		}
	}
	return false
}

// Event kinds of tasks. Each transition of a task is one of them, on
// the task's session when it has one; Data["task"] names the task.
const (
	EventTaskQueued    = "task_queued"
	EventTaskAssigned  = "task_assigned"
	EventTaskDelivered = "task_delivered" // its prompt reached the agent: working
	EventTaskNeedsYou  = "task_needs_you"
	EventTaskChecked   = "task_checked" // a check ran: reason passed or failed
	EventTaskReview    = "task_review"
	EventTaskFeedback  = "task_feedback" // a person's comments went to the agent
	EventTaskLanded    = "task_landed"
	EventTaskFailed    = "task_failed"
	EventTaskCancelled = "task_cancelled"
	// EventReaction records a reaction: Data["kind"] is one of the
	// Reaction kinds, Data["attempt"] its count.
	EventReaction = "reaction"
)

// TaskEventKinds lists the event kinds of tasks.
var TaskEventKinds = []string{EventTaskQueued, EventTaskAssigned, EventTaskDelivered, EventTaskNeedsYou,
	EventTaskChecked, EventTaskReview, EventTaskFeedback, EventTaskLanded, EventTaskFailed,
	EventTaskCancelled, EventReaction}

// Reaction kinds.
const (
	ReactionCheckFailed      = "check_failed"
	ReactionChangesRequested = "changes_requested"
	ReactionApproved         = "approved"
	ReactionAgentStuck       = "agent_stuck"
	ReactionConflict         = "conflict"
)

// MaxTaskPrompt bounds a task's prompt.
const MaxTaskPrompt = 1 << 20

// MaxExecTurn bounds the prompt of a task for an exec role, given to its
// agent as one argument: the kernel takes at most 128 KiB (with its NUL)
// in one argument.
const MaxExecTurn = 128<<10 - 1

// Task is a unit of work for a role: a prompt, a repository and a base
// branch. It runs in one replica of its role at a time, in a worktree of
// its own on branch herd/<id>.
type Task struct {
	ID     string    `json:"id"` // t-<n>
	Title  string    `json:"title"`
	Role   string    `json:"role"`
	State  TaskState `json:"state"`
	Reason string    `json:"reason"`
	// Session is the replica holding the task ("" while queued).
	Session string `json:"session"`
	Branch  string `json:"branch"`
	Base    string `json:"base"`
	Repo    string `json:"repo"`
	// Commits is how many commits the branch has past its base, as last
	// counted.
	Commits int `json:"commits"`
	// Check is the argv run in the worktree when the agent is done.
	Check []string `json:"check"`
	// PR is the forge's pull request, "" without a forge.
	PR        string    `json:"pr"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	Prompt string `json:"prompt"`
	// Worktree is the task's worktree ("" until it is assigned).
	Worktree string `json:"worktree,omitempty"`
	// Incarnation is the incarnation its prompt (or its last feedback)
	// was delivered to; Conversation is that agent's conversation id.
	Incarnation  string `json:"incarnation,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	// DeliveredAfter is the id of the last event before the delivery:
	// the agent's turn ended when an idle activity event follows it.
	DeliveredAfter int64 `json:"delivered_after,omitempty"`
	// Attempts counts the check_failed reactions sent to the agent.
	Attempts int `json:"attempts,omitempty"`
	// Reacted is the kind of the reaction last typed into the agent
	// (check_failed, changes_requested, agent_stuck, conflict) while the
	// task is working or changes on it, ReactedAt when: the reaction's
	// escalate_after counts from then. Both are cleared when the task
	// leaves working and changes.
	Reacted   string     `json:"reacted,omitempty"`
	ReactedAt *time.Time `json:"reacted_at,omitempty"`
	// Nudges counts the agent_stuck reactions typed into the agent.
	Nudges int `json:"nudges,omitempty"`
	// Turn is the text of the agent's current turn when it is not the
	// prompt (what a reaction or a person sent): an exec role's agent
	// is launched with it as its last argument.
	Turn string `json:"turn,omitempty"`
	// CheckLog is the file holding the last check's whole output;
	// CheckTail its end, CheckExit its exit code (-1: did not run to an
	// exit: timed out, could not start).
	CheckLog  string `json:"check_log,omitempty"`
	CheckTail string `json:"check_tail,omitempty"`
	CheckExit int    `json:"check_exit,omitempty"`
	// Reviewed is the commit of its branch its check passed on: what a
	// person reviews and what lands (commits after it do not).
	Reviewed string `json:"reviewed,omitempty"`
	// ApprovedBy is who approved it: landing is under way ("" before).
	ApprovedBy string `json:"approved_by,omitempty"`
	// Landed is the commit the base was moved to when it landed.
	Landed string `json:"landed,omitempty"`
}

// TaskSeq is the number of a task id, 0 for a string that is none.
func TaskSeq(id string) int64 {
	rest, ok := strings.CutPrefix(id, "t-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// TaskID is the id of the task numbered n.
func TaskID(n int64) string { return fmt.Sprintf("t-%d", n) }

// TaskBranch is the branch a task's work is on.
func TaskBranch(id string) string { return "herd/" + id }
