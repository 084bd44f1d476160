// Package mcplaunch gives the launch of a role with mcp = true herd's MCP
// server: the agent's flags or settings, and its configuration file under
// the state dir. The slots call it for every such launch. It never writes
// into the user's repository, and never overrides settings the role's own
// env names.
package mcplaunch

import (
	"fmt"
	"os"
	"path/filepath"

	"herd"
	"herd/internal/agents"
	"herd/internal/runtime"
)

// With gives the launch of a role with mcp = true herd's MCP server:
// the agent's flags or settings (agents.WithMCP), its configuration
// written to <state-dir>/mcp/<session>.json, never into the user's
// repository. command runs herd's MCP server; socket is the daemon's. An
// agent herd cannot configure launches without it, and the spawned event
// says so (data mcp).
func With(command []string, socket string, role herd.Role, name string, spec *runtime.Spec, data map[string]any) error {
	if len(command) == 0 {
		data["mcp"] = "no herd binary known"
		return nil
	}
	dir := filepath.Join(filepath.Dir(socket), "mcp")
	srv := agents.MCPServer{Command: command[0], Args: command[1:],
		Env: map[string]string{herd.EnvSession: name, herd.EnvSocket: socket}}
	l := agents.WithMCP(role.Agent, spec.Argv, agents.Resolve(spec.Argv[0], spec.Workdir), srv, filepath.Join(dir, name+".json"))
	if !l.Supported {
		data["mcp"] = "not supported for agent " + role.Agent
		return nil
	}
	for k := range l.Env {
		if _, ok := role.Env[k]; ok {
			// The role's own settings file wins: herd's server is left out.
			data["mcp"] = "left out: the role's env sets " + k
			return nil
		}
	}
	if l.File != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("mcp config: %w", err)
		}
		if err := os.WriteFile(l.File, l.Content, 0o600); err != nil {
			return fmt.Errorf("mcp config: %w", err)
		}
	}
	spec.Argv = l.Argv
	for k, v := range l.Env {
		spec.Env[k] = v
	}
	data["mcp"] = "herd"
	return nil
}
