package usage

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// fixture is a real SQLite store holding one claude role with one
// session and its open incarnation, and the transcript path its ledger
// reads.
type fixture struct {
	st         store.Store
	home       string
	transcript string
	inc        herd.Incarnation
	logs       *bytes.Buffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, home: filepath.Join(dir, "home"), logs: &bytes.Buffer{}}
	work := filepath.Join(dir, "work")
	f.inc = herd.Incarnation{ID: "inc-1", Session: "w-0", Host: "h", RuntimeKind: herd.RuntimeTmux,
		Argv: []string{"claude"}, Workdir: work, StartedAt: time.Now().UTC(), AgentSessionID: "0f8fad5b-d9cb-469f-a165-70867728950e"}
	err = st.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 1, Command: []string{"claude"}, Workdir: work, Agent: herd.AgentClaude, Runtime: herd.RuntimeTmux}); err != nil {
			return err
		}
		if err := tx.PutSession(herd.Session{Name: "w-0", Role: "w", Host: "h", State: herd.StateRunning, Incarnation: "inc-1", RuntimeKind: herd.RuntimeTmux}); err != nil {
			return err
		}
		return tx.PutIncarnation(f.inc)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.transcript = filepath.Join(f.home, ".claude", "projects", agents.ClaudeProjectDir(work), f.inc.AgentSessionID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(f.transcript), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) ledger() *Ledger {
	return New(Options{Store: f.st, Host: "h", Home: f.home, Log: slog.New(slog.NewTextHandler(f.logs, nil))})
}

