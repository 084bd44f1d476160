// Package accounts names the agent account a role's sessions use (role key
// account) and holds what a rate limit on an account means for the rest of
// it: the launches that wait for its reset and the turns in which its
// blocked sessions are continued. The auto-continuer records the holds and
// slots asks them before a launch; the package decides, it writes nothing.
package accounts

import (
	"path/filepath"
	"strings"

	"herd"
)

// Default is the account of a role that names none and whose agent keeps
// its configuration where it does by default.
const Default = "default"

// configDirEnv names, per agent kind, the variable that moves its
// configuration (its login, so its account) away from $HOME, and the
// directory under $HOME it is otherwise.
var configDirEnv = map[string]struct{ env, home string }{
	herd.AgentClaude: {"CLAUDE_CONFIG_DIR", ".claude"},
	herd.AgentCodex:  {"CODEX_HOME", ".codex"},
	herd.AgentGemini: {"GEMINI_CLI_HOME", ".gemini"},
}

// Of returns the account of role r: its account key when set; else the
// configuration directory its environment gives its agent
// (CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, or a HOME of its own),
// where the agent keeps its login; else Default. A generic agent looks at
// each of the variables in turn.
func Of(r herd.Role) string {
	if a := strings.TrimSpace(r.Account); a != "" {
		return a
	}
	kinds := []string{r.Agent}
	if _, ok := configDirEnv[r.Agent]; !ok {
		kinds = []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini}
	}
	for _, k := range kinds {
		if dir := strings.TrimSpace(r.Env[configDirEnv[k].env]); dir != "" {
			return filepath.Clean(dir)
		}
	}
	if home := strings.TrimSpace(r.Env["HOME"]); home != "" {
		if c, ok := configDirEnv[r.Agent]; ok {
			return filepath.Join(filepath.Clean(home), c.home)
		}
		return filepath.Clean(home)
	}
	return Default
}

// Shares reports whether a rate limit met by a session of role a blocks
// the sessions of role b: the same account, and the same agent kind (a
// limit is the provider's: one account name given to a Claude and a Codex
// role does not make Codex wait for Anthropic's window).
func Shares(a, b herd.Role) bool {
	return Of(a) == Of(b) && a.Agent == b.Agent
}

// Resolver gives the account of a role by name, from the roles Roles
// looks up now: what the usage ledger rolls spend up by.
type Resolver struct {
	Roles func(name string) (herd.Role, bool)
}

// AccountOf returns the account of the role named role; Default when the
// role is not known.
func (r Resolver) AccountOf(role string) string {
	if r.Roles == nil {
		return Default
	}
	if ro, ok := r.Roles(role); ok {
		return Of(ro)
	}
	return Default
}
