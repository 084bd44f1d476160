package agents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// WithSettingsFile points a Claude command at settings file (herd's hooks,
// merged over the user's own settings by Claude): `--settings FILE` right
// after the word naming the agent. A command that already passes
// --settings keeps its place and gets FILE instead; prior is the value it
// had ("" when none), for the caller to merge into FILE. ok is false, and
// argv is returned unchanged, when argv does not run Claude itself.
func WithSettingsFile(argv []string, resolved, file string) (out []string, prior string, ok bool) {
	out = slices.Clone(argv)
	at, k := agentIndex(argv, resolved)
	if at < 0 || k != herd.AgentClaude {
		return out, "", false
	}
	for i := at + 1; i < len(argv); i++ {
		if argv[i] == "--" {
			break
		}
		if v, n := flagValue(argv, i, "--settings"); n > 0 {
			switch {
			case n == 2:
				out[i+1] = file
			case strings.Contains(argv[i], "="):
				out[i] = "--settings=" + file
			default: // --settings as the last word
				out = append(out, file)
			}
			return out, v, true
		}
	}
	return slices.Insert(out, at+1, "--settings", file), "", true
}

// CodexHookTimeout is the timeout, in seconds, of each hook herd gives
// Codex: `herd hook` is done within about a second, and Codex waits for
// a hook before it goes on.
const CodexHookTimeout = 5

// CodexTimeout is the timeout herd declares for its Codex hook of event,
// as Codex normalises it (the trust hash covers it): Codex holds
// Interrupt and SessionEnd hooks to 1..3 s.
func CodexTimeout(event string) int {
	if event == HookInterrupt || event == HookSessionEnd {
		return 3
	}
	return CodexHookTimeout
}

// CodexHookHash is the hash Codex keeps in hooks.state.<key>.trusted_hash
// for a trusted hook: the SHA-256 of the compact, key-sorted JSON of the
// hook's normalised identity. A hook whose recorded hash differs is "new or
// changed" and waits for a person ("Hooks need review"). matcher "" is
// none.
func CodexHookHash(event, command string, timeout int, matcher string) string {
	type handler struct {
		Async   bool   `json:"async"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
		Type    string `json:"type"`
	}
	id := map[string]any{
		"event_name": codexEventLabel(event),
		"hooks":      []handler{{Async: false, Command: command, Timeout: timeout, Type: "command"}},
	}
	if matcher != "" {
		id["matcher"] = matcher
	}
	// Maps marshal with sorted keys; no HTML escaping, as Codex's serde.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(id) // strings, ints and bools: cannot fail
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// codexEventLabel is Codex's snake_case name of a hook event
// (PreToolUse -> pre_tool_use), used in trust keys.
func codexEventLabel(event string) string {
	var b strings.Builder
	for i, r := range event {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// codexTrustKey is the hooks.state key of the first handler of the first
// group of event given on Codex's command line.
func codexTrustKey(event string) string {
	return "/<session-flags>/config.toml:" + codexEventLabel(event) + ":0:0"
}

// CodexHookOverrides are the `-c` overrides that give one Codex launch
// herd's hooks for events (command returns an event's shell command) and,
// next to them, their trust (hooks.state with each hook's hash): Codex
// runs them without its "Hooks need review" dialog, and nothing is
// written into the user's config. notify, when not nil, becomes Codex's
// notify program. Events whose hooks argv already sets (-c
// hooks.EVENT=...) are the user's and are left out.
func CodexHookOverrides(argv []string, events []string, command func(event string) string, notify []string) []string {
	own := map[string]bool{}
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "-c" || argv[i] == "--config" {
			if k, _, ok := strings.Cut(argv[i+1], "="); ok && strings.HasPrefix(k, "hooks.") {
				own[strings.TrimSpace(strings.TrimPrefix(k, "hooks."))] = true
			}
		}
	}
	out := []string{"-c", "features.hooks=true"}
	var trust []string
	for _, ev := range events {
		if own[ev] {
			continue
		}
		cmd := command(ev)
		to := CodexTimeout(ev)
		out = append(out, "-c", fmt.Sprintf("hooks.%s=[{hooks=[{type=\"command\",command=%s,timeout=%d}]}]", ev, tomlString(cmd), to))
		trust = append(trust, fmt.Sprintf("%s={trusted_hash=%s}", tomlString(codexTrustKey(ev)), tomlString(CodexHookHash(ev, cmd, to, ""))))
	}
	if len(trust) > 0 {
		out = append(out, "-c", "hooks.state={"+strings.Join(trust, ", ")+"}")
	}
	if notify != nil {
		words := make([]string, len(notify))
		for i, w := range notify {
			words[i] = tomlString(w)
		}
		out = append(out, "-c", "notify=["+strings.Join(words, ", ")+"]")
	}
	return out
}

// IsHerdCodexOverride reports whether the value of a `-c` option is one
// CodexHookOverrides makes with herd's hook command (a relaunch drops them
// before adding the current ones).
func IsHerdCodexOverride(v string) bool {
	switch {
	case v == "features.hooks=true":
		return true
	case strings.HasPrefix(v, "hooks.state={") && strings.Contains(v, "/<session-flags>/config.toml:"):
		return true
	case strings.HasPrefix(v, "hooks.") || strings.HasPrefix(v, "notify=["):
		return strings.Contains(v, " hook --agent codex ") || strings.Contains(v, `"hook", "--agent", "codex", "notify"`)
	}
	return false
}

// InsertAfterAgent returns argv with words inserted right after the word
// naming the agent of kind; ok is false (argv unchanged) when argv does not
// run that agent itself.
func InsertAfterAgent(kind string, argv []string, resolved string, words ...string) ([]string, bool) {
	at, k := agentIndex(argv, resolved)
	if at < 0 || k != kind {
		return slices.Clone(argv), false
	}
	return slices.Insert(slices.Clone(argv), at+1, words...), true
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
