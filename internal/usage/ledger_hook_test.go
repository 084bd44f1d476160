package usage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// codexTotal is a Codex rollout token_count line of a running total.
func codexTotal(in, cached, out int) string {
	return fmt.Sprintf(`{"timestamp":"2026-11-26T19:00:00.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d}}}}`+"\n", in, cached, out)
}

// TestLedgerHookTranscript: a Codex session in tmux whose hooks reported
// its rollout's path before herd recorded its session id: the ledger
// reads the file the hook named; a path that is relative or not JSONL
// (a hook payload is the agent's input) is not taken.
func TestLedgerHookTranscript(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inc := herd.Incarnation{ID: "inc-1", Session: "c-0", Host: "h", RuntimeKind: herd.RuntimeTmux,
		Argv: []string{"codex"}, Workdir: filepath.Join(dir, "proj"), StartedAt: time.Now().UTC()}
	err = st.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "c", Replicas: 1, Command: inc.Argv, Workdir: inc.Workdir, Agent: herd.AgentCodex, Runtime: herd.RuntimeTmux}); err != nil {
			return err
		}
		if err := tx.PutSession(herd.Session{Name: "c-0", Role: "c", Host: "h", State: herd.StateRunning, Incarnation: "inc-1", RuntimeKind: herd.RuntimeTmux}); err != nil {
			return err
		}
		return tx.PutIncarnation(inc)
	})
	if err != nil {
		t.Fatal(err)
	}
	rollout := filepath.Join(dir, "elsewhere", "rollout-2026-11-26T19-00-00-01a21939-377b-7c41-b08e-27560f01f980.jsonl")
	if err := os.MkdirAll(filepath.Dir(rollout), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rollout, []byte(codexTotal(1234, 1024, 56)), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSONL := filepath.Join(dir, "elsewhere", "notes.txt")
	if err := os.WriteFile(notJSONL, []byte(codexTotal(9999, 0, 9999)), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reported := ""
	l := New(Options{Store: st, Host: "h", Home: filepath.Join(dir, "home"), HookTranscript: func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		if id != "inc-1" {
			t.Errorf("expected the hook path of inc-1 asked for, got %q", id)
		}
		return reported
	}})
	for _, bad := range []string{"", "elsewhere/" + filepath.Base(rollout), notJSONL} {
		mu.Lock()
		reported = bad
		mu.Unlock()
		once(t, l)
		if got := total(t, l); !got.Tokens.Zero() {
			t.Fatalf("[hook path %q] expected nothing read, got %+v", bad, got.Tokens)
		}
	}
	mu.Lock()
	reported = rollout
	mu.Unlock()
	once(t, l)
	if want, got := (Tokens{210, 56, 1024, 0}), total(t, l).Tokens; got != want {
		t.Fatalf("[hook path] expected %+v, got %+v", want, got)
	}
}
