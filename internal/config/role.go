package config

import (
	"errors"
	"fmt"
	"herd/internal/agents"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"herd"
)

// Accepted values, in the order error messages list them.
var (
	policies   = []string{herd.PolicyAlways, herd.PolicyOnFailure, herd.PolicyNever}
	runtimes   = []string{herd.RuntimeTmux, herd.RuntimeExec}
	agentKinds = []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini, herd.AgentGeneric}
)

// envKeyRE matches a portable environment variable name.
var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// problem is one invalid value. keys are relative key paths (within a role,
// or within the whole file); the first one written in the file locates it.
type problem struct {
	keys []string
	msg  string
}

func (p problem) String() string { return p.keys[0] + ": " + p.msg }

// ResolveRole fills r's defaults: runtime "tmux"; agent inferred from the
// basename of command[0] (claude, codex, gemini), else "generic"; each zero
// restart field from defaults. Replicas and workdir are left as they are.
// The result shares no slices or maps with r.
func ResolveRole(r herd.Role, defaults herd.RestartPolicy) herd.Role {
	rp := &r.Restart
	if rp.Policy == "" {
		rp.Policy = defaults.Policy
	}
	if rp.InitialBackoff == 0 {
		rp.InitialBackoff = defaults.InitialBackoff
	}
	if rp.MaxBackoff == 0 {
		rp.MaxBackoff = defaults.MaxBackoff
	}
	if rp.ResetAfter == 0 {
		rp.ResetAfter = defaults.ResetAfter
	}
	if rp.MaxRestarts == 0 {
		rp.MaxRestarts = defaults.MaxRestarts
	}
	return resolveKinds(r)
}

// resolveKinds fills runtime and agent and copies r's slices and maps.
func resolveKinds(r herd.Role) herd.Role {
	if r.Runtime == "" {
		r.Runtime = herd.RuntimeTmux
	}
	if r.Agent == "" {
		r.Agent = InferAgent(r.Command, r.Workdir)
	}
	r.Command = slices.Clone(r.Command)
	r.Env = maps.Clone(r.Env)
	r.WorktreeSetup = slices.Clone(r.WorktreeSetup)
	r.WorktreeInclude = slices.Clone(r.WorktreeInclude)
	return r
}

// InferAgent returns the agent kind a command runs (see agents.Infer):
// links resolved first, so `.../bin/claude.exe` and
// `node_modules/.bin/claude` are claude; "generic" otherwise.
func InferAgent(argv []string, workdir string) string {
	if len(argv) == 0 {
		return herd.AgentGeneric
	}
	return agents.Infer(argv, agents.Resolve(argv[0], workdir))
}

// MaxReplicas is the most replicas a role may declare. Each replica is an
// agent with its own process tree and tmux pane: far more than a host runs,
// and a typo (an extra zero, a negative number wrapped around) would
// otherwise have the daemon plan and launch without end.
const MaxReplicas = 1000

// ValidateRole checks a resolved role: name, command, workdir, runtime,
// agent, replicas, env and restart policy. It joins one error per problem,
// each prefixed with the role's name.
func ValidateRole(r herd.Role) error {
	probs := roleProblems(r)
	if len(probs) == 0 {
		return nil
	}
	subject := roleSubject(r.Name, -1)
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = fmt.Errorf("%s: %s", subject, p)
	}
	return errors.Join(errs...)
}

// roleSubject names a role in messages: by name when it is valid, else by
// its position in the file.
func roleSubject(name string, index int) string {
	if herd.ValidRoleName(name) || index < 0 {
		return "role " + strconv.Quote(name)
	}
	return fmt.Sprintf("role[%d]", index)
}

