package main

import (
	"strings"
	"testing"

	"herd"
)

func TestCheckEventFilter(t *testing.T) {
	tests := []struct {
		name                 string
		session, kind, since string
		limit                int
		wantErr              string // "" = accepted
	}{
		{"no filter", "", "", "", 0, ""},
		{"all set", "worker-0", "crashed", "10m", 5, ""},
		{"stall warning", "", "stall_warning", "", 0, ""},
		{"zero since", "", "", "0s", 0, ""},
		{"negative since", "", "", "-5m", 0, "--since -5m is negative"},
		{"bad since", "", "", "soon", 0, `--since "soon"`},
		{"unknown kind", "", "bogus", "", 0, `--kind "bogus" is not an event kind (want one of spawned, adopted,`},
		{"kind case", "", "Crashed", "", 0, "not an event kind"},
		{"negative limit", "", "", "", -1, "--limit -1"},
		{"bad session", "x?y", "", "", 0, `"x?y" is not a session name`},
	}
	for _, tt := range tests {
		err := checkEventFilter(tt.session, tt.kind, tt.since, tt.limit)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("[%s] expected no error, got %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("[%s] expected error containing %q, got %v", tt.name, tt.wantErr, err)
		}
	}
}

// TestEventKindsComplete: every kind of PRODUCT.md (its list, then its
// additions, then herd's own) is accepted, once.
func TestEventKindsComplete(t *testing.T) {
	product := "spawned adopted exited crashed backoff restarted failed succeeded stalled stall_warning " +
		"unstalled killed reaped stopped resumed recovered escalated activity probe_unknown summary " +
		"notified rollout worktree leftover outdated mcp_call answered console"
	if got := strings.Join(herd.EventKinds, " "); got != product {
		t.Errorf("expected %q, got %q", product, got)
	}
}
