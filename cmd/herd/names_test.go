package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheckNames(t *testing.T) {
	tests := []struct {
		name             string
		session, role    bool
		wantInSessionErr string
	}{
		{"worker-0", true, true, ""},
		{"a-b-12", true, true, ""},
		{"worker", false, true, "e.g. worker-0"},
		{"Worker-0", false, false, "e.g. worker-0"},
		{"../../v1/health", false, false, `"../../v1/health"`},
		{"x?y", false, false, `"x?y"`},
		{"w-0/stop", false, false, "not a session name"},
		{"w%2f-0", false, false, "not a session name"},
		{"-0", false, false, "not a session name"},
		{"w-", false, true, "not a session name"},
		{"", false, false, "not a session name"},
	}
	for _, tt := range tests {
		err := checkSession("stop", tt.name)
		if (err == nil) != tt.session {
			t.Errorf("[session %q] expected valid=%v, got %v", tt.name, tt.session, err)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "stop: ") || !strings.Contains(err.Error(), tt.wantInSessionErr)) {
			t.Errorf("[session %q] expected an error naming the command and containing %q, got %q", tt.name, tt.wantInSessionErr, err)
		}
		if err := checkRole("scale", tt.name); (err == nil) != tt.role {
			t.Errorf("[role %q] expected valid=%v, got %v", tt.name, tt.role, err)
		}
	}
}

func TestPathsEscapeNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{sessionPath("worker-0", "/stop"), "/v1/sessions/worker-0/stop"},
		{sessionPath("../../v1/health", ""), "/v1/sessions/..%2F..%2Fv1%2Fhealth"},
		{sessionPath("x?y", "/stop"), "/v1/sessions/x%3Fy/stop"},
		{rolePath("a b", "/scale"), "/v1/roles/a%20b/scale"},
		{rolePath("worker", ""), "/v1/roles/worker"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("expected %q, got %q", tt.want, tt.got)
		}
	}
}

// TestParentCommandsNeedSubcommand runs the command tree in process: no
// daemon is needed to reject a missing or mistyped subcommand.
func TestParentCommandsNeedSubcommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "sesions"}, `get: unknown resource "sesions" (want hosts, roles, sessions or tasks)`},
		{[]string{"get"}, `get: missing resource (want hosts, roles, sessions or tasks)`},
		{[]string{"describe", "sesion", "w-0"}, `describe: unknown resource "sesion" (want role, session or task)`},
		{[]string{"delete", "roles", "w"}, `delete: unknown resource "roles" (want role)`},
		{[]string{"hooks", "instal"}, `hooks: unknown action "instal" (want install)`},
		{[]string{"delete", "role", "a/b"}, `delete role: "a/b" is not a role name`},
		{[]string{"describe", "session"}, `describe session: want one session NAME`},
		{[]string{"task", "ad"}, `task: unknown action "ad" (want add, approve, cancel, comment, diff or retry)`},
	}
	for _, tt := range tests {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tt.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%s] expected error %q, got %v", strings.Join(tt.args, " "), tt.want, err)
		}
		if out.Len() != 0 {
			t.Errorf("[%s] expected no output, got %q", strings.Join(tt.args, " "), out.String())
		}
	}
}

func TestOrList(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	}
	for _, tt := range tests {
		if got := orList(tt.in); got != tt.want {
			t.Errorf("[%v] expected %q, got %q", tt.in, tt.want, got)
		}
	}
}