func (f *fixture) append(t *testing.T, s string) {
	t.Helper()
	fh, err := os.OpenFile(f.transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// msg is a transcript line of message id with in input and out output
// tokens of claude-sonnet-4-5.
func msg(id string, in, out int) string {
	return fmt.Sprintf(`{"type":"assistant","timestamp":"2026-11-20T10:00:00Z","message":{"id":%q,"model":"claude-sonnet-4-5","usage":{"input_tokens":%d,"output_tokens":%d,"cache_read_input_tokens":1000,"cache_creation_input_tokens":100}}}`+"\n", id, in, out)
}

func once(t *testing.T, l *Ledger) {
	t.Helper()
	if err := l.Once(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func total(t *testing.T, l *Ledger) Totals {
	t.Helper()
	rep, err := l.Report(t.Context(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Total
}

func TestLedgerReadsIncrementally(t *testing.T) {
	f := newFixture(t)
	l := f.ledger()
	once(t, l) // no transcript yet: nothing, no error
	f.append(t, msg("m1", 10, 1)+msg("m1", 10, 5)+msg("m2", 20, 2))
	once(t, l)
	want := Tokens{Input: 30, Output: 7, CacheRead: 2000, CacheWrite: 200}
	if got := total(t, l); got.Tokens != want {
		t.Fatalf("expected %+v, got %+v", want, got.Tokens)
	}
	price := Price{3, 15, 0.30, 3.75}
	if got := total(t, l).CostUSD; math.Abs(got-price.Cost(want)) > 1e-12 {
		t.Errorf("expected cost %v, got %v", price.Cost(want), got)
	}

	// A line being written waits for its end; a garbled one is skipped
	// with a logged reason.
	line := msg("m3", 100, 10)
	f.append(t, `{"type":"assistant","message":{"usage":{"input_tok`+"\n"+line[:40])
	once(t, l)
	if got := total(t, l); got.Tokens != want {
		t.Fatalf("expected the half line not counted yet: %+v, got %+v", want, got.Tokens)
	}
	if !strings.Contains(f.logs.String(), "usage: line skipped") {
		t.Errorf("expected the garbled line logged, got %q", f.logs.String())
	}
	f.append(t, line[40:])
	once(t, l)
	want = want.Add(Tokens{100, 10, 1000, 100})
	if got := total(t, l); got.Tokens != want {
		t.Fatalf("expected the finished line counted: %+v, got %+v", want, got.Tokens)
	}

	// A restarted daemon (a new ledger on the same store) reads on where
	// the last stopped: nothing counted twice, the message whose last line
	// comes after the restart counted once.
	f.append(t, msg("m4", 7, 1))
	l2 := f.ledger()
	once(t, l2)
	f.append(t, msg("m4", 7, 9))
	once(t, l2)
	want = want.Add(Tokens{7, 9, 1000, 100})
	if got := total(t, l2); got.Tokens != want {
		t.Fatalf("after a restart: expected %+v, got %+v", want, got.Tokens)
	}

	// The session's total, and the grouping by model, say the same.
	st, err := l2.SessionTotals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st["w-0"].Tokens != want {
		t.Errorf("session total: expected %+v, got %+v", want, st["w-0"].Tokens)
	}
	rep, err := l2.Report(t.Context(), Query{By: ByModel})
	if err != nil || len(rep.Lines) != 1 || rep.Lines[0].Key != "claude-sonnet-4-5" {
		t.Errorf("expected one line for claude-sonnet-4-5, got %+v %v", rep, err)
	}
	if c := l2.RoleCostSince("w", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)); math.Abs(c-total(t, l2).CostUSD) > 1e-12 {
		t.Errorf("role cost since the day: expected %v, got %v", total(t, l2).CostUSD, c)
	}
	if c := l2.RoleCostSince("w", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)); c != 0 {
		t.Errorf("role cost since the next day: expected 0, got %v", c)
	}
}

func TestLedgerFileReplaced(t *testing.T) {
	f := newFixture(t)
	l := f.ledger()
	f.append(t, msg("m1", 10, 1)+msg("m2", 20, 2))
	once(t, l)
	before := total(t, l)
	// The file is replaced by a copy of itself plus a new message: the
	// copy is not counted again, the new message is.
	data, err := os.ReadFile(f.transcript)
	if err != nil {
		t.Fatal(err)
	}
	tmp := f.transcript + ".new"
	if err := os.WriteFile(tmp, append(data, msg("m3", 5, 5)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.transcript); err != nil {
		t.Fatal(err)
	}
	once(t, l)
	want := before.Tokens.Add(Tokens{5, 5, 1000, 100})
	if got := total(t, l); got.Tokens != want {
		t.Fatalf("expected %+v, got %+v", want, got.Tokens)
	}
	// Cut short: read again from the start, nothing counted twice.
	if err := os.WriteFile(f.transcript, []byte(msg("m3", 5, 5)), 0o644); err != nil {
		t.Fatal(err)
	}
	once(t, l)
	if got := total(t, l); got.Tokens != want {
		t.Fatalf("after a cut: expected %+v, got %+v", want, got.Tokens)
	}
}

func TestLedgerQuietFileCostsAStat(t *testing.T) {
	f := newFixture(t)
	l := f.ledger()
	f.append(t, msg("m1", 10, 1))
	once(t, l)
	// The file made unreadable: a round that only stats it does not fail.
	if err := os.Chmod(f.transcript, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(f.transcript, 0o644) })
	if err := l.Once(t.Context()); err != nil {
		t.Errorf("expected a round over an unchanged file to open nothing, got %v", err)
	}
}

func TestLedgerEndedIncarnationReadOnceMore(t *testing.T) {
	f := newFixture(t)
	l := f.ledger()
	f.append(t, msg("m1", 10, 1))
	once(t, l)
	// The agent wrote its last message and died before the next round.
	f.append(t, msg("m2", 20, 2))
	ended := f.inc
	now := time.Now().UTC()
	ended.EndedAt = &now
	if err := f.st.Update(context.Background(), func(tx store.Tx) error { return tx.PutIncarnation(ended) }); err != nil {
		t.Fatal(err)
	}
	once(t, l)
	if got := total(t, l); got.Input != 30 {
		t.Errorf("expected the ended incarnation's last message counted (input 30), got %+v", got)
	}
}

func TestArgvModel(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"codex", "-m", "gpt-5"}, "gpt-5"},
		{[]string{"claude", "--model", "opus"}, "opus"},
		{[]string{"gemini", "--model=gemini-2.5-pro"}, "gemini-2.5-pro"},
		{[]string{"claude", "--", "--model", "x"}, ""},
		{[]string{"claude", "--model"}, ""},
		{nil, ""},
	} {
		if got := ArgvModel(tc.argv); got != tc.want {
			t.Errorf("[%v] expected %q, got %q", tc.argv, tc.want, got)
		}
	}
}

func TestLedgerShortRunReadOnce(t *testing.T) {
	// The incarnation ran and ended before the ledger's first round: its
	// session's last incarnation is read once all the same, and not again.
	f := newFixture(t)
	f.append(t, msg("m1", 10, 1))
	ended := f.inc
	now := time.Now().UTC()
	ended.EndedAt = &now
	if err := f.st.Update(context.Background(), func(tx store.Tx) error { return tx.PutIncarnation(ended) }); err != nil {
		t.Fatal(err)
	}
	l := f.ledger()
	once(t, l)
	if got := total(t, l); got.Input != 10 {
		t.Fatalf("expected the short run counted (input 10), got %+v", got)
	}
	f.append(t, msg("m2", 20, 2)) // written by no incarnation of herd's
	once(t, l)
	if got := total(t, l); got.Input != 10 {
		t.Errorf("expected an ended incarnation read once only (input 10), got %+v", got)
	}
}
