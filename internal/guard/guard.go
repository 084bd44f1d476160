// Package guard is the guard rails of what an agent herd runs may do to
// other sessions: one pure decision (Decide) of an action on a target
// under a Policy. herd's MCP server asks it first, for a friendlier
// refusal; the daemon asks it again for every call that comes from inside
// an agent's process tree (through herd mcp, the CLI or raw HTTP on its
// socket) and its answer is the one that holds. It reads nothing and
// writes nothing.
package guard

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of action: what an action does decides what the rails ask of it.
const (
	kindRead    = "read"    // list_sessions, describe_session, read_output, list_tasks, describe_task
	kindManage  = "manage"  // send, wait, submit_task, a managed role's task verbs
	kindLifecyc = "verb"    // run, scale, stop, restart, resume
	kindOwn     = "own"     // task_done, task_blocked, hook reports: the calling session's own
	kindPerson  = "person"  // verbs only a person may run (archive, reset, signal, delete, reap, ...)
	kindUnknown = "unknown" // refused
)

// Actions the daemon's socket guards besides the MCP server's tools: each
// is a verb no agent may run (kindPerson) or a task verb on a managed
// role's task (kindManage), or a hook report (kindOwn).
const (
	ActionArchive    = "archive"
	ActionReset      = "reset"
	ActionSignal     = "signal"
	ActionDeleteRole = "delete_role"
	ActionRestartAll = "restart_all"
	ActionReap       = "reap"
	ActionReload     = "reload"
	ActionPrune      = "worktree_prune"
	ActionWebLink    = "web_link"
	ActionWebUser    = "web_user"
	ActionApprove    = "task_approve"
	ActionCancel     = "task_cancel"
	ActionRetry      = "task_retry"
	ActionComment    = "task_comment"
	ActionHook       = "hook"
)

// kind says what an action does.
func kind(action string) string {
	switch action {
	case "list_sessions", "describe_session", "read_output", "list_tasks", "describe_task":
		return kindRead
	case "send", "wait", "submit_task", ActionCancel, ActionRetry, ActionComment:
		return kindManage
	case "task_done", "task_blocked", ActionHook:
		return kindOwn
	case "run", "scale", "stop", "restart", "resume":
		return kindLifecyc
	case ActionArchive, ActionReset, ActionSignal, ActionDeleteRole, ActionRestartAll, ActionReap, ActionReload,
		ActionPrune, ActionWebLink, ActionWebUser, ActionApprove:
		return kindPerson
	}
	return kindUnknown
}

// Policy is what bounds one caller: the daemon's [mcp] table and the
// calling agent.
type Policy struct {
	// Roles is [mcp] roles: the roles an agent (or herd mcp) may touch at
	// all (empty: every role).
	Roles []string
	// Verbs is [mcp] verbs: the verbs that start or stop agents it may
	// call (empty: none).
	Verbs []string
	// Caller is the calling session; "" for a caller outside herd's
	// agents (a person, or herd mcp run by one).
	Caller string
	// CallerRole is the caller's role.
	CallerRole string
	// Manages is the caller's role's manages key.
	Manages []string
	// Unplaced, when set, says why the caller is inside an agent's tree
	// that herd cannot place (no incarnation live on record, the lookup
	// failed): it may read, nothing more.
	Unplaced string
}

// Agent reports whether p is an agent's (placed or not).
func (p Policy) Agent() bool { return p.Caller != "" || p.Unplaced != "" }

// Target is one session (or, for run and scale, one role) an action acts
// on.
type Target struct {
	Session string // "" for a role
	Role    string
}

// Decision is the guard's verdict on one action on one target.
type Decision struct {
	Allow bool
	// Why says why not, and what would allow it.
	Why string
}

func allow() Decision { return Decision{Allow: true} }

func refuse(format string, a ...any) Decision {
	return Decision{Why: fmt.Sprintf(format, a...)}
}

// Decide is the guard rails: may action act on target under p?
//
//   - every action of an agent or of herd mcp: only roles in [mcp] roles,
//     when set;
//   - reads: everywhere else;
//   - send, wait, submit_task: for an agent, only the roles its own role
//     manages;
//   - run, scale, stop, restart, resume: only when [mcp] verbs lists
//     them, and for an agent only on roles it manages;
//   - an agent never types into, stops or restarts itself unless its role
//     lists itself in manages;
//   - task_done, task_blocked and hook reports: the calling session's own
//     (and an agent always reads its own session);
//   - the verbs only a person runs (archive, reset, signal, delete role,
//     reap, reload, ...): never an agent;
//   - an agent herd cannot place (Unplaced): reads only.
func Decide(p Policy, action string, t Target) Decision {
	k := kind(action)
	if k == kindUnknown {
		return refuse("%s is not a tool of herd's MCP server", action)
	}
	if k == kindPerson {
		if !p.Agent() {
			return allow()
		}
		return refuse("%s is a person's verb: %s may not %s (run it from a shell outside herd's agents)", action, p.who(), action)
	}
	if k == kindOwn {
		if p.Caller == "" || t.Session != p.Caller {
			return refuse("%s speaks for the calling agent's own task or session: it needs an agent herd runs (HERD_SESSION), and its own session", action)
		}
		return allow()
	}
	if k == kindRead && p.Caller != "" && t.Session == p.Caller {
		return allow() // an agent reads its own session whatever [mcp] roles says
	}
	if k == kindLifecyc && !slices.Contains(p.Verbs, action) {
		return refuse("%s is not allowed: the daemon's [mcp] verbs does not list it (verbs = %s)", action, list(p.Verbs))
	}
	if t.Role != "" && len(p.Roles) > 0 && !slices.Contains(p.Roles, t.Role) {
		return refuse("role %s is outside this MCP server's reach: [mcp] roles = %s", t.Role, list(p.Roles))
	}
	if p.Unplaced != "" && k != kindRead {
		return refuse("%s: herd cannot tell which of its agents calls (%s), so it may only read", action, p.Unplaced)
	}
	if k == kindRead || p.Caller == "" {
		return allow()
	}
	if t.Session != "" && t.Session == p.Caller && action != "wait" && !slices.Contains(p.Manages, p.CallerRole) {
		return refuse("%s is the calling session itself: an agent may not %s itself unless its role %s lists %q in manages", t.Session, action, p.CallerRole, p.CallerRole)
	}
	if !slices.Contains(p.Manages, t.Role) {
		what := "role " + t.Role
		if t.Session != "" {
			what = "session " + t.Session + " (role " + t.Role + ")"
		}
		return refuse("%s may not %s %s: role %s manages %s (add %q to its manages key)", p.Caller, action, what, p.CallerRole, list(p.Manages), t.Role)
	}
	return allow()
}

// who names the caller in a refusal.
func (p Policy) who() string {
	if p.Caller != "" {
		return "agent " + p.Caller
	}
	return "an agent herd runs"
}

func list(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return "[" + strings.Join(s, ", ") + "]"
}
