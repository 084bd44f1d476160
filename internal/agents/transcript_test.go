package agents

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestTranscriptPatterns(t *testing.T) {
	tests := []struct {
		name string
		kind string
		w    Where
		want []string
	}{
		{"claude", herd.AgentClaude, Where{Home: "/home/u", Cwd: "/home/u/my.app", SessionID: sid},
			[]string{"/home/u/.claude/projects/-home-u-my-app/" + sid + ".jsonl"}},
		{"claude hook path first", herd.AgentClaude, Where{Home: "/home/u", Cwd: "/w", SessionID: sid, HookPath: "/x/[a].jsonl"},
			[]string{`/x/\[a].jsonl`, "/home/u/.claude/projects/-w/" + sid + ".jsonl"}},
		{"claude config dir", herd.AgentClaude, Where{Home: "/home/u", Cwd: "/w", SessionID: sid, ConfigDir: "/cfg"},
			[]string{"/cfg/projects/-w/" + sid + ".jsonl"}},
		{"claude bad id", herd.AgentClaude, Where{Home: "/home/u", Cwd: "/w", SessionID: "../../etc"}, nil},
		{"codex", herd.AgentCodex, Where{Home: "/home/u", SessionID: "0199a213-81c0"},
			[]string{"/home/u/.codex/sessions/*/*/*/rollout-*-0199a213-81c0.jsonl"}},
		{"gemini (sha256 of \"/w\")", herd.AgentGemini, Where{Home: "/home/u", Cwd: "/w", SessionID: sid},
			[]string{"/home/u/.gemini/tmp/w/chats/session-*0f8fad5b*.json*", "/home/u/.gemini/tmp/d1bb8ca354673cd575d31d952490058c9943aef39d5a9553fb4a21ab7a59a19d/chats/session-*0f8fad5b*.json*"}},
		{"generic", herd.AgentGeneric, Where{Home: "/home/u", Cwd: "/w", SessionID: sid}, nil},
		{"relative hook path ignored", herd.AgentClaude, Where{HookPath: "x.jsonl"}, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, TranscriptPatterns(tc.kind, tc.w)); diff != "" {
			t.Errorf("[%s] (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestTranscriptPatternsGlob(t *testing.T) {
	home := t.TempDir()
	id := "0199a213-81c0-7800-8aa1-bbab2a035a53"
	f := filepath.Join(home, ".codex", "sessions", "2026", "11", "22", "rollout-2026-11-22T10-00-00-"+id+".jsonl")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pats := TranscriptPatterns(herd.AgentCodex, Where{Home: home, SessionID: id})
	m, err := filepath.Glob(pats[0])
	if err != nil || len(m) != 1 || m[0] != f {
		t.Errorf("expected [%s], got %v, %v", f, m, err)
	}
}
