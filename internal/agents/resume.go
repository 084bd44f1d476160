package agents

import (
	"fmt"
	"slices"
	"strings"

	"herd"
)

// ProcessNames returns the names that pick the agent process out of the
// launched tree, and whether the launched process is a wrapper around it.
func ProcessNames(r herd.Role, argv []string) (names []string, wrapped bool) {
	base := ""
	if len(argv) > 0 {
		// claude.exe (what node_modules/.bin/claude links to) is claude.
		base = BaseName(argv[0])
	}
	want := r.AgentProcess
	if want == "" {
		switch r.Agent {
		case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
			want = r.Agent
		}
	}
	if want == "" || want == base || (r.AgentProcess == "" && Infer(argv, "") == want) {
		// The launched process is the agent: named so, or an
		// interpreter running the agent's script (node .../gemini).
		return nil, false
	}
	return []string{want}, true
}

// ResumeArgv is the command that continues a stopped agent's conversation,
// keeping the role's flags (see ResumeCommand): `claude --resume <id> ...`,
// `codex [exec] resume <id> ...`, `gemini -r <id> ...`; the original
// command for anything else, for a wrapper, or when no valid id is known.
func ResumeArgv(snap herd.Snapshot) []string {
	argv := slices.Clone(snap.Argv)
	if snap.AgentSessionID == "" || len(argv) == 0 {
		return argv
	}
	out, ok := ResumeCommand(snap.Agent, argv, "", snap.AgentSessionID)
	if !ok {
		return argv
	}
	return out
}

// ResumesID reports whether argv continues conversation id: `claude
// --resume <id>`, `codex [exec] resume <id>`, `gemini -r <id>` (flags
// around it whatever they are).
func ResumesID(kind string, argv []string, id string) bool {
	if id == "" {
		return false
	}
	for i := range argv {
		switch kind {
		case herd.AgentClaude, herd.AgentGemini:
			if v, n := flagValue(argv, i, "--resume", "-r"); n > 0 && v == id {
				return true
			}
		case herd.AgentCodex:
			if argv[i] == "resume" && i+1 < len(argv) && argv[i+1] == id {
				return true
			}
		}
	}
	return false
}

// geminiExitInput is Gemini CLI's exit code for a fatal input error
// (FatalInputError), which is how it refuses `-r <id>` for a conversation
// it does not find (0.61.0).
const geminiExitInput = 42

// resumeRefusals are what each agent prints when it cannot continue the
// conversation it was asked to resume (from the installed CLIs' sources
// and binaries): Gemini CLI 0.61.0 (exit 42: "Error resuming session:
// No previous sessions found for this project." when it has none left,
// checked), Claude Code 2.1, Codex 0.171.0.
var resumeRefusals = map[string][]string{
	herd.AgentGemini: {"Invalid session identifier", "No previous sessions found for this project"},
	herd.AgentClaude: {"No conversation found with session ID", "is already in use"},
	herd.AgentCodex:  {"No saved session found with ID", "Session not found:", "no rollout found for"},
}

// ResumeRefused reports whether an agent of kind launched to resume a
// conversation refused it: it exited with a failure code, or with a code
// not known, and said so in output (the end of its pane or output), or,
// for Gemini CLI, exited with its input-error code. A signal is a crash,
// and a clean exit an end, never a refusal. why is
// the evidence, for the event log.
func ResumeRefused(kind string, exit herd.Exit, output string) (why string, ok bool) {
	if exit.Signal != nil || (exit.Code != nil && *exit.Code == 0) {
		return "", false
	}
	msg, said := RefusalSaid(kind, output)
	if exit.Code == nil {
		// The exit is not known (yet): the kernel's report of an agent
		// that is not the daemon's child can come after its death is
		// accounted. Its own words are enough; waiting for a code that
		// may never come would resume the dead id once more.
		if said {
			return fmt.Sprintf("exit code unknown, %q", msg), true
		}
		return "", false
	}
	if said {
		return fmt.Sprintf("exit code %d, %q", *exit.Code, msg), true
	}
	if kind == herd.AgentGemini && *exit.Code == geminiExitInput {
		return fmt.Sprintf("exit code %d (Gemini CLI's input error)", *exit.Code), true
	}
	return "", false
}

// RefusalSaid reports whether output shows kind's words for refusing to
// resume a conversation, and which.
func RefusalSaid(kind, output string) (msg string, ok bool) {
	for _, m := range resumeRefusals[kind] {
		if strings.Contains(output, m) {
			return m, true
		}
	}
	return "", false
}
