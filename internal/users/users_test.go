package users

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"herd/internal/errs"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

func TestValidName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"a", true},
		{"bob.smith-2_x", true},
		{"a" + string(bytes.Repeat([]byte("b"), 63)), true},
		{"a" + string(bytes.Repeat([]byte("b"), 64)), false},
		{"", false},
		{"Alice", false},
		{"2bob", false},
		{"-x", false},
		{"al ice", false},
		{"al:ice", false},
		{"browser:ab", false},
		{"élise", false},
		{"token", false},
		{"api", false},
		{"mcp", false},
	} {
		err := ValidName(c.name)
		if (err == nil) != c.ok || (err != nil && !errs.IsBadInput(err)) {
			t.Errorf("[%q] expected ok=%v … got %v", c.name, c.ok, err)
		}
	}
}

func open(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

// TestVerbs: add, list, token and remove, and their refusals: each with
// the kind the front doors answer with.
func TestVerbs(t *testing.T) {
	st, _ := open(t)
	m := New(st)
	ctx := t.Context()
	if _, err := m.Add(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Add(ctx, "rob", true); err != nil {
		t.Fatal(err)
	}
	all, err := m.List(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "alice" || all[0].ReadOnly || all[1].Name != "rob" || !all[1].ReadOnly {
		t.Fatalf("[list] expected alice and read-only rob … got %+v %v", all, err)
	}
	tok, u, err := m.Token(ctx, "alice")
	if err != nil || len(tok) != 64 || u.Name != "alice" {
		t.Fatalf("[token] expected 64 hex digits for alice … got %q %+v %v", tok, u, err)
	}
	if got, err := m.TokenUser(ctx, tok); err != nil || got.Name != "alice" {
		t.Errorf("[token user] expected alice … got %+v %v", got, err)
	}
	if tok2, _, _ := m.Token(ctx, "alice"); tok2 == tok {
		t.Errorf("[a second token] expected another token … got the same")
	}
	for _, c := range []struct {
		name string
		err  error
		kind errs.Kind
		msg  string
	}{
		{"add an existing user", func() error { _, err := m.Add(ctx, "alice", true); return err }(), errs.Conflict, "user alice exists"},
		{"add a bad name", func() error { _, err := m.Add(ctx, "Alice!", false); return err }(), errs.BadInput, `user name "Alice!"`},
		{"remove an unknown user", m.Remove(ctx, "nobody"), errs.NotFound, "user nobody not found"},
		{"token of an unknown user", func() error { _, _, err := m.Token(ctx, "nobody"); return err }(), errs.NotFound, "user nobody not found"},
		{"an unknown token", func() error { _, err := m.TokenUser(ctx, "0123"); return err }(), errs.NotFound, "not found"},
	} {
		if errs.KindOf(c.err) != c.kind || c.err == nil || !bytes.Contains([]byte(c.err.Error()), []byte(c.msg)) {
			t.Errorf("[%s] expected an error of kind %d saying %q … got %v", c.name, c.kind, c.msg, c.err)
		}
	}
	if err := m.Remove(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TokenUser(ctx, tok); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("[token of a removed user] expected not found … got %v", err)
	}
}

// TestTokenHashedAtRest: the database's files hold a token's hash, never
// the token.
func TestTokenHashedAtRest(t *testing.T) {
	st, dir := open(t)
	m := New(st)
	ctx := t.Context()
	if _, err := m.Add(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.Token(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var all []byte
	files, _ := filepath.Glob(filepath.Join(dir, "herd.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if !bytes.Contains(all, []byte(HashToken(tok))) {
		t.Fatalf("[hash] expected the token's hash in the database's files %v … not found", files)
	}
	if bytes.Contains(all, []byte(tok)) {
		t.Errorf("[token] expected the token nowhere in the database's files … found it")
	}
}

// awayStore is a shared store that is away.
type awayStore struct{ store.Store }

func (awayStore) Update(context.Context, func(store.Tx) error) error { return store.ErrAway }
func (awayStore) View(context.Context, func(store.Tx) error) error {
	return errors.Join(errors.New("dial tcp: connection refused"), store.ErrUnreachable)
}

// TestStoreAway: with the store away, every verb and read says so, as
// unavailable (503), and nothing else.
func TestStoreAway(t *testing.T) {
	m := New(awayStore{})
	ctx := t.Context()
	for name, err := range map[string]error{
		"add":        func() error { _, err := m.Add(ctx, "alice", false); return err }(),
		"list":       func() error { _, err := m.List(ctx); return err }(),
		"remove":     m.Remove(ctx, "alice"),
		"token":      func() error { _, _, err := m.Token(ctx, "alice"); return err }(),
		"user":       func() error { _, err := m.User(ctx, "alice"); return err }(),
		"token user": func() error { _, err := m.TokenUser(ctx, "x"); return err }(),
	} {
		if !errors.Is(err, ErrStoreAway) || errs.KindOf(err) != errs.Unavailable || errors.Is(err, store.ErrNotFound) {
			t.Errorf("[%s] expected the store away, unavailable … got %v", name, err)
		}
	}
}