// roleProblems lists what is wrong with a resolved role.
func roleProblems(r herd.Role) []problem {
	var probs []problem
	add := func(msg string, keys ...string) { probs = append(probs, problem{keys, msg}) }

	if !herd.ValidRoleName(r.Name) {
		add(fmt.Sprintf("%q must match [a-z0-9][a-z0-9-]{0,40}", r.Name), "name")
	}
	switch {
	case r.Replicas < 0:
		add(fmt.Sprintf("must be 0 or more, got %d", r.Replicas), "replicas")
	case r.Replicas > MaxReplicas:
		add(fmt.Sprintf("must be at most %d, got %d", MaxReplicas, r.Replicas), "replicas")
	}
	probs = append(probs, argvProblems(r.Command, "command")...)
	if r.Workdir == "" || !filepath.IsAbs(r.Workdir) {
		add(fmt.Sprintf("%q must be an absolute path", r.Workdir), "workdir")
	}
	if !slices.Contains(runtimes, r.Runtime) {
		add(notOneOf(r.Runtime, runtimes), "runtime")
	}
	if !slices.Contains(agentKinds, r.Agent) {
		add(notOneOf(r.Agent, agentKinds), "agent")
	}
	if strings.ContainsAny(r.AgentProcess, "/\x00") {
		add(fmt.Sprintf("%q must be a process name, not a path", r.AgentProcess), "agent_process")
	}
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		key := "env." + k
		switch {
		case !envKeyRE.MatchString(k):
			add(fmt.Sprintf("%q is not a valid environment variable name", k), key)
		case k == herd.EnvSession || k == herd.EnvIncarnation || k == herd.EnvSocket:
			add(fmt.Sprintf("%s is set by herd and cannot be overridden", k), key)
		case strings.ContainsRune(r.Env[k], 0):
			add("value contains a NUL byte", key)
		}
	}
	probs = append(probs, containmentProblems(r)...)
	probs = append(probs, placementProblems(r)...)
	probs = append(probs, spendProblems(r)...)
	for _, p := range restartProblems(r.Restart) {
		for i := range p.keys {
			p.keys[i] = "restart." + p.keys[i]
		}
		probs = append(probs, p)
	}
	return probs
}

// containmentProblems checks a role's worktree and resource keys.
func containmentProblems(r herd.Role) []problem {
	var probs []problem
	add := func(msg string, keys ...string) { probs = append(probs, problem{keys, msg}) }
	switch b := r.WorktreeBase; {
	case strings.HasPrefix(b, "-"):
		add(fmt.Sprintf("%q must be a branch or commit, not an option", b), "worktree_base")
	case strings.ContainsFunc(b, func(c rune) bool { return c <= ' ' || c == 0x7f }):
		add(fmt.Sprintf("%q contains white space or a control character", b), "worktree_base")
	}
	if len(r.WorktreeSetup) > 0 {
		probs = append(probs, argvProblems(r.WorktreeSetup, "worktree_setup")...)
	}
	for i, g := range r.WorktreeInclude {
		key := fmt.Sprintf("worktree_include[%d]", i)
		clean := filepath.Clean(g)
		switch {
		case g == "" || strings.ContainsRune(g, 0):
			add("must be a non-empty glob", key, "worktree_include")
		case filepath.IsAbs(g) || clean == ".." || strings.HasPrefix(clean, "../"):
			add(fmt.Sprintf("%q must be relative to the workdir, inside it", g), key, "worktree_include")
		default:
			if _, err := filepath.Match(g, ""); err != nil {
				add(fmt.Sprintf("%q is not a valid glob: %v", g, err), key, "worktree_include")
			}
		}
	}
	switch {
	case r.MemoryMax < 0:
		add(fmt.Sprintf("must be 0 (no limit) or more, got %d", r.MemoryMax), "memory_max")
	case r.MemoryMax > 0 && r.MemoryMax < MinMemoryMax:
		add(fmt.Sprintf("%d bytes is below the minimum of 1M", r.MemoryMax), "memory_max")
	}
	if r.PidsMax < 0 {
		add(fmt.Sprintf("must be 0 (no limit) or more, got %d", r.PidsMax), "pids_max")
	}
	return append(probs, taskProblems(r)...)
}

