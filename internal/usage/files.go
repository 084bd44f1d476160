package usage

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"herd"
	"herd/internal/agents"
)

// files returns the files of t that exist: its captured stdout (exec),
// and its agent's transcript once found.
func (l *Ledger) files(t target) []file {
	var out []file
	if t.inc.RuntimeKind == herd.RuntimeExec && l.o.Stdout != nil {
		out = append(out, file{l.o.Stdout(t.inc.Session, t.inc.ID), Stream, SourceStream})
	}
	var format Format
	switch t.agent {
	case herd.AgentClaude:
		format = ClaudeTranscript
	case herd.AgentCodex:
		format = CodexRollout
	case herd.AgentGemini:
		format = GeminiChat
	default:
		return out
	}
	l.mu.Lock()
	path, ok := l.found[t.inc.ID]
	l.mu.Unlock()
	if hook := l.hookTranscript(t.inc.ID); hook != "" && hook != path {
		// The agent's own word, and the file it moved to (a new
		// conversation in the same process) as soon as it says so.
		path, ok = hook, true
		l.mu.Lock()
		l.found[t.inc.ID] = path
		l.mu.Unlock()
	}
	if !ok {
		if t.inc.AgentSessionID == "" {
			return out
		}
		path = l.findTranscript(t)
		if path == "" {
			return out
		}
		l.mu.Lock()
		l.found[t.inc.ID] = path
		l.mu.Unlock()
	}
	return append(out, file{path, format, SourceTranscript})
}

// hookTranscript returns the transcript path the hooks of incarnation
// inc reported, "" when none did or it is not one the ledger reads: a
// hook payload is the agent's input, so only an absolute path to a JSONL
// file is taken.
func (l *Ledger) hookTranscript(inc string) string {
	if l.o.HookTranscript == nil {
		return ""
	}
	p := l.o.HookTranscript(inc)
	if p == "" || !filepath.IsAbs(p) || !strings.HasSuffix(p, ".jsonl") {
		return ""
	}
	return filepath.Clean(p)
}

// findTranscript returns the path of t's transcript, "" until it exists.
func (l *Ledger) findTranscript(t target) string {
	env := configDirEnv[t.agent]
	where := agents.Where{Cwd: t.inc.Workdir, SessionID: t.inc.AgentSessionID, Home: l.o.Home, ConfigDir: t.env[env]}
	if h := t.env["HOME"]; h != "" {
		where.Home = h
	}
	if where.ConfigDir == "" {
		where.ConfigDir = os.Getenv(env)
	}
	if t.agent == herd.AgentGemini && where.ConfigDir != "" {
		where.ConfigDir = filepath.Join(where.ConfigDir, ".gemini") // GEMINI_CLI_HOME stands for $HOME
	}
	for _, pat := range agents.TranscriptPatterns(t.agent, where) {
		found, _ := filepath.Glob(pat)
		if t.agent == herd.AgentGemini {
			// Only 0.61's JSONL chats are read line by line; the pattern
			// also matches older whole-JSON chats, and the backups and
			// temporary files Gemini CLI leaves beside a chat it rewrote.
			found = slices.DeleteFunc(found, func(p string) bool { return !strings.HasSuffix(p, ".jsonl") })
		}
		if len(found) > 0 {
			return found[len(found)-1]
		}
	}
	return ""
}
