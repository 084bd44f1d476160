package agents

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"herd"
)

// EnvGeminiSystemSettings names the settings file Gemini CLI reads as its
// system settings: herd's MCP server reaches a Gemini agent through it.
const EnvGeminiSystemSettings = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"

// MCPServer is how an agent starts herd's MCP server.
type MCPServer struct {
	Command string            // herd's binary
	Args    []string          // ["mcp"]
	Env     map[string]string // HERD_SESSION, HERD_SOCKET
}

// MCPLaunch is what gives an agent of kind herd's MCP server: the argv,
// extra environment, and the file to write first (File, with Content),
// all outside the user's repository.
type MCPLaunch struct {
	Argv    []string
	Env     map[string]string
	File    string
	Content []byte
	// Supported is false for an agent herd cannot give MCP servers to
	// (generic, or a wrapped command): argv is then unchanged.
	Supported bool
}

// WithMCP adds herd's MCP server to a launch of kind's argv (resolved:
// the path argv[0] resolves to), its configuration in file (a path in
// herd's state dir): Claude Code gets --mcp-config FILE right after the
// word naming the agent, Codex -c mcp_servers.herd.* overrides, Gemini
// CLI its system settings file (EnvGeminiSystemSettings). An argv that
// already carries it (a resume of a launch that had it) is kept.
func WithMCP(kind string, argv []string, resolved string, srv MCPServer, file string) MCPLaunch {
	out := MCPLaunch{Argv: slices.Clone(argv)}
	at, k := agentIndex(argv, resolved)
	if at < 0 || k != kind {
		return out
	}
	entry := map[string]any{"command": srv.Command, "args": srv.Args, "env": srv.Env}
	servers, _ := json.MarshalIndent(map[string]any{"mcpServers": map[string]any{"herd": entry}}, "", "  ")
	switch kind {
	case herd.AgentClaude:
		out.Supported, out.File, out.Content = true, file, servers
		if !slices.Contains(argv, "--mcp-config") {
			out.Argv = slices.Insert(out.Argv, at+1, "--mcp-config", file)
		}
	case herd.AgentCodex:
		out.Supported = true
		if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "mcp_servers.herd.") }) {
			return out
		}
		env := make([]string, 0, len(srv.Env))
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range srv.Env {
				if !yield(k) {
					return
				}
			}
		}) {
			env = append(env, k+"="+strconv.Quote(srv.Env[k]))
		}
		args := make([]string, len(srv.Args))
		for i, a := range srv.Args {
			args[i] = strconv.Quote(a)
		}
		out.Argv = slices.Insert(out.Argv, at+1,
			"-c", "mcp_servers.herd.command="+strconv.Quote(srv.Command),
			"-c", "mcp_servers.herd.args=["+strings.Join(args, ", ")+"]",
			"-c", "mcp_servers.herd.env={"+strings.Join(env, ", ")+"}")
	case herd.AgentGemini:
		out.Supported, out.File, out.Content = true, file, servers
		out.Env = map[string]string{EnvGeminiSystemSettings: file}
	}
	return out
}
