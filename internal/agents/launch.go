package agents

import (
	"slices"
	"strings"

	"github.com/google/uuid"

	"herd"
)

// NewSessionID returns a fresh agent session id (a random UUID).
func NewSessionID() string { return uuid.NewString() }

// flagValue returns the value of flag (long form "--x" or short "-x") at
// argv[i]: "--x v", "--x=v" or "-x v". n is how many words it takes (0
// when argv[i] is not that flag).
func flagValue(argv []string, i int, names ...string) (val string, n int) {
	a := argv[i]
	for _, f := range names {
		if a == f {
			if i+1 < len(argv) {
				return argv[i+1], 2
			}
			return "", 1
		}
		if strings.HasPrefix(f, "--") {
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v, 1
			}
		}
	}
	return "", 0
}

// LaunchArgv returns the command that starts a new session of kind, and
// the agent session id herd chose for it ("" when none). A Claude command
// gets `--session-id <id>` (id from newID, NewSessionID when nil) right
// after the word naming the agent, so a crash before the first hook is
// still resumable; a command that already names a session (--session-id,
// --resume, --continue) keeps it and its id is returned when it is valid.
// Other kinds and wrapped commands are returned unchanged.
func LaunchArgv(kind string, argv []string, resolved string, newID func() string) ([]string, string) {
	out := slices.Clone(argv)
	if kind != herd.AgentClaude {
		return out, ""
	}
	at, k := agentIndex(argv, resolved)
	if at < 0 || k != herd.AgentClaude {
		return out, ""
	}
	for i := at + 1; i < len(argv); i++ {
		if argv[i] == "--" {
			break
		}
		if v, n := flagValue(argv, i, "--session-id"); n > 0 {
			if ValidSessionID(v) {
				return out, v
			}
			return out, ""
		}
		if _, n := flagValue(argv, i, "--resume", "-r"); n > 0 {
			return out, ""
		}
		if argv[i] == "--continue" || argv[i] == "-c" {
			return out, ""
		}
	}
	if newID == nil {
		newID = NewSessionID
	}
	id := newID()
	if !ValidSessionID(id) {
		return out, ""
	}
	return slices.Insert(out, at+1, "--session-id", id), id
}

// IDInUse reports whether Claude's output says the id given with
// --session-id is taken; the caller then relaunches with ResumeCommand.
func IDInUse(output string) bool {
	return strings.Contains(output, "is already in use")
}

// claudeSessionFlags are Claude flags that pick a conversation; resume
// drops them (with their value when they take one) for its own.
var claudeSessionFlags = []struct {
	names []string
	value bool
}{
	{[]string{"--resume", "-r"}, true},
	{[]string{"--session-id"}, true},
	{[]string{"--continue", "-c"}, false},
	{[]string{"--fork-session"}, false},
}

// codexValueFlags are Codex options that take a value (so the word after
// them is no prompt).
var codexValueFlags = []string{
	"-c", "--config", "-m", "--model", "-p", "--profile", "-s", "--sandbox",
	"-a", "--ask-for-approval", "-C", "--cd", "-i", "--image", "--add-dir",
	"--local-provider", "--output-schema", "--color", "-o", "--output-last-message",
	"--enable", "--disable",
}

// geminiPromptFlags are Gemini options carrying a prompt; resume drops
// them so the old prompt is not sent again.
var geminiPromptFlags = []string{"-p", "--prompt", "-i", "--prompt-interactive"}

// ResumeCommand returns the command that continues conversation id of a
// session launched with argv, keeping the role's flags:
//
//	claude [flags] -> claude --resume <id> [flags without a session choice]
//	codex [flags] [prompt] -> codex resume <id> [flags]
//	codex exec [flags] [prompt] -> codex exec resume <id> [flags]
//	gemini [flags] -> gemini -r <id> [flags without a prompt]
//
// ok is false, and argv is returned unchanged, when id is not a valid
// session id (it could read as a flag), the kind cannot resume, or argv
// does not run the agent itself (a wrapper script).
func ResumeCommand(kind string, argv []string, resolved, id string) (out []string, ok bool) {
	out = slices.Clone(argv)
	if !ValidSessionID(id) {
		return out, false
	}
	at, k := agentIndex(argv, resolved)
	if at < 0 || k != kind {
		return out, false
	}
	head := slices.Clone(argv[:at+1])
	rest := argv[at+1:]
	switch kind {
	case herd.AgentClaude:
		kept := dropFlags(rest, func(a []string, i int) int {
			for _, f := range claudeSessionFlags {
				if f.value {
					if _, n := flagValue(a, i, f.names...); n > 0 {
						return n
					}
				} else if slices.Contains(f.names, a[i]) {
					return 1
				}
			}
			return 0
		})
		return append(append(head, "--resume", id), kept...), true
	case herd.AgentCodex:
		return codexResume(head, rest, id), true
	case herd.AgentGemini:
		kept := dropFlags(rest, func(a []string, i int) int {
			if _, n := flagValue(a, i, "--resume", "-r"); n > 0 {
				return n
			}
			if _, n := flagValue(a, i, geminiPromptFlags...); n > 0 {
				return n
			}
			return 0
		})
		return append(append(head, "-r", id), kept...), true
	}
	return out, false
}

// dropFlags returns argv without the words drop claims (drop returns how
// many words at i to drop, 0 to keep argv[i]); everything after "--" is
// kept.
func dropFlags(argv []string, drop func([]string, int) int) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		if argv[i] == "--" {
			return append(out, argv[i:]...)
		}
		if n := drop(argv, i); n > 0 {
			i += n - 1
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

// codexResume builds a Codex resume command. `resume` is a subcommand
// (of codex, or of `codex exec`): the options follow it, and positional
// words (the first prompt) are dropped so it is not sent again; an older
// `resume <id>` or `--last` is replaced.
func codexResume(head, rest []string, id string) []string {
	sub := []string{"resume", id}
	var flags []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			i = len(rest) // the prompt follows
		case a == "exec" || a == "e":
			if sub[0] == "resume" {
				sub = []string{a, "resume", id}
			}
		case a == "resume":
			if i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "-") {
				i++ // the older id
			}
		case a == "--last":
		case slices.Contains(codexValueFlags, a):
			flags = append(flags, a)
			if i+1 < len(rest) {
				flags = append(flags, rest[i+1])
				i++
			}
		case strings.HasPrefix(a, "-"):
			flags = append(flags, a)
		default:
			// a positional word: the prompt of the first run
		}
	}
	return append(append(head, sub...), flags...)
}
