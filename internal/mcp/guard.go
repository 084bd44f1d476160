package mcp

import (
	"fmt"
	"slices"
	"strings"
)

// Tool kinds: what a tool does decides what the guard rails ask of it.
const (
	kindRead    = "read"    // list_sessions, describe_session, read_output
	kindManage  = "manage"  // send, wait
	kindLifecyc = "verb"    // run, scale, stop, restart, resume
	kindOwn     = "own"     // task_done, task_blocked: the calling session's own task
	kindUnknown = "unknown" // refused
)

// toolKind says what a tool does.
func toolKind(tool string) string {
	switch tool {
	case "list_sessions", "describe_session", "read_output", "list_tasks", "describe_task":
		return kindRead
	case "send", "wait", "submit_task":
		return kindManage
	case "task_done", "task_blocked":
		return kindOwn
	case "run", "scale", "stop", "restart", "resume":
		return kindLifecyc
	}
	return kindUnknown
}

// Policy is what bounds one MCP server: the daemon's [mcp] table and the
// calling agent.
type Policy struct {
	// Roles is [mcp] roles: the roles the server may touch at all (empty:
	// every role).
	Roles []string
	// Verbs is [mcp] verbs: the tools that start or stop agents it may
	// call (empty: none).
	Verbs []string
	// Caller is the calling session (HERD_SESSION); "" when the server
	// does not run inside an agent of herd's (a person's client).
	Caller string
	// CallerRole is the caller's role.
	CallerRole string
	// Manages is the caller's role's manages key.
	Manages []string
}

// Target is one session (or, for run and scale, one role) a call acts on.
type Target struct {
	Session string // "" for a role
	Role    string
}

// Decision is the guard's verdict on one call to one target.
type Decision struct {
	Allow bool
	// Why says why not, and what would allow it.
	Why string
}

func allow() Decision { return Decision{Allow: true} }

func refuse(format string, a ...any) Decision {
	return Decision{Why: fmt.Sprintf(format, a...)}
}

// Decide is the guard rails: may tool act on target under p?
//
//   - every tool: only roles in [mcp] roles, when set;
//   - read tools: everywhere else;
//   - send and wait: for an agent, only the roles its own role manages;
//   - run, scale, stop, restart, resume: only when [mcp] verbs lists
//     them, and for an agent only on roles it manages;
//   - an agent never types into, stops or restarts itself unless its role
//     lists itself in manages.
func Decide(p Policy, tool string, t Target) Decision {
	kind := toolKind(tool)
	if kind == kindUnknown {
		return refuse("%s is not a tool of herd's MCP server", tool)
	}
	if kind == kindLifecyc && !slices.Contains(p.Verbs, tool) {
		return refuse("%s is not allowed: the daemon's [mcp] verbs does not list it (verbs = %s)", tool, list(p.Verbs))
	}
	if t.Role != "" && len(p.Roles) > 0 && !slices.Contains(p.Roles, t.Role) {
		return refuse("role %s is outside this MCP server's reach: [mcp] roles = %s", t.Role, list(p.Roles))
	}
	if kind == kindOwn {
		if p.Caller == "" || t.Session != p.Caller {
			return refuse("%s speaks for the calling agent's own task: it needs an agent herd runs (HERD_SESSION), holding a task", tool)
		}
		return allow()
	}
	if kind == kindRead || p.Caller == "" {
		return allow()
	}
	if t.Session != "" && t.Session == p.Caller && tool != "wait" && !slices.Contains(p.Manages, p.CallerRole) {
		return refuse("%s is the calling session itself: an agent may not %s itself unless its role %s lists %q in manages", t.Session, tool, p.CallerRole, p.CallerRole)
	}
	if !slices.Contains(p.Manages, t.Role) {
		what := "role " + t.Role
		if t.Session != "" {
			what = "session " + t.Session + " (role " + t.Role + ")"
		}
		return refuse("%s may not %s %s: role %s manages %s (add %q to its manages key)", p.Caller, tool, what, p.CallerRole, list(p.Manages), t.Role)
	}
	return allow()
}

func list(s []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return "[" + strings.Join(s, ", ") + "]"
}
