package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// memNonces records spent nonces in memory.
type memNonces struct {
	mu    sync.Mutex
	spent map[string]time.Time
	// err, when set, is every call's error.
	err error
}

func (m *memNonces) SpendNonce(_ context.Context, nonce string, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false, m.err
	}
	if _, ok := m.spent[nonce]; ok {
		return false, nil
	}
	m.spent[nonce] = expires
	return true, nil
}

func (m *memNonces) NonceSpent(_ context.Context, nonce string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.spent[nonce]
	return ok, m.err
}

func TestSigner(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	nonces := &memNonces{spent: map[string]time.Time{}}
	g := NewSigner([]byte("0123456789abcdef0123456789abcdef"), nonces)
	g.now = func() time.Time { return now }
	since := now.Add(-time.Minute)
	tok := g.Sign("w-0", since, "1", "Yes")

	c, err := g.Verify(ctx, tok)
	if err != nil || c.Session != "w-0" || c.Option != "1" || !c.Since.Equal(since) || c.Label != "Yes" {
		t.Fatalf("[valid] expected the claim … got %+v, %v", c, err)
	}

	// Tampered: another session or option in the payload, the signature
	// of another key, garbage.
	payload, sig, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	other := NewSigner([]byte("another key, another key, another"), nonces)
	other.now = g.now
	for name, bad := range map[string]string{
		"other session": base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"w-0"`, `"w-1"`, 1))) + "." + sig,
		"other option":  base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"o":"1"`, `"o":"2"`, 1))) + "." + sig,
		"other key":     other.Sign("w-0", since, "1", "Yes"),
		"no signature":  payload,
		"garbage":       "x.y",
	} {
		if _, err := g.Verify(ctx, bad); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("[%s] expected %v … got %v", name, ErrLinkInvalid, err)
		}
	}

	// Expiry: 15 minutes.
	now = now.Add(AnswerLinkTTL - time.Second)
	if _, err := g.Verify(ctx, tok); err != nil {
		t.Errorf("[before expiry] expected valid … got %v", err)
	}
	now = now.Add(time.Second)
	if _, err := g.Verify(ctx, tok); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("[expired] expected %v … got %v", ErrLinkExpired, err)
	}
	if _, err := g.Spend(ctx, tok); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("[spend expired] expected %v … got %v", ErrLinkExpired, err)
	}

	// Single use.
	tok = g.Sign("w-0", since, "1", "Yes")
	if _, err := g.Spend(ctx, tok); err != nil {
		t.Fatalf("[first use] expected spent … got %v", err)
	}
	for _, f := range []func(context.Context, string) (AnswerClaim, error){g.Spend, g.Verify} {
		if _, err := f(ctx, tok); !errors.Is(err, ErrLinkSpent) {
			t.Errorf("[second use] expected %v … got %v", ErrLinkSpent, err)
		}
	}
	// Spent by another signer on the same record: a daemon restarted.
	again := NewSigner([]byte("0123456789abcdef0123456789abcdef"), nonces)
	again.now = g.now
	if _, err := again.Spend(ctx, tok); !errors.Is(err, ErrLinkSpent) {
		t.Errorf("[spent before a restart] expected %v … got %v", ErrLinkSpent, err)
	}
	// A record that cannot be read: neither valid nor spent.
	nonces.err = errors.New("store away")
	fresh := g.Sign("w-0", since, "1", "Yes")
	for _, f := range []func(context.Context, string) (AnswerClaim, error){g.Spend, g.Verify} {
		if _, err := f(ctx, fresh); err == nil || errors.Is(err, ErrLinkSpent) || errors.Is(err, ErrLinkInvalid) {
			t.Errorf("[record unreadable] expected the record's error … got %v", err)
		}
	}
	nonces.err = nil

	// The form token is bound to its link.
	if !g.CheckForm(tok, g.FormToken(tok)) || g.CheckForm(tok, g.FormToken(g.Sign("w-0", since, "1", "Yes"))) || g.CheckForm(tok, "") {
		t.Errorf("[form token] expected only the link's own form token accepted")
	}
}

func TestLoadAnswerKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadAnswerKey(dir)
	if err != nil || len(k1) != 32 {
		t.Fatalf("[new] expected a 32-byte key … got %d bytes, %v", len(k1), err)
	}
	st, err := os.Stat(filepath.Join(dir, AnswerKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("[mode] expected 0600 … got %v, %v", st.Mode().Perm(), err)
	}
	k2, _ := LoadAnswerKey(dir)
	if string(k1) != string(k2) {
		t.Errorf("[again] expected the same key … got another")
	}
}

// TestLinkOneSpelling: a link verifies only as it was signed: the same
// signature with the unused bits of its last character set, or a line
// break inside, is invalid (found by FuzzAnswerLink: a base64 decoder
// ignores both).
func TestLinkOneSpelling(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := NewSigner([]byte("0123456789abcdef0123456789abcdef"), &memNonces{spent: map[string]time.Time{}})
	g.now = func() time.Time { return now }
	tok := g.Sign("w-0", now.Add(-time.Minute), "1", "Yes")
	if _, err := g.Verify(context.Background(), tok); err != nil {
		t.Fatalf("[signed] expected valid … got %v", err)
	}
	// 32 bytes of signature are 43 characters: the last carries 4 bits
	// and 2 unused ones.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	for unused := 1; unused < 4; unused++ {
		other := tok[:len(tok)-1] + string(alphabet[last|unused])
		if _, err := g.Verify(context.Background(), other); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("[unused bits %d] expected %v … got %v", unused, ErrLinkInvalid, err)
		}
	}
	// A decoder skips line breaks: a signature with one inside is
	// another spelling too (found by FuzzAnswerLink once the bits were
	// refused).
	payload, sig, _ := strings.Cut(tok, ".")
	for _, brk := range []string{"\r", "\n", "\r\n"} {
		other := payload + "." + sig[:10] + brk + sig[10:]
		if _, err := g.Verify(context.Background(), other); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("[a line break %q in the signature] expected %v … got %v", brk, ErrLinkInvalid, err)
		}
	}
}
