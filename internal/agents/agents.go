// Package agents holds everything herd knows per agent kind (Claude Code,
// Codex, Gemini CLI, generic): process names, launch and resume argv, hook,
// stream and transcript parsing, screen classification and MCP wiring. The
// watchdog, the prober, conversation, slots, execoutput, `herd hook` and
// hookinstall call it. It decides from what it is given: it must never read
// an agent's files, run a process or import another internal package.
package agents

import (
	"regexp"

	"herd"
)

// Kinds lists the agent kinds herd knows, generic last.
func Kinds() []string {
	return []string{herd.AgentClaude, herd.AgentCodex, herd.AgentGemini, herd.AgentGeneric}
}

// Known reports whether kind is one of Kinds.
func Known(kind string) bool {
	switch kind {
	case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini, herd.AgentGeneric:
		return true
	}
	return false
}

// ProcessName is the name (comm, argv[0] basename or exe basename, with
// ".exe" stripped) of kind's own process, or "" for generic.
func ProcessName(kind string) string {
	switch kind {
	case herd.AgentClaude, herd.AgentCodex, herd.AgentGemini:
		return kind
	}
	return ""
}

// Reasons herd gives with an activity it derives.
const (
	// ReasonStartupPrompt: a trust, onboarding, API-key or login dialog
	// waits for a person before the agent can start.
	ReasonStartupPrompt = "startup_prompt"
	// ReasonRateLimited: the turn ended on a rate or usage limit.
	ReasonRateLimited = "rate_limited"
	// ReasonPermission: the agent asks for permission to use a tool.
	ReasonPermission = "permission"
	// ReasonAPIError: the turn ended on an API error other than a limit.
	ReasonAPIError = "api_error"
)

// sessionIDRE is what an agent's own session id may look like. It ends up
// as an argument of the resume command, so it must never start with '-'
// nor hold anything a program could read as syntax.
var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidSessionID reports whether id may be kept as an agent's own session
// id: 1 to 128 characters of [A-Za-z0-9._:-], starting with a letter or a
// digit. Claude and Gemini UUIDs and Codex thread ids qualify.
func ValidSessionID(id string) bool { return sessionIDRE.MatchString(id) }
