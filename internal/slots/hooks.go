package slots

import (
	"os"
	"path/filepath"

	"herd/internal/agents"
	"herd/internal/hookinstall"
)

// withHooks gives the launch of a known agent herd's hooks for this
// incarnation, with no setup and nothing written into the user's
// repository (hookinstall.ForLaunch): Claude a settings file under
// <state-dir>/hooks/ (one per session, rewritten at each launch), Codex
// flags, Gemini herd's entries in the user's Gemini settings. The hooks run herd through a link
// under the state dir that outlives herd upgrades. Hooks that cannot be
// given leave the launch as it was; the spawned event says why (data
// hooks).
func (s *Slots) withHooks(l *slotLaunch) {
	if len(s.o.MCPCommand) == 0 || len(l.spec.Argv) == 0 {
		l.data["hooks"] = "no herd binary known"
		return
	}
	stateDir := filepath.Dir(s.o.Socket)
	bin, err := hookinstall.StableBinary(stateDir, s.o.MCPCommand[0])
	if err != nil {
		s.o.Log.Warn("launch: hooks left out", "session", l.req.Name, "err", err)
		l.data["hooks"] = "left out: " + err.Error()
		return
	}
	getenv := func(k string) string {
		if v, ok := l.spec.Env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	h := hookinstall.ForLaunch(hookinstall.LaunchSpec{
		Kind: l.role.Agent, Argv: l.spec.Argv, Resolved: agents.Resolve(l.spec.Argv[0], l.spec.Workdir),
		Workdir: l.spec.Workdir, Getenv: getenv, Binary: bin,
		File: filepath.Join(stateDir, "hooks", l.req.Name+"."+l.role.Agent+".json"),
	})
	l.data["hooks"] = h.Note
	if len(h.Notes) > 0 {
		l.data["hooks_notes"] = h.Notes
	}
	if !h.Wired() {
		return
	}
	if err := h.Write(); err != nil {
		s.o.Log.Warn("launch: hooks left out", "session", l.req.Name, "err", err)
		l.data["hooks"] = "left out: " + err.Error()
		return
	}
	l.spec.Argv, l.argv, l.inc.Argv = h.Argv, h.Argv, h.Argv
	for k, v := range h.Env {
		l.spec.Env[k] = v
	}
}
