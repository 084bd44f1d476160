package agents

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithMCP(t *testing.T) {
	srv := MCPServer{Command: "/usr/bin/herd", Args: []string{"mcp"}, Env: map[string]string{"HERD_SESSION": "w-0", "HERD_SOCKET": "/s/herd.sock"}}
	const file = "/state/mcp/w-0.json"
	cases := []struct {
		name, kind string
		argv, want []string
		env        map[string]string
		supported  bool
	}{
		{name: "claude", kind: "claude", argv: []string{"claude", "--model", "opus"},
			want: []string{"claude", "--mcp-config", file, "--model", "opus"}, supported: true},
		{name: "claude resumed keeps its flag", kind: "claude", argv: []string{"claude", "--mcp-config", file, "--resume", "x"},
			want: []string{"claude", "--mcp-config", file, "--resume", "x"}, supported: true},
		{name: "claude under node", kind: "claude", argv: []string{"node", "/x/node_modules/.bin/claude"},
			want: []string{"node", "/x/node_modules/.bin/claude", "--mcp-config", file}, supported: true},
		{name: "codex", kind: "codex", argv: []string{"codex"},
			want: []string{"codex", "-c", `mcp_servers.herd.command="/usr/bin/herd"`, "-c", `mcp_servers.herd.args=["mcp"]`,
				"-c", `mcp_servers.herd.env={HERD_SESSION="w-0", HERD_SOCKET="/s/herd.sock"}`}, supported: true},
		{name: "gemini", kind: "gemini", argv: []string{"gemini", "-y"}, want: []string{"gemini", "-y"},
			env: map[string]string{EnvGeminiSystemSettings: file}, supported: true},
		{name: "generic", kind: "generic", argv: []string{"aider"}, want: []string{"aider"}},
		{name: "wrapped", kind: "claude", argv: []string{"sh", "-c", "claude"}, want: []string{"sh", "-c", "claude"}},
	}
	for _, tc := range cases {
		got := WithMCP(tc.kind, tc.argv, "", srv, file)
		if d := cmp.Diff(tc.want, got.Argv); d != "" {
			t.Errorf("[%s] argv (-expected +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.env, got.Env); d != "" {
			t.Errorf("[%s] env (-expected +got):\n%s", tc.name, d)
		}
		if got.Supported != tc.supported {
			t.Errorf("[%s] expected supported %v, got %v", tc.name, tc.supported, got.Supported)
		}
		if got.File != "" {
			var cfg struct {
				MCPServers map[string]MCPServer `json:"mcpServers"`
			}
			if err := json.Unmarshal(got.Content, &cfg); err != nil || cfg.MCPServers["herd"].Command != "/usr/bin/herd" {
				t.Errorf("[%s] expected an mcpServers.herd entry, got %s %v", tc.name, got.Content, err)
			}
		}
	}
}
