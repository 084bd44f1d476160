package usage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// gemMsg is a Gemini CLI 0.61 chat line: a "gemini" message id of model
// with tokens (input includes cached), or without when in < 0.
func gemMsg(id, model string, in, cached, out int) string {
	tok := ""
	if in >= 0 {
		tok = fmt.Sprintf(`,"tokens":{"input":%d,"output":%d,"cached":%d,"thoughts":0,"tool":0,"total":%d}`, in, out, cached, in+out)
	}
	return fmt.Sprintf(`{"id":%q,"timestamp":"2026-11-26T19:00:00.000Z","type":"gemini","content":"OK","thoughts":[]%s,"model":%q}`, id, tok, model)
}

const (
	gemMeta = `{"sessionId":"5f0c3d9e-1111-4222-8333-944455556666","projectHash":"abc","startTime":"2026-11-26T19:00:00.000Z","lastUpdated":"2026-11-26T19:00:00.000Z","kind":"main"}`
	gemUser = `{"id":"u1","timestamp":"2026-11-26T19:00:00.000Z","type":"user","content":[{"text":"say hello"}]}`
	gemSet  = `{"$set":{"lastUpdated":"2026-11-26T19:00:01.000Z"}}`
)

func TestGeminiChat(t *testing.T) {
	flash := "gemini-2.5-flash"
	for _, tc := range []struct {
		name  string
		lines []string
		want  map[string]Tokens
	}{
		{"metadata, user and $set lines add nothing", []string{gemMeta, gemUser, gemSet}, map[string]Tokens{}},
		{"one message", []string{gemMeta, gemUser, gemMsg("g1", flash, 2345, 2048, 67)}, map[string]Tokens{flash: {297, 67, 2048, 0}}},
		{"a message written before its tokens counts when they come",
			[]string{gemMsg("g1", flash, -1, 0, 0), gemSet, gemMsg("g1", flash, 100, 0, 5)}, map[string]Tokens{flash: {100, 5, 0, 0}}},
		{"a message written again (a tool call added) counts once",
			[]string{gemMsg("g1", flash, 100, 0, 5), gemMsg("g1", flash, 100, 0, 5), gemSet, gemMsg("g1", flash, 100, 0, 5)}, map[string]Tokens{flash: {100, 5, 0, 0}}},
		{"two messages, two models", []string{gemMsg("g1", flash, 100, 40, 5), gemUser, gemMsg("g2", "gemini-2.5-pro", 10, 0, 1)},
			map[string]Tokens{flash: {60, 5, 40, 0}, "gemini-2.5-pro": {10, 1, 0, 0}}},
		{"a message with no model takes the file's", []string{gemMsg("g1", "", 10, 0, 1)}, map[string]Tokens{UnknownModel: {10, 1, 0, 0}}},
		{"a user line with tokens is not usage", []string{`{"id":"u2","type":"user","tokens":{"input":9,"output":9}}`}, map[string]Tokens{}},
		{"cached above input is no negative input", []string{gemMsg("g1", flash, 10, 20, 1)}, map[string]Tokens{flash: {0, 1, 20, 0}}},
	} {
		got, _ := parseAll(t, GeminiChat, &State{}, tc.lines...)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("[%s] (-expected +got):\n%s", tc.name, d)
		}
	}
}

func TestGeminiChatIDsBounded(t *testing.T) {
	st := &State{}
	for i := range maxGeminiIDs + 10 {
		parseAll(t, GeminiChat, st, gemMsg(fmt.Sprint("g", i), "m", 1, 0, 1))
	}
	if len(st.Messages) != maxGeminiIDs || st.Messages[0] != "g10" {
		t.Errorf("expected the newest %d ids kept from g10, got %d from %s", maxGeminiIDs, len(st.Messages), st.Messages[0])
	}
}

// TestCapturedGeminiChat reads a chat file the real Gemini CLI 0.61.0
// wrote in tmux against the mock API (two turns; every response carried
// 2345 prompt tokens of which 2048 cached, and 67 output tokens).
func TestCapturedGeminiChat(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "gemini-0.61.0-chat.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	got, _ := parseAll(t, GeminiChat, &State{}, lines...)
	want := map[string]Tokens{"gemini-2.5-flash": {2 * (2345 - 2048), 2 * 67, 2 * 2048, 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-expected +got):\n%s", d)
	}
	// Read one line at a time again from the start with the same state
	// (the file rewritten whole): nothing more.
	st := &State{}
	parseAll(t, GeminiChat, st, lines...)
	if again, _ := parseAll(t, GeminiChat, st, lines...); len(again) != 0 {
		t.Errorf("expected a second read of the same messages to add nothing, got %v", again)
	}
}

