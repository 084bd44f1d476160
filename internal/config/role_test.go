package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

var testDefaults = Default().Restart

func validRole() herd.Role {
	return herd.Role{
		Name: "worker", Replicas: 1, Command: []string{"claude"}, Workdir: "/srv/app",
		Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude, Restart: testDefaults,
	}
}

func TestResolveRole(t *testing.T) {
	cases := []struct {
		name string
		in   herd.Role
		want herd.Role
	}{
		{
			"all defaults, agent from argv0 basename",
			herd.Role{Name: "w", Command: []string{"/usr/bin/claude", "-c"}},
			herd.Role{Name: "w", Command: []string{"/usr/bin/claude", "-c"}, Runtime: "tmux", Agent: "claude", Restart: testDefaults},
		},
		{
			"codex",
			herd.Role{Command: []string{"codex"}},
			herd.Role{Command: []string{"codex"}, Runtime: "tmux", Agent: "codex", Restart: testDefaults},
		},
		{
			"gemini",
			herd.Role{Command: []string{"gemini"}},
			herd.Role{Command: []string{"gemini"}, Runtime: "tmux", Agent: "gemini", Restart: testDefaults},
		},
		{
			"wrapper is generic",
			herd.Role{Command: []string{"bash", "-c", "claude"}},
			herd.Role{Command: []string{"bash", "-c", "claude"}, Runtime: "tmux", Agent: "generic", Restart: testDefaults},
		},
		{
			"no command is generic",
			herd.Role{},
			herd.Role{Runtime: "tmux", Agent: "generic", Restart: testDefaults},
		},
		{
			"explicit values kept, restart merged field by field",
			herd.Role{Command: []string{"claude"}, Runtime: "exec", Agent: "generic", Replicas: 3,
				Restart: herd.RestartPolicy{Policy: "never", MaxBackoff: time.Hour}},
			herd.Role{Command: []string{"claude"}, Runtime: "exec", Agent: "generic", Replicas: 3,
				Restart: herd.RestartPolicy{Policy: "never", InitialBackoff: testDefaults.InitialBackoff,
					MaxBackoff: time.Hour, ResetAfter: testDefaults.ResetAfter, MaxRestarts: testDefaults.MaxRestarts}},
		},
	}
	for _, tc := range cases {
		got := ResolveRole(tc.in, testDefaults)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("[%s] expected (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestResolveRoleDoesNotAlias(t *testing.T) {
	in := herd.Role{Command: []string{"a"}, Env: map[string]string{"K": "v"}}
	out := ResolveRole(in, testDefaults)
	out.Command[0] = "b"
	out.Env["K"] = "w"
	if in.Command[0] != "a" || in.Env["K"] != "v" {
		t.Errorf("expected input untouched, got command %v env %v", in.Command, in.Env)
	}
}

func TestValidateRole(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*herd.Role)
		want   string // "" = valid
	}{
		{"valid", func(*herd.Role) {}, ""},
		{"zero replicas", func(r *herd.Role) { r.Replicas = 0 }, ""},
		{"unlimited restarts", func(r *herd.Role) { r.Restart.MaxRestarts = 0 }, ""},
		{"bad name", func(r *herd.Role) { r.Name = "-w" }, `role "-w": name: "-w" must match`},
		{"empty name", func(r *herd.Role) { r.Name = "" }, `role "": name:`},
		{"no command", func(r *herd.Role) { r.Command = nil }, `role "worker": command: must be a non-empty array`},
		{"nul in argv", func(r *herd.Role) { r.Command = []string{"a", "b\x00"} }, `command[1]: contains a NUL byte`},
		{"relative workdir", func(r *herd.Role) { r.Workdir = "app" }, `workdir: "app" must be an absolute path`},
		{"bad runtime", func(r *herd.Role) { r.Runtime = "docker" }, `runtime: "docker" is not one of tmux, exec`},
		{"empty runtime", func(r *herd.Role) { r.Runtime = "" }, `runtime: "" is not one of`},
		{"bad agent", func(r *herd.Role) { r.Agent = "aider" }, `agent: "aider" is not one of claude, codex, gemini, generic`},
		{"negative replicas", func(r *herd.Role) { r.Replicas = -1 }, `replicas: must be 0 or more, got -1`},
		{"replicas at the limit", func(r *herd.Role) { r.Replicas = MaxReplicas }, ""},
		{"replicas over the limit", func(r *herd.Role) { r.Replicas = 2000000000 }, `role "worker": replicas: must be at most 1000, got 2000000000`},
		{"bad env key", func(r *herd.Role) { r.Env = map[string]string{"A-B": "x"} }, `env.A-B: "A-B" is not a valid`},
		{"reserved env key", func(r *herd.Role) { r.Env = map[string]string{herd.EnvIncarnation: "x"} }, `HERD_INCARNATION is set by herd`},
		{"bad policy", func(r *herd.Role) { r.Restart.Policy = "sometimes" }, `restart.policy: "sometimes" is not one of always, on-failure, never`},
		{"zero backoff", func(r *herd.Role) { r.Restart.InitialBackoff = 0 }, `restart.initial_backoff: must be positive`},
		{"negative max backoff", func(r *herd.Role) { r.Restart.MaxBackoff = -time.Second }, `restart.max_backoff: must be positive`},
		{"zero reset", func(r *herd.Role) { r.Restart.ResetAfter = 0 }, `restart.reset_after: must be positive`},
		{"negative max restarts", func(r *herd.Role) { r.Restart.MaxRestarts = -1 }, `restart.max_restarts: must be 0 (unlimited) or more`},
		{"max below initial", func(r *herd.Role) { r.Restart.MaxBackoff = time.Second }, `restart.max_backoff: "1s" is less than initial_backoff "10s"`},
		{"agent process path", func(r *herd.Role) { r.AgentProcess = "bin/claude" }, `agent_process: "bin/claude" must be a process name`},
	}
	for _, tc := range cases {
		r := validRole()
		tc.modify(&r)
		err := ValidateRole(r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("[%s] expected valid, got %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("[%s] expected error containing %q, got none", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("[%s] expected error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}

func TestExpandWorkdir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cases := []struct {
		in, want, err string
	}{
		{in: "", want: "/base"},
		{in: "~", want: home},
		{in: "~/", want: home},
		{in: "~/a/../b", want: filepath.Join(home, "b")},
		{in: "rel", want: "/base/rel"},
		{in: "./rel/", want: "/base/rel"},
		{in: "/abs//x", want: "/abs/x"},
		{in: "~root", err: `only "~" and "~/..." are expanded`},
	}
	for _, tc := range cases {
		got, err := ExpandWorkdir(tc.in, "/base")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("[%q] expected error containing %q, got %q, %v", tc.in, tc.err, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("[%q] expected %q, got %q, %v", tc.in, tc.want, got, err)
		}
	}
}

// TestInferAgentResolvesLinks: regression — a command naming claude.exe,
// or the node_modules/.bin/claude link to it, was inferred generic, so its
// resume lost --resume.
func TestInferAgentResolvesLinks(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude.exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "bin-claude")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{exe}, {link}, {"claude"}} {
		if got := InferAgent(argv, dir); got != herd.AgentClaude {
			t.Errorf("[%v] expected claude … got %s", argv, got)
		}
	}
	if got := InferAgent([]string{"/bin/sh", "-c", "x"}, dir); got != herd.AgentGeneric {
		t.Errorf("[sh] expected generic … got %s", got)
	}
}
