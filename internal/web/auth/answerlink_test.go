package auth

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSigner(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	g.now = func() time.Time { return now }
	since := now.Add(-time.Minute)
	tok := g.Sign("w-0", since, "1", "Yes")

	c, err := g.Verify(tok)
	if err != nil || c.Session != "w-0" || c.Option != "1" || !c.Since.Equal(since) || c.Label != "Yes" {
		t.Fatalf("[valid] expected the claim … got %+v, %v", c, err)
	}

	// Tampered: another session or option in the payload, the signature
	// of another key, garbage.
	payload, sig, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	other := NewSigner([]byte("another key, another key, another"))
	other.now = g.now
	for name, bad := range map[string]string{
		"other session": base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"w-0"`, `"w-1"`, 1))) + "." + sig,
		"other option":  base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"o":"1"`, `"o":"2"`, 1))) + "." + sig,
		"other key":     other.Sign("w-0", since, "1", "Yes"),
		"no signature":  payload,
		"garbage":       "x.y",
	} {
		if _, err := g.Verify(bad); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("[%s] expected %v … got %v", name, ErrLinkInvalid, err)
		}
	}

	// Expiry: 15 minutes.
	now = now.Add(AnswerLinkTTL - time.Second)
	if _, err := g.Verify(tok); err != nil {
		t.Errorf("[before expiry] expected valid … got %v", err)
	}
	now = now.Add(time.Second)
	if _, err := g.Verify(tok); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("[expired] expected %v … got %v", ErrLinkExpired, err)
	}
	if _, err := g.Spend(tok); !errors.Is(err, ErrLinkExpired) {
		t.Errorf("[spend expired] expected %v … got %v", ErrLinkExpired, err)
	}

	// Single use.
	tok = g.Sign("w-0", since, "1", "Yes")
	if _, err := g.Spend(tok); err != nil {
		t.Fatalf("[first use] expected spent … got %v", err)
	}
	for _, f := range []func(string) (AnswerClaim, error){g.Spend, g.Verify} {
		if _, err := f(tok); !errors.Is(err, ErrLinkSpent) {
			t.Errorf("[second use] expected %v … got %v", ErrLinkSpent, err)
		}
	}

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
