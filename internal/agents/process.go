package agents

import (
	"os/exec"
	"path/filepath"
	"strings"

	"herd"
)

// Proc is what the caller read about one process from /proc.
type Proc struct {
	PID  int      // its pid (0 when the caller does not say)
	PPID int      // its parent's pid
	Comm string   // /proc/PID/comm
	Argv []string // /proc/PID/cmdline
	Exe  string   // the target of /proc/PID/exe ("" when unreadable)
}

// launchers are interpreters that run an agent's script: the agent is
// named by the script, not by the interpreter.
var launchers = map[string]bool{"node": true, "nodejs": true, "bun": true, "deno": true}

// packageKinds maps the npm packages of the agents to their kind, for
// scripts whose own name says nothing (dist/index.js, bin/codex.js).
var packageKinds = []struct{ dir, kind string }{
	{"/@anthropic-ai/claude-code/", herd.AgentClaude},
	{"/@openai/codex/", herd.AgentCodex},
	{"/@google/gemini-cli/", herd.AgentGemini},
}

// BaseName is the name a path or command word stands for: its last
// element, without a trailing " (deleted)" (an exe replaced on disk) and
// without ".exe", ".js", ".mjs" or ".cjs".
func BaseName(p string) string {
	p = strings.TrimSuffix(p, " (deleted)")
	b := filepath.Base(p)
	for _, ext := range []string{".exe", ".js", ".mjs", ".cjs"} {
		if s, ok := strings.CutSuffix(b, ext); ok && s != "" {
			return s
		}
	}
	return b
}

// kindOfPath returns the agent kind path names, or "".
func kindOfPath(p string) string {
	switch b := BaseName(p); b {
	case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
		return b
	}
	slash := filepath.ToSlash(p)
	for _, pk := range packageKinds {
		if strings.Contains(slash, pk.dir) {
			return pk.kind
		}
	}
	return ""
}

// scriptIndex returns the index of the script an interpreter (argv[0])
// runs: the first argument that is not a flag; -1 when argv[0] is no
// launcher or there is none.
func scriptIndex(argv []string) int {
	if len(argv) == 0 || !launchers[BaseName(argv[0])] {
		return -1
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			if i+1 < len(argv) {
				return i + 1
			}
			return -1
		case a == "-r" || a == "--require" || a == "--import" || a == "--loader":
			i++ // the flag's value is a module, not the script
		case strings.HasPrefix(a, "-"):
		default:
			return i
		}
	}
	return -1
}

// agentIndex returns the index in argv of the word that names the agent
// (argv[0], or the script of a node launcher) and its kind; -1 and
// generic when none does. resolved is argv[0] with symbolic links
// resolved (see Resolve), or "".
func agentIndex(argv []string, resolved string) (int, string) {
	if len(argv) == 0 {
		return -1, herd.AgentGeneric
	}
	if k := kindOfPath(argv[0]); k != "" {
		return 0, k
	}
	if resolved != "" {
		if k := kindOfPath(resolved); k != "" {
			return 0, k
		}
	}
	if i := scriptIndex(argv); i > 0 {
		if k := kindOfPath(argv[i]); k != "" {
			return i, k
		}
	}
	return -1, herd.AgentGeneric
}

// Infer returns the agent kind a command runs: claude, codex or gemini
// when argv[0] (or resolved, argv[0] with its links resolved) is named so,
// ".exe" stripped (node_modules/.bin/claude links to bin/claude.exe), or
// when argv[0] is node (bun, deno) running such a script; generic
// otherwise.
func Infer(argv []string, resolved string) string {
	_, k := agentIndex(argv, resolved)
	return k
}

// Resolve returns argv0 looked up in PATH (when it has no slash) relative
// to dir, with every symbolic link resolved; "" when that fails. It reads
// the file system: call it once per launch, not per probe.
func Resolve(argv0, dir string) string {
	p := argv0
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return ""
		}
		p = lp
	}
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// Names returns the names that pick kind's process out of a process tree:
// agentProcess when set (the role's agent_process), else the kind's own
// name; nil for generic without agent_process.
func Names(kind, agentProcess string) []string {
	if agentProcess != "" {
		return []string{agentProcess}
	}
	if n := ProcessName(kind); n != "" {
		return []string{n}
	}
	return nil
}

