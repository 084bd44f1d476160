package rollout

import (
	"slices"
	"testing"

	"herd"
)

func TestChanged(t *testing.T) {
	base := herd.Role{Name: "w", Command: []string{"claude", "--fast"}, Workdir: "/src/app", Env: map[string]string{"A": "1", "B": "2"}}
	fp := Fingerprint(base)
	with := func(f func(r *herd.Role)) herd.Role {
		r := base
		r.Env = map[string]string{"A": "1", "B": "2"}
		f(&r)
		return r
	}
	tests := []struct {
		name     string
		recorded string
		role     herd.Role
		want     []string
	}{
		{"same", fp, base, nil},
		{"env order does not matter", fp, with(func(r *herd.Role) { r.Env = map[string]string{"B": "2", "A": "1"} }), nil},
		{"replicas and restart do not matter", fp, with(func(r *herd.Role) { r.Replicas = 9; r.Restart.Policy = herd.PolicyNever }), nil},
		{"command", fp, with(func(r *herd.Role) { r.Command = []string{"claude"} }), []string{PartCommand}},
		{"argument split differently", fp, with(func(r *herd.Role) { r.Command = []string{"claude --fast"} }), []string{PartCommand}},
		{"workdir", fp, with(func(r *herd.Role) { r.Workdir = "/src/other" }), []string{PartWorkdir}},
		{"env value", fp, with(func(r *herd.Role) { r.Env["B"] = "3" }), []string{PartEnv}},
		{"env key", fp, with(func(r *herd.Role) { delete(r.Env, "B") }), []string{PartEnv}},
		{"all", fp, herd.Role{Command: []string{"x"}, Workdir: "/", Env: nil}, []string{PartCommand, PartWorkdir, PartEnv}},
		{"never recorded", "", with(func(r *herd.Role) { r.Command = []string{"x"} }), nil},
		{"garbled", "command=abc", with(func(r *herd.Role) { r.Command = []string{"x"} }), nil},
		{"part missing", "command=a workdir=b other=c", base, nil},
	}
	for _, tt := range tests {
		if got := Changed(tt.recorded, tt.role); !slices.Equal(got, tt.want) {
			t.Errorf("[%s] expected %v … got %v", tt.name, tt.want, got)
		}
	}
}

func TestJudge(t *testing.T) {
	old := herd.Role{Command: []string{"v1"}}
	cur := herd.Role{Command: []string{"v2"}}
	fp := Fingerprint(old)
	tests := []struct {
		state herd.State
		role  herd.Role
		want  Verdict
	}{
		{herd.StateRunning, cur, Verdict{true, "role_changed: command"}},
		{herd.StatePending, cur, Verdict{true, "role_changed: command"}},
		{herd.StateStalled, cur, Verdict{true, "role_changed: command"}},
		{herd.StateUnknown, cur, Verdict{true, "role_changed: command"}},
		{herd.StateRunning, old, Verdict{}},
		// The next launch takes the new template anyway.
		{herd.StateBackoff, cur, Verdict{}},
		// Nothing runs.
		{herd.StateStopped, cur, Verdict{}},
		{herd.StateFailed, cur, Verdict{}},
		{herd.StateSucceeded, cur, Verdict{}},
		{herd.StateCrashed, cur, Verdict{}},
	}
	for _, tt := range tests {
		if got := Judge(herd.Session{State: tt.state}, fp, tt.role); got != tt.want {
			t.Errorf("[%s, %v] expected %+v … got %+v", tt.state, tt.role.Command, tt.want, got)
		}
		// The role's fingerprint computed once by the caller.
		if got := JudgeFrom(herd.Session{State: tt.state}, fp, Fingerprint(tt.role)); got != tt.want {
			t.Errorf("[%s, %v, JudgeFrom] expected %+v … got %+v", tt.state, tt.role.Command, tt.want, got)
		}
	}
}
