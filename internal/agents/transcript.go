package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"regexp"
	"strings"

	"herd"
)

// Where is what locates an agent's transcript.
type Where struct {
	Home      string // the agent's $HOME
	Cwd       string // the agent's working directory (absolute)
	SessionID string // the agent's own session id
	// HookPath is the transcript_path a hook reported: used first.
	HookPath string
	// ConfigDir is $CLAUDE_CONFIG_DIR (Claude), $CODEX_HOME (Codex) or
	// $GEMINI_CLI_HOME's .gemini (Gemini) when the agent's environment
	// sets it; "" for the default under Home.
	ConfigDir string
}

// nonAlnumRE is what Claude replaces with '-' to name a project directory.
var nonAlnumRE = regexp.MustCompile(`[^A-Za-z0-9]`)

// ClaudeProjectDir is the directory under ~/.claude/projects holding the
// transcripts of sessions run in cwd: every character but ASCII letters
// and digits replaced with '-' ("/home/u/app" -> "-home-u-app").
func ClaudeProjectDir(cwd string) string { return nonAlnumRE.ReplaceAllString(cwd, "-") }

// TranscriptPatterns returns where kind keeps the transcript of a
// session, best first, as filepath.Glob patterns (literal parts escaped):
//
//	claude: the hook's transcript_path; ~/.claude/projects/<cwd mangled>/<id>.jsonl
//	codex:  ~/.codex/sessions/YYYY/MM/DD/rollout-*-<id>.jsonl
//	gemini: ~/.gemini/tmp/<cwd base name or sha256 of cwd>/chats/session-*<id prefix>*.json*
//
// A pattern needing a piece that w lacks is left out; generic has none.
// A session id that could escape its directory is never used.
func TranscriptPatterns(kind string, w Where) []string {
	var out []string
	if w.HookPath != "" && filepath.IsAbs(w.HookPath) {
		out = append(out, globEscape(filepath.Clean(w.HookPath)))
	}
	id := w.SessionID
	if id != "" && (!ValidSessionID(id) || strings.Contains(id, "..")) {
		id = ""
	}
	base := func(def string) string {
		if w.ConfigDir != "" {
			return w.ConfigDir
		}
		if w.Home == "" {
			return ""
		}
		return filepath.Join(w.Home, def)
	}
	switch kind {
	case herd.AgentClaude:
		if b := base(".claude"); b != "" && w.Cwd != "" && id != "" {
			out = append(out, globEscape(filepath.Join(b, "projects", ClaudeProjectDir(w.Cwd), id+".jsonl")))
		}
	case herd.AgentCodex:
		if b := base(".codex"); b != "" && id != "" {
			out = append(out, filepath.Join(globEscape(filepath.Join(b, "sessions")), "*", "*", "*", "rollout-*-"+globEscape(id)+".jsonl"))
		}
	case herd.AgentGemini:
		if b := base(".gemini"); b != "" && w.Cwd != "" && id != "" {
			prefix := id
			if len(prefix) > 8 {
				prefix = prefix[:8]
			}
			file := "session-*" + globEscape(prefix) + "*.json*"
			// 0.61 names the project directory after the working
			// directory's base name (.jsonl chats); older versions after
			// the SHA-256 of its path (.json chats).
			sum := sha256.Sum256([]byte(w.Cwd))
			for _, p := range []string{filepath.Base(w.Cwd), hex.EncodeToString(sum[:])} {
				out = append(out, filepath.Join(globEscape(filepath.Join(b, "tmp", p, "chats")), file))
			}
		}
	default:
		return nil
	}
	return out
}

// globEscape escapes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