// taskProblems checks a role's task keys.
func taskProblems(r herd.Role) []problem {
	var probs []problem
	add := func(msg string, keys ...string) { probs = append(probs, problem{keys, msg}) }
	if len(r.Check) > 0 {
		probs = append(probs, argvProblems(r.Check, "check")...)
	}
	if r.CheckTimeout < 0 {
		add(fmt.Sprintf("must be 0 (the default, %s) or positive, got %s", herd.DefaultCheckTimeout, r.CheckTimeout), "check_timeout")
	}
	if m := r.Merge; m != "" && !slices.Contains(mergeModes, m) {
		add(notOneOf(m, mergeModes), "merge")
	}
	switch {
	case r.MaxReplicas < 0 || r.MaxReplicas > MaxReplicas:
		add(fmt.Sprintf("must be 0 (the replicas are fixed) to %d, got %d", MaxReplicas, r.MaxReplicas), "max_replicas")
	case r.MaxReplicas > 0 && !r.Tasks:
		add("needs tasks = true: the task queue is what starts the replicas beyond replicas", "max_replicas")
	case r.MaxReplicas > 0 && r.MaxReplicas < r.Replicas:
		add(fmt.Sprintf("%d is below replicas (%d)", r.MaxReplicas, r.Replicas), "max_replicas")
	}
	if r.ScaleDownAfter < 0 {
		add(fmt.Sprintf("must be 0 (the default, %s) or positive, got %s", herd.DefaultScaleDownAfter, r.ScaleDownAfter), "scale_down_after")
	}
	if r.Name == "t" && r.Worktree {
		add(`a role named "t" cannot have worktrees: its sessions' worktrees and branches (t-N, herd/t-N) are those of the tasks`, "worktree")
	}
	if r.Tasks && r.Placed() && r.MaxReplicas > r.Replicas {
		// The placement leader places replicas, not the queue.
		add("the task queue scales a role on its own host only: a role with hosts or spread keeps its replicas (max_replicas above replicas)", "max_replicas")
	}
	if r.Tasks && r.Runtime == herd.RuntimeExec && r.Restart.Policy == herd.PolicyAlways {
		// Its agent exits 0 when its turn is done; always would run the
		// turn again.
		add(`an exec role that takes tasks runs one turn a launch, ended by its exit 0: restart policy "always" would run each turn again; use "on-failure" (its default) or "never"`, "restart.policy")
	}
	return probs
}

// mergeModes are the values of the merge key.
var mergeModes = []string{herd.MergeMerge, herd.MergeSquash, herd.MergeRebase}

// argvProblems checks a command line given as an argv array.
func argvProblems(argv []string, key string) []problem {
	if len(argv) == 0 || argv[0] == "" {
		return []problem{{[]string{key}, `must be a non-empty array of strings, e.g. ["claude"]`}}
	}
	for i, a := range argv {
		if strings.ContainsRune(a, 0) {
			return []problem{{[]string{fmt.Sprintf("%s[%d]", key, i), key}, "contains a NUL byte"}}
		}
	}
	return nil
}

// restartProblems checks a restart policy; keys are relative to it.
func restartProblems(rp herd.RestartPolicy) []problem {
	var probs []problem
	add := func(msg string, keys ...string) { probs = append(probs, problem{keys, msg}) }
	if !slices.Contains(policies, rp.Policy) {
		add(notOneOf(rp.Policy, policies), "policy")
	}
	if rp.InitialBackoff <= 0 {
		add(fmt.Sprintf("must be positive, got %q", rp.InitialBackoff), "initial_backoff")
	}
	if rp.MaxBackoff <= 0 {
		add(fmt.Sprintf("must be positive, got %q", rp.MaxBackoff), "max_backoff")
	}
	if rp.ResetAfter <= 0 {
		add(fmt.Sprintf("must be positive, got %q", rp.ResetAfter), "reset_after")
	}
	if rp.MaxRestarts < 0 {
		add(fmt.Sprintf("must be 0 (unlimited) or more, got %d", rp.MaxRestarts), "max_restarts")
	}
	if rp.InitialBackoff > 0 && rp.MaxBackoff > 0 && rp.MaxBackoff < rp.InitialBackoff {
		add(fmt.Sprintf("%q is less than initial_backoff %q", rp.MaxBackoff, rp.InitialBackoff),
			"max_backoff", "initial_backoff")
	}
	return probs
}

// notOneOf says that v is not one of the allowed values.
func notOneOf(v string, allowed []string) string {
	return fmt.Sprintf("%q is not one of %s", v, strings.Join(allowed, ", "))
}

// ExpandWorkdir resolves a role's workdir: "" is baseDir, "~" and "~/..."
// are under the home directory, a relative path is under baseDir. The
// result is clean; "~user" forms are refused.
func ExpandWorkdir(dir, baseDir string) (string, error) {
	switch {
	case dir == "":
		return filepath.Clean(baseDir), nil
	case dir == "~" || strings.HasPrefix(dir, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand %q: %w", dir, err)
		}
		return filepath.Join(home, dir[1:]), nil
	case strings.HasPrefix(dir, "~"):
		return "", fmt.Errorf(`%q: only "~" and "~/..." are expanded`, dir)
	case filepath.IsAbs(dir):
		return filepath.Clean(dir), nil
	}
	return filepath.Join(baseDir, dir), nil
}
