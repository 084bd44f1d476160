package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"64M", 64 << 20, true},
		{"64m", 64 << 20, true},
		{"64MiB", 64 << 20, true},
		{"64 MB", 64 << 20, true},
		{"1.5G", 3 << 29, true},
		{"2T", 2 << 40, true},
		{"512K", 512 << 10, true},
		{"1048576", 1 << 20, true},
		{"0", 0, true},
		{"", 0, false},
		{"M", 0, false},
		{"64X", 0, false},
		{"-64M", 0, false},
		{"1.2.3M", 0, false},
		{"99999999T", 0, false},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("[%q] expected (%d, ok=%v), got (%d, %v)", c.in, c.want, c.ok, got, err)
		}
	}
}

func TestParseContainmentKeys(t *testing.T) {
	doc := `[[role]]
name = "worker"
command = ["claude"]
workdir = "/srv/app"
worktree = true
worktree_base = "main"
worktree_setup = ["npm", "ci"]
worktree_include = [".env", "config/*.local"]
memory_max = "4G"
pids_max = 512
restart_on_update = true
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	got := cfg.Roles[0]
	want := herd.Role{
		Name: "worker", Replicas: 1, Command: []string{"claude"}, Workdir: "/srv/app",
		Runtime: herd.RuntimeTmux, Agent: herd.AgentClaude, Restart: Default().Restart,
		Worktree: true, WorktreeBase: "main", WorktreeSetup: []string{"npm", "ci"},
		WorktreeInclude: []string{".env", "config/*.local"}, MemoryMax: 4 << 30, PidsMax: 512,
		RestartOnUpdate: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expected role (-want +got):\n%s", diff)
	}

	// Absent keys keep the defaults of the contract.
	cfg, err = Parse([]byte("[[role]]\nname = \"w\"\ncommand = [\"a\"]\n"), "herd.toml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Roles[0]
	if r.Worktree || r.WorktreeBase != "" || r.WorktreeSetup != nil || r.WorktreeInclude != nil ||
		r.MemoryMax != 0 || r.PidsMax != 0 || r.RestartOnUpdate {
		t.Errorf("expected zero containment fields by default, got %+v", r)
	}
}

func TestParseContainmentErrors(t *testing.T) {
	head := "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n"
	cases := []struct {
		name, doc, key, text string
		line                 int
	}{
		{"bad size", head + "memory_max = \"64X\"\n", "role[0].memory_max", `role "w": memory_max: invalid size "64X"`, 4},
		{"size without unit too small", head + "memory_max = \"64\"\n", "role[0].memory_max", `memory_max: 64 bytes is below the minimum of 1M`, 4},
		{"size as integer", head + "memory_max = 64\n", "role[0].memory_max", `got a TOML integer, want a string`, 4},
		{"negative pids", head + "\npids_max = -1\n", "role[0].pids_max", `pids_max: must be 0 (no limit) or more, got -1`, 5},
		{"setup as string", head + "worktree_setup = \"npm ci\"\n", "role[0].worktree_setup", `worktree_setup: "npm ci" is a string; write an argv array, e.g. worktree_setup = ["npm", "ci"]`, 4},
		{"setup with a number", head + "worktree_setup = [\"make\", 3]\n", "role[0].worktree_setup[1]", `worktree_setup[1]: got 3, want a string`, 4},
		{"include as string", head + "worktree_include = \".env\"\n", "role[0].worktree_include", `worktree_include: ".env" is a string; write an array`, 4},
		{"include outside", head + "worktree_include = [\".env\", \"../secrets\"]\n", "role[0].worktree_include[1]", `worktree_include[1]: "../secrets" must be relative to the workdir`, 4},
		{"include absolute", head + "worktree_include = [\"/etc/passwd\"]\n", "role[0].worktree_include[0]", `must be relative to the workdir`, 4},
		{"include bad glob", head + "worktree_include = [\"[\"]\n", "role[0].worktree_include[0]", `"[" is not a valid glob`, 4},
		{"base option", head + "worktree_base = \"--orphan\"\n", "role[0].worktree_base", `worktree_base: "--orphan" must be a branch or commit, not an option`, 4},
		{"base with space", head + "worktree_base = \"my branch\"\n", "role[0].worktree_base", `contains white space`, 4},
		{"worktree not bool", head + "worktree = \"yes\"\n", "role[0].worktree", `got a TOML string, want a boolean`, 4},
		{"unknown neighbour", head + "worktree_dir = \"x\"\n", "role[0].worktree_dir", `unknown key`, 4},
		{"check as string", head + "check = \"go test\"\n", "role[0].check", `check: "go test" is a string; write an argv array`, 4},
		{"check timeout", head + "check_timeout = \"soon\"\n", "role[0].check_timeout", `invalid duration "soon"`, 4},
		{"merge mode", head + "merge = \"octopus\"\n", "role[0].merge", `"octopus"`, 4},
		{"tasks on exec, restarted always", head + "runtime = \"exec\"\ntasks = true\nrestart = { policy = \"always\" }\n", "role[0].restart.policy", `restart policy "always" would run each turn again`, 6},
		{"tasks placed, scaled by the queue", head + "spread = true\ntasks = true\nmax_replicas = 3\n", "role[0].max_replicas", `keeps its replicas`, 6},
		{"max replicas without tasks", head + "max_replicas = 4\n", "role[0].max_replicas", `needs tasks = true`, 4},
		{"max replicas below replicas", head + "tasks = true\nreplicas = 3\nmax_replicas = 2\n", "role[0].max_replicas", `2 is below replicas (3)`, 6},
		{"scale down after", head + "tasks = true\nscale_down_after = \"later\"\n", "role[0].scale_down_after", `invalid duration "later"`, 5},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.doc), "herd.toml", "/base")
		if err == nil {
			t.Errorf("[%s] expected an error, got none", tc.name)
			continue
		}
		var match *Error
		for _, e := range allErrors(err) {
			if strings.Contains(e.Error(), tc.text) {
				match = e
				break
			}
		}
		if match == nil {
			t.Errorf("[%s] expected a message containing %q, got:\n%v", tc.name, tc.text, err)
			continue
		}
		if match.Line != tc.line || match.Key != tc.key {
			t.Errorf("[%s] expected line %d key %q, got line %d key %q (%v)", tc.name, tc.line, tc.key, match.Line, match.Key, match)
		}
		if n := len(allErrors(err)); n != 1 {
			t.Errorf("[%s] expected the problem reported once, got %d: %v", tc.name, n, err)
		}
	}
}

func TestValidateRoleContainment(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*herd.Role)
		want   string
	}{
		{"all set", func(r *herd.Role) {
			r.Worktree, r.WorktreeBase, r.WorktreeSetup, r.WorktreeInclude = true, "main", []string{"make"}, []string{".env"}
			r.MemoryMax, r.PidsMax, r.RestartOnUpdate = 64<<20, 100, true
		}, ""},
		{"negative memory", func(r *herd.Role) { r.MemoryMax = -1 }, `memory_max: must be 0 (no limit) or more`},
		{"tiny memory", func(r *herd.Role) { r.MemoryMax = 4096 }, `memory_max: 4096 bytes is below the minimum of 1M`},
		{"negative pids", func(r *herd.Role) { r.PidsMax = -3 }, `pids_max: must be 0`},
		{"setup empty argv0", func(r *herd.Role) { r.WorktreeSetup = []string{""} }, `worktree_setup: must be a non-empty array`},
		{"include empty", func(r *herd.Role) { r.WorktreeInclude = []string{""} }, `worktree_include[0]: must be a non-empty glob`},
		{"include parent", func(r *herd.Role) { r.WorktreeInclude = []string{".."} }, `must be relative to the workdir`},
	}
	for _, tc := range cases {
		r := validRole()
		tc.modify(&r)
		err := ValidateRole(r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("[%s] expected valid, got %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("[%s] expected error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}

func TestResolveRoleDoesNotAliasContainment(t *testing.T) {
	in := validRole()
	in.WorktreeSetup = []string{"make"}
	in.WorktreeInclude = []string{".env"}
	out := ResolveRole(in, testDefaults)
	out.WorktreeSetup[0] = "changed"
	out.WorktreeInclude[0] = "changed"
	if in.WorktreeSetup[0] != "make" || in.WorktreeInclude[0] != ".env" {
		t.Fatalf("expected the input untouched, got %v %v", in.WorktreeSetup, in.WorktreeInclude)
	}
}

// TestExecTaskRolePolicy: an exec role that takes tasks, its restart
// policy left to [restart]'s "always", runs "on-failure" (its turn ends
// at its exit 0); one that names "always" itself is refused (above);
// other roles keep the default.
func TestExecTaskRolePolicy(t *testing.T) {
	cfg, err := Parse([]byte(`[restart]
policy = "always"
[[role]]
name = "headless"
command = ["claude", "-p"]
workdir = "/w"
runtime = "exec"
tasks = true
[[role]]
name = "plain"
command = ["sleep", "1"]
workdir = "/w"
runtime = "exec"
`), "herd.toml", "/base")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Roles[0].Restart.Policy; got != herd.PolicyOnFailure {
		t.Errorf("[exec task role] expected on-failure, got %q", got)
	}
	if got := cfg.Roles[1].Restart.Policy; got != herd.PolicyAlways {
		t.Errorf("[plain exec role] expected the default always, got %q", got)
	}
	r, err := Inherit(herd.Role{Name: "h", Runtime: herd.RuntimeExec, Tasks: true}, []string{"policy"}, herd.RestartPolicy{Policy: herd.PolicyAlways})
	if err != nil || r.Restart.Policy != herd.PolicyOnFailure {
		t.Errorf("[applied] expected on-failure inherited, got %q, %v", r.Restart.Policy, err)
	}
}
