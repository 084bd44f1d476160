package auth

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// FuzzAnswerLink: any token in an answer link's path is checked without
// a panic; only a token the signer made verifies (and is spent once);
// a refused one is refused as invalid, expired or spent; a form token
// is accepted only for its own link.
func FuzzAnswerLink(f *testing.F) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	g := NewSigner([]byte("0123456789abcdef0123456789abcdef"), &memNonces{spent: map[string]time.Time{}})
	g.now = func() time.Time { return now }
	since := now.Add(-time.Minute)
	claims := []AnswerClaim{
		{Session: "w-0", Since: since, Option: "1", Label: "Yes", Expires: now.Add(AnswerLinkTTL).Unix(), Nonce: "00112233445566778899aabb"},
		{Session: "w-1", Since: since, Option: "2", Label: "No, <b>&", Expires: now.Add(AnswerLinkTTL).Unix(), Nonce: "ffeeddccbbaa998877665544"},
		{Session: "w-2", Since: since, Option: "1", Label: "Yes", Expires: now.Add(-time.Second).Unix(), Nonce: "0a0b0c0d0e0f101112131415"},
	}
	var signed []string
	for _, c := range claims {
		signed = append(signed, g.SignClaim(c))
	}
	for _, s := range append(signed, "", ".", "x.y", "eyJzIjoidyJ9.", "..", "e30.AAAA") {
		f.Add(s, "")
	}
	f.Add(signed[0], g.FormToken(signed[0]))
	f.Fuzz(func(t *testing.T, tok, form string) {
		// A signer of its own per input: a token spent by one input is
		// not spent for the next.
		g := NewSigner(g.key, &memNonces{spent: map[string]time.Time{}})
		g.now = func() time.Time { return now }
		ctx := context.Background()
		c, err := g.Verify(ctx, tok)
		if err != nil {
			if !errors.Is(err, ErrLinkInvalid) && !errors.Is(err, ErrLinkExpired) {
				t.Fatalf("a token refused with an error of none of the link's kinds: %v", err)
			}
			if c != (AnswerClaim{}) && !errors.Is(err, ErrLinkExpired) {
				t.Fatalf("a refused token gave a claim: %+v", c)
			}
			if _, serr := g.Spend(ctx, tok); serr == nil {
				t.Fatalf("a token refused by Verify (%v) was spent", err)
			}
		} else {
			i := slices.Index(signed, tok)
			if i < 0 {
				t.Fatalf("a token the signer never made verified: %q as %+v", tok, c)
			}
			if c != claims[i] {
				t.Fatalf("a signed token verified as another claim: %+v, signed %+v", c, claims[i])
			}
			if _, err := g.Spend(ctx, tok); err != nil {
				t.Fatalf("a valid token not spent: %v", err)
			}
			if _, err := g.Spend(ctx, tok); !errors.Is(err, ErrLinkSpent) {
				t.Fatalf("a token spent twice: %v", err)
			}
			if _, err := g.Verify(ctx, tok); !errors.Is(err, ErrLinkSpent) {
				t.Fatalf("a spent token verified: %v", err)
			}
		}
		if g.CheckForm(tok, form) != (form == g.FormToken(tok)) {
			t.Fatalf("form token %q judged wrongly for %q", form, tok)
		}
		if !g.CheckForm(tok, g.FormToken(tok)) {
			t.Fatalf("a link's own form token refused: %q", tok)
		}
		if form != "" && form != tok && g.CheckForm(form, g.FormToken(tok)) && g.FormToken(form) != g.FormToken(tok) {
			t.Fatalf("the form token of %q accepted for %q", tok, form)
		}
	})
}
