package guard

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	lead := Policy{Caller: "lead-0", CallerRole: "lead", Manages: []string{"worker"}}
	person := Policy{}
	bounded := Policy{Roles: []string{"worker", "lead"}, Verbs: []string{"stop"}, Caller: "lead-0", CallerRole: "lead", Manages: []string{"worker", "db"}}
	self := Policy{Caller: "lead-0", CallerRole: "lead", Manages: []string{"lead", "worker"}, Verbs: []string{"restart"}}
	unplaced := Policy{Unplaced: "no incarnation live on record"}
	w0 := Target{Session: "worker-0", Role: "worker"}
	r0 := Target{Session: "review-0", Role: "review"}
	me := Target{Session: "lead-0", Role: "lead"}
	cases := []struct {
		name   string
		p      Policy
		tool   string
		t      Target
		allow  bool
		reason string
	}{
		{"read anywhere", lead, "describe_session", r0, true, ""},
		{"read own", lead, "read_output", me, true, ""},
		{"send managed", lead, "send", w0, true, ""},
		{"send unmanaged", lead, "send", r0, false, "role lead manages [worker]"},
		{"wait unmanaged", lead, "wait", r0, false, `add "review" to its manages key`},
		{"send self", lead, "send", me, false, "calling session itself"},
		{"wait self is reading", self, "wait", me, true, ""},
		{"stop without verbs", lead, "stop", w0, false, "[mcp] verbs does not list it"},
		{"stop listed", bounded, "stop", w0, true, ""},
		{"restart not listed", bounded, "restart", w0, false, "verbs = [stop]"},
		{"outside [mcp] roles, even to read", bounded, "read_output", Target{Session: "db-0", Role: "db"}, false, "[mcp] roles = [worker, lead]"},
		{"self allowed by manages", self, "restart", me, true, ""},
		{"self send allowed by manages", self, "send", me, true, ""},
		{"person sends anywhere", person, "send", r0, true, ""},
		{"person still needs verbs", person, "scale", Target{Role: "worker"}, false, "[mcp] verbs"},
		{"scale a managed role", Policy{Verbs: []string{"scale"}, Caller: "lead-0", CallerRole: "lead", Manages: []string{"worker"}}, "scale", Target{Role: "worker"}, true, ""},
		{"run an unmanaged role", Policy{Verbs: []string{"run"}, Caller: "lead-0", CallerRole: "lead", Manages: []string{"worker"}}, "run", Target{Role: "other"}, false, "may not run role other"},
		{"unknown tool", person, "drop_sessions", w0, false, "not a tool"},
		{"submit a task to a managed role", lead, "submit_task", Target{Role: "worker"}, true, ""},
		{"submit a task to an unmanaged role", lead, "submit_task", Target{Role: "review"}, false, "may not submit_task role review"},
		{"list tasks anywhere", lead, "list_tasks", Target{Role: "review"}, true, ""},
		{"describe a task outside [mcp] roles", bounded, "describe_task", Target{Role: "db"}, false, "[mcp] roles"},
		{"done of its own task", lead, "task_done", me, true, ""},
		{"done for another session", lead, "task_done", w0, false, "own task"},
		{"blocked without a calling agent", person, "task_blocked", Target{}, false, "HERD_SESSION"},
		{"own task outside [mcp] roles", Policy{Roles: []string{"worker"}, Caller: "lead-0", CallerRole: "lead"}, "task_done", me, true, ""},
		{"reads itself outside [mcp] roles", Policy{Roles: []string{"worker"}, Caller: "lead-0", CallerRole: "lead"}, "describe_session", me, true, ""},
		{"hook of its own session", lead, ActionHook, me, true, ""},
		{"hook naming another session", lead, ActionHook, w0, false, "own task or session"},
		{"a person's verb from an agent", bounded, ActionSignal, w0, false, "signal is a person's verb: agent lead-0 may not signal"},
		{"a person's verb from a person", person, ActionDeleteRole, Target{Role: "worker"}, true, ""},
		{"approve from an agent, even of a managed role", lead, ActionApprove, Target{Role: "worker"}, false, "person's verb"},
		{"cancel a managed role's task", lead, ActionCancel, Target{Role: "worker"}, true, ""},
		{"comment on an unmanaged role's task", lead, ActionComment, Target{Role: "review"}, false, `add "review" to its manages key`},
		{"unplaced agent reads", unplaced, "read_output", w0, true, ""},
		{"unplaced agent may not send", unplaced, "send", w0, false, "cannot tell which of its agents calls (no incarnation live on record)"},
		{"unplaced agent may not stop", Policy{Verbs: []string{"stop"}, Unplaced: "x"}, "stop", w0, false, "may only read"},
		{"unplaced agent may not run a person's verb", unplaced, ActionReap, Target{}, false, "an agent herd runs may not reap"},
		{"unplaced agent's hook", unplaced, ActionHook, w0, false, "own task or session"},
	}
	for _, tc := range cases {
		d := Decide(tc.p, tc.tool, tc.t)
		if d.Allow != tc.allow || !strings.Contains(d.Why, tc.reason) {
			t.Errorf("[%s] expected allow=%v with %q, got %v %q", tc.name, tc.allow, tc.reason, d.Allow, d.Why)
		}
	}
}
