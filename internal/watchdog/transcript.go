package watchdog

import (
	"os"
	"path/filepath"
	"time"

	"herd"
	"herd/internal/agents"
)

// transcriptWatch is what the watchdog follows of one agent's transcript:
// the file growing is progress (a turn writes every message and tool
// result to it) even when nothing on screen moves.
type transcriptWatch struct {
	path     string    // the file found; "" until found
	size     int64     // its size at the last look
	mtime    time.Time // its modification time at the last look
	lookedAt time.Time // when the last search for it ran
}

// configDirEnv names, per agent kind, the variable that moves its
// configuration directory away from $HOME.
var configDirEnv = map[string]string{
	herd.AgentClaude: "CLAUDE_CONFIG_DIR",
	herd.AgentCodex:  "CODEX_HOME",
	herd.AgentGemini: "GEMINI_CLI_HOME",
}

// agentKinds sets the agent kind of the sessions met for the first time,
// from their roles.
func (w *Watchdog) agentKinds(items []watchItem, roles map[string]herd.Role) {
	for _, it := range items {
		it.m.mu.Lock()
		if it.m.kind == "" {
			k := roles[it.S.Role].Agent
			if !agents.Known(k) {
				k = herd.AgentGeneric // the role is gone, or names no agent herd reads
			}
			it.m.kind = k
		}
		it.m.mu.Unlock()
	}
}

// watchTranscripts looks, for each agent herd knows whose turn runs and
// that showed nothing else for a while, whether its transcript grew: one
// stat per such session per tick, and a search for the file at most once
// per quietCaptureEvery until it is found.
func (w *Watchdog) watchTranscripts(items []watchItem, now time.Time) {
	cfg := w.cfg()
	quiet := captureGap(cfg.Watchdog.StallAfter, cfg.Probe.Interval)
	searchEvery := quietCaptureEvery(cfg.Watchdog.StallAfter, cfg.Probe.Interval)
	for _, it := range items {
		m := it.m
		m.mu.Lock()
		kind, act := m.kind, m.activityLocked()
		hookPath, sid := m.hook.TranscriptPath, firstNonEmpty(m.hook.AgentSessionID, m.agentSessionID)
		tw := m.transcript
		silent := now.Sub(m.lastActivity) >= quiet
		m.mu.Unlock()
		if !screenKind(kind) || !agents.CanStall(act) || !silent {
			continue
		}
		if hookPath != "" && filepath.IsAbs(hookPath) && tw.path != filepath.Clean(hookPath) {
			tw = transcriptWatch{path: filepath.Clean(hookPath)}
		}
		if tw.path == "" {
			if now.Sub(tw.lookedAt) < searchEvery {
				continue
			}
			tw.lookedAt = now
			tw.path = w.findTranscript(kind, it.Inc, sid)
		}
		grew := false
		if tw.path != "" {
			fi, err := os.Stat(tw.path)
			switch {
			case err != nil:
				tw.path = "" // moved away: searched for again
			case tw.mtime.IsZero():
				tw.size, tw.mtime = fi.Size(), fi.ModTime()
			case fi.Size() != tw.size || fi.ModTime().After(tw.mtime):
				tw.size, tw.mtime = fi.Size(), fi.ModTime()
				grew = true
			}
		}
		m.mu.Lock()
		m.transcript = tw
		if grew {
			m.noteActivityLocked(now)
		}
		m.mu.Unlock()
	}
}

// findTranscript returns the transcript file of the agent's session, ""
// when there is none (yet). The agent's own environment says where its
// home and configuration directory are.
func (w *Watchdog) findTranscript(kind string, inc herd.Incarnation, sid string) string {
	if sid == "" {
		return ""
	}
	id := inc.AgentIdentity()
	where := agents.Where{Cwd: inc.Workdir, SessionID: sid}
	if env, err := w.o.Proc.Environ(id.PID); err == nil && w.o.Proc.Check(id, w.o.BootID) == herd.Alive {
		where.Home = env["HOME"]
		where.ConfigDir = env[configDirEnv[kind]]
		if kind == herd.AgentGemini && where.ConfigDir != "" {
			where.ConfigDir = filepath.Join(where.ConfigDir, ".gemini")
		}
	}
	if where.Home == "" {
		where.Home, _ = os.UserHomeDir()
	}
	for _, pat := range agents.TranscriptPatterns(kind, where) {
		if found, _ := filepath.Glob(pat); len(found) > 0 {
			return found[len(found)-1]
		}
	}
	return ""
}

// HookTranscript returns the transcript path the hooks of incarnation inc
// reported (transcript_path), "" when none did or inc is not watched;
// the usage ledger reads the file it names.
func (w *Watchdog) HookTranscript(inc string) string {
	m := w.lookup(inc)
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hook.TranscriptPath
}
