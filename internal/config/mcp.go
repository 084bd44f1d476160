package config

import (
	"fmt"
	"slices"
	"strings"

	"herd"
)

// MCPVerbs are the tools of herd's MCP server that start or stop agents:
// each is refused unless [mcp] verbs lists it.
var MCPVerbs = []string{"run", "scale", "stop", "restart", "resume"}

// MCP is the [mcp] table: what herd's MCP server may touch.
type MCP struct {
	// Roles bounds the sessions the server's tools see and act on; empty
	// is every role.
	Roles []string
	// Verbs lists the tools that start or stop agents (MCPVerbs) the
	// server may call; empty is none of them.
	Verbs []string
}

type fileMCP struct {
	Roles any `toml:"roles"`
	Verbs any `toml:"verbs"`
}

// mcp overlays the [mcp] keys of f on c.MCP.
func (b *builder) mcp(c *Config, f fileMCP) {
	if f.Roles != nil {
		roles, p := stringsOf(f.Roles, "roles")
		if p != nil {
			b.report("", "mcp.", *p)
		} else {
			for _, r := range roles {
				if r == "" {
					b.fail("mcp.roles", "a role name must not be empty")
				}
			}
			c.MCP.Roles = roles
		}
	}
	if f.Verbs != nil {
		verbs, p := stringsOf(f.Verbs, "verbs")
		if p != nil {
			b.report("", "mcp.", *p)
			return
		}
		for _, v := range verbs {
			if !slices.Contains(MCPVerbs, v) {
				b.fail("mcp.verbs", "%q is not a verb of herd's MCP server (want %s)", v, strings.Join(MCPVerbs, ", "))
			}
		}
		c.MCP.Verbs = verbs
	}
}

// roleControl decodes a role's manages and mcp keys into r.
func roleControl(r *herd.Role, f fileRole, report func(problem)) {
	set(&r.MCP, f.MCP)
	if f.Manages == nil {
		return
	}
	manages, p := stringsOf(f.Manages, "manages")
	if p != nil {
		report(*p)
		return
	}
	for _, m := range manages {
		if m == "" {
			report(problem{[]string{"manages"}, fmt.Sprintf("a role name must not be empty, got %q", manages)})
			return
		}
	}
	if len(manages) > 0 {
		r.Manages = manages
	}
}