// TestLedgerGeminiChat: a Gemini CLI session in tmux whose role moves
// its home with GEMINI_CLI_HOME: the ledger finds its chat file under
// $GEMINI_CLI_HOME/.gemini (not the backups beside it), reads it as it
// grows, and a rewrite of the whole file counts nothing twice.
func TestLedgerGeminiChat(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	work, gemHome := filepath.Join(dir, "proj"), filepath.Join(dir, "gemhome")
	sid := "5f0c3d9e-1111-4222-8333-944455556666"
	inc := herd.Incarnation{ID: "inc-1", Session: "g-0", Host: "h", RuntimeKind: herd.RuntimeTmux,
		Argv: []string{"gemini", "-m", "gemini-2.5-flash"}, Workdir: work, StartedAt: time.Now().UTC(), AgentSessionID: sid}
	err = st.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "g", Replicas: 1, Command: inc.Argv, Workdir: work, Agent: herd.AgentGemini,
			Runtime: herd.RuntimeTmux, Env: map[string]string{"GEMINI_CLI_HOME": gemHome}}); err != nil {
			return err
		}
		if err := tx.PutSession(herd.Session{Name: "g-0", Role: "g", Host: "h", State: herd.StateRunning, Incarnation: "inc-1", RuntimeKind: herd.RuntimeTmux}); err != nil {
			return err
		}
		return tx.PutIncarnation(inc)
	})
	if err != nil {
		t.Fatal(err)
	}
	chats := filepath.Join(gemHome, ".gemini", "tmp", "proj", "chats")
	if err := os.MkdirAll(chats, 0o755); err != nil {
		t.Fatal(err)
	}
	chat := filepath.Join(chats, "session-2026-11-26T19-00-"+sid[:8]+".jsonl")
	// A backup of an earlier rewrite sorts after the chat: never read.
	backup := chat + ".unreadable-1764183600000"
	if err := os.WriteFile(backup, []byte(gemMsg("old", "gemini-2.5-flash", 999, 0, 999)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(chat, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &bytes.Buffer{}
	l := New(Options{Store: st, Host: "h", Home: filepath.Join(dir, "nohome"), Log: slog.New(slog.NewTextHandler(logs, nil))})
	lines := []string{gemMeta, gemUser, gemMsg("g1", "gemini-2.5-flash", -1, 0, 0), gemMsg("g1", "gemini-2.5-flash", 2345, 2048, 67)}
	write(lines...)
	once(t, l)
	one := Tokens{297, 67, 2048, 0}
	if got := total(t, l); got.Tokens != one {
		t.Fatalf("[first turn] expected %+v, got %+v\nlogs:\n%s", one, got.Tokens, logs)
	}
	lines = append(lines, gemSet, gemUser, gemMsg("g2", "gemini-2.5-flash", 2345, 2048, 67), gemMsg("g2", "gemini-2.5-flash", 2345, 2048, 67))
	write(lines...)
	once(t, l)
	two := one.Add(one)
	if got := total(t, l); got.Tokens != two {
		t.Fatalf("[second turn] expected %+v, got %+v", two, got.Tokens)
	}
	// Rewritten whole (temp file and rename), the same messages and a
	// new one.
	tmp := chat + ".tmp-1"
	if err := os.WriteFile(tmp, []byte(strings.Join(append(lines, gemMsg("g3", "gemini-2.5-flash", 10, 0, 1)), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, chat); err != nil {
		t.Fatal(err)
	}
	once(t, l)
	three := two.Add(Tokens{10, 1, 0, 0})
	if got := total(t, l); got.Tokens != three {
		t.Fatalf("[rewritten] expected %+v, got %+v", three, got.Tokens)
	}
	if got := total(t, l).CostUSD; got <= 0 {
		t.Errorf("expected gemini-2.5-flash priced, got cost %v", got)
	}
}