// Matches reports whether p is a process named by one of names: its comm,
// its argv[0] basename, its exe basename or, for a node launcher, its
// script's basename, each with ".exe" (and ".js") stripped; a launcher
// running a script from an agent's npm package matches that agent's name.
// comm is cut to 15 bytes by the kernel, so a name longer than that
// matches a comm that is its prefix.
func Matches(names []string, p Proc) bool {
	var cands []string
	if p.Comm != "" {
		cands = append(cands, p.Comm, BaseName(p.Comm))
	}
	if len(p.Argv) > 0 {
		cands = append(cands, BaseName(p.Argv[0]))
		if i := scriptIndex(p.Argv); i > 0 {
			cands = append(cands, BaseName(p.Argv[i]))
			if k := kindOfPath(p.Argv[i]); k != "" {
				cands = append(cands, k)
			}
		}
	}
	if p.Exe != "" {
		cands = append(cands, BaseName(p.Exe))
	}
	for _, n := range names {
		if n == "" {
			continue
		}
		for _, c := range cands {
			if c == n {
				return true
			}
		}
		if len(n) > 15 && p.Comm != "" && len(p.Comm) == 15 && strings.HasPrefix(n, p.Comm) {
			return true
		}
	}
	return false
}

// helperSubcommands are subcommands with which an agent's binary runs a
// helper that is not the agent: Codex (0.169) starts a managed
// `codex app-server` daemon, named codex too, that outlives the session.
var helperSubcommands = map[string]bool{"app-server": true, "mcp-server": true}

// IsHelper reports whether p is a helper process of an agent (see
// helperSubcommands), never the agent itself.
func IsHelper(p Proc) bool {
	return len(p.Argv) > 1 && helperSubcommands[p.Argv[1]]
}

// IsLauncher reports whether p is an interpreter running a script (node
// …/bin/codex.js): when it matches an agent's name, the agent's own
// process is usually its child.
func IsLauncher(p Proc) bool { return scriptIndex(p.Argv) > 0 }

// Pick returns the index in tree (a launched process tree, parents before
// children, each with its PID and PPID) of the agent process, and whether
// that choice is settled; -1 when no process matches names.
//
// The agent is the first process that Matches names and is not a helper,
// followed down through launchers: while the process chosen is an
// interpreter running a script (npm's node shims: `node …/bin/codex.js`,
// whose child is Codex's native TUI under Node < 22.15; `node
// …/gemini.js`, whose child is Gemini CLI relaunched with more memory),
// its newest matching child is the agent instead, and a launcher's child
// that is itself a launcher is the agent. A launcher forwards some
// signals and swallows others, and turns its child's death into an exit
// code of its own: it never stands in for the agent while a child is there
// to be it. A process that is not a launcher is never followed down (an
// agent's tool that runs another copy of the agent is not the agent).
//
// A launcher with no matching child is not settled: its child may be
// about to start (the caller looks again), or the launcher is the agent
// itself (Gemini CLI with GEMINI_CLI_NO_RELAUNCH; the caller takes it once
// the child has had time to appear).
func Pick(names []string, tree []Proc) (int, bool) {
	cur := -1
	for i, p := range tree {
		if !IsHelper(p) && Matches(names, p) {
			cur = i
			break
		}
	}
	if cur < 0 {
		return -1, true
	}
	for IsLauncher(tree[cur]) && tree[cur].PID != 0 {
		next := -1
		for i, p := range tree {
			if i != cur && p.PPID == tree[cur].PID && !IsHelper(p) && Matches(names, p) {
				next = i // the last: a relaunched child comes after its predecessor
			}
		}
		if next < 0 {
			return cur, false
		}
		cur = next
		if IsLauncher(tree[cur]) {
			// A launcher started by a launcher is the agent relaunched
			// (Gemini CLI's child with more memory): what it starts in
			// turn are its tools.
			break
		}
	}
	return cur, true
}
