package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMCPKeys(t *testing.T) {
	cfg, err := Parse([]byte(`
[mcp]
roles = ["worker", "lead"]
verbs = ["stop", "restart"]

[[role]]
name = "lead"
command = ["sh"]
manages = ["worker"]
mcp = true
`), "herd.toml", "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(MCP{Roles: []string{"worker", "lead"}, Verbs: []string{"stop", "restart"}}, cfg.MCP); d != "" {
		t.Errorf("[mcp] (-expected +got):\n%s", d)
	}
	if r := cfg.Roles[0]; !r.MCP || !cmp.Equal(r.Manages, []string{"worker"}) {
		t.Errorf("[role] expected mcp and manages, got %+v", r)
	}
	for _, tc := range []struct{ doc, want string }{
		{"[mcp]\nverbs = [\"delete\"]\n", `herd.toml:2: mcp.verbs: "delete" is not a verb`},
		{"[mcp]\nroles = \"worker\"\n", "herd.toml:2: mcp.roles"},
		{"[[role]]\nname = \"x\"\ncommand = [\"sh\"]\nmanages = \"w\"\n", "herd.toml:4"},
	} {
		_, err := Parse([]byte(tc.doc), "herd.toml", "/tmp")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("[%q] expected an error with %q, got %v", tc.doc, tc.want, err)
		}
	}
}

func TestMCPReloadsLive(t *testing.T) {
	a, b := Default(), Default()
	b.MCP.Verbs = []string{"stop"}
	ch := Changed(a, b)
	if len(ch) != 1 || ch[0].Name != "mcp" || !ch[0].Live {
		t.Errorf("expected [mcp] changed and applied live, got %+v", ch)
	}
}
