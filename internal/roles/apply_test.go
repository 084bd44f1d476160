package roles

import (
	"slices"
	"testing"
	"time"

	"herd"
)

func TestDiffRole(t *testing.T) {
	base := herd.Role{Name: "w", Replicas: 2, Command: []string{"claude"}, Workdir: "/src", Env: map[string]string{"A": "1"},
		Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude, Restart: herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second}}
	with := func(f func(r *herd.Role)) herd.Role {
		r := base
		r.Command = slices.Clone(base.Command)
		r.Env = map[string]string{"A": "1"}
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		new     herd.Role
		exists  bool
		action  string
		changed []string
	}{
		{"new role", base, false, RoleCreated, nil},
		{"same", with(func(r *herd.Role) {}), true, RoleUnchanged, nil},
		{"updated_at alone is no change", with(func(r *herd.Role) { r.UpdatedAt = time.Now() }), true, RoleUnchanged, nil},
		{"env emptied", with(func(r *herd.Role) { r.Env = map[string]string{} }), true, RoleConfigured, []string{"env"}},
		{"replicas", with(func(r *herd.Role) { r.Replicas = 3 }), true, RoleConfigured, []string{"replicas 2 -> 3"}},
		{"command and env", with(func(r *herd.Role) { r.Command = []string{"codex"}; r.Env["B"] = "2" }), true, RoleConfigured, []string{"command", "env"}},
		{"restart", with(func(r *herd.Role) { r.Restart.MaxRestarts = 4 }), true, RoleConfigured, []string{"restart"}},
		{"worktree", with(func(r *herd.Role) { r.Worktree = true }), true, RoleConfigured, []string{"worktree"}},
		{"placement", with(func(r *herd.Role) { r.Hosts = []string{"b"} }), true, RoleConfigured, []string{"placement"}},
		{"failover", with(func(r *herd.Role) { r.Spread, r.Failover = true, true }), true, RoleConfigured, []string{"placement"}},
		{"empty hosts is none", with(func(r *herd.Role) { r.Hosts = []string{} }), true, RoleUnchanged, nil},
	}
	for _, tt := range tests {
		c := diffRole(base, tt.new, tt.exists)
		if c.Action != tt.action || !slices.Equal(c.Changed, tt.changed) {
			t.Errorf("[%s] expected %s %v … got %s %v", tt.name, tt.action, tt.changed, c.Action, c.Changed)
		}
	}
}
