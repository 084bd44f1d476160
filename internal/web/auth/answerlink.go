package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Answer links are one-tap answers a notification carries: a URL that
// names one option of one need of one session, signed, expiring, and
// spent by its first use. Its GET shows what it will do; only a POST
// from that page answers.
const (
	// AnswerLinkTTL is how long an answer link is valid.
	AnswerLinkTTL = 15 * time.Minute
	// AnswerKeyFile holds the key answer links are signed with (0600).
	AnswerKeyFile = "web.answer.key"
)

// Errors of an answer link.
var (
	ErrLinkInvalid = errors.New("this answer link is not valid")
	ErrLinkExpired = errors.New("this answer link has expired")
	ErrLinkSpent   = errors.New("this answer link was used already")
)

// AnswerClaim is what an answer link says: answer Session's need that
// began at Since with Option, before Expires.
type AnswerClaim struct {
	Session string    `json:"s"`
	Since   time.Time `json:"t"`
	Option  string    `json:"o"`
	// Label is the option's label, shown on the confirmation page.
	Label   string `json:"l"`
	Expires int64  `json:"e"`
	// Nonce makes each link unique: the record of its use.
	Nonce string `json:"n"`
}

// Nonces records the nonces of spent answer links until the links
// expire. The console's keeps them in the store, so a link spent before
// a restart of the daemon stays spent.
type Nonces interface {
	// SpendNonce records nonce as spent until expires; false: it was
	// already.
	SpendNonce(ctx context.Context, nonce string, expires time.Time) (bool, error)
	// NonceSpent reports whether nonce was spent.
	NonceSpent(ctx context.Context, nonce string) (bool, error)
}

// Signer mints and checks answer links.
type Signer struct {
	key []byte
	now func() time.Time
	// nonces are the spent links' nonces.
	nonces Nonces
}

// NewSigner returns a signer with key whose spent links are recorded in
// nonces.
func NewSigner(key []byte, nonces Nonces) *Signer {
	return &Signer{key: key, now: time.Now, nonces: nonces}
}

// Sign returns the token of a link answering session's need of since
// with option (labelled label), valid AnswerLinkTTL.
func (g *Signer) Sign(session string, since time.Time, option, label string) string {
	return g.SignClaim(AnswerClaim{Session: session, Since: since.UTC(), Option: option, Label: label,
		Expires: g.now().Add(AnswerLinkTTL).Unix(), Nonce: randomHex(12)})
}

// SignClaim returns the token of a link that says c, as it is.
func (g *Signer) SignClaim(c AnswerClaim) string {
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(g.mac(payload))
}

func (g *Signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte("herd answer link\x00" + payload))
	return m.Sum(nil)
}

// Verify checks a token's signature and expiry, and that it is unspent.
// An error other than the link's own (ErrLinkInvalid, ErrLinkExpired,
// ErrLinkSpent) is the nonces' record that could not be read.
func (g *Signer) Verify(ctx context.Context, token string) (AnswerClaim, error) {
	c, err := g.check(token)
	if err != nil {
		return c, err
	}
	spent, err := g.nonces.NonceSpent(ctx, c.Nonce)
	if err != nil {
		return AnswerClaim{}, fmt.Errorf("answer link: %w", err)
	}
	if spent {
		return AnswerClaim{}, ErrLinkSpent
	}
	return c, nil
}

// linkEncoding reads a link's payload as Sign writes it (its signature
// is over the payload's spelling, so no other spelling verifies anyway).
var linkEncoding = base64.RawURLEncoding.Strict()

// check checks a token's signature and expiry.
func (g *Signer) check(token string) (AnswerClaim, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return AnswerClaim{}, ErrLinkInvalid
	}
	// The signature is compared as it is spelt, not as it decodes: a
	// decoder skips line breaks and may ignore unused bits, so another
	// spelling of the same bytes would verify too.
	want := base64.RawURLEncoding.EncodeToString(g.mac(payload))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return AnswerClaim{}, ErrLinkInvalid
	}
	raw, err := linkEncoding.DecodeString(payload)
	if err != nil {
		return AnswerClaim{}, ErrLinkInvalid
	}
	var c AnswerClaim
	if err := json.Unmarshal(raw, &c); err != nil || c.Session == "" || c.Option == "" || c.Nonce == "" {
		return AnswerClaim{}, ErrLinkInvalid
	}
	if !g.now().Before(time.Unix(c.Expires, 0)) {
		return AnswerClaim{}, ErrLinkExpired
	}
	return c, nil
}

// Spend checks a token and records it used: of two spends of one link,
// one succeeds, whether or not the daemon restarted between them.
func (g *Signer) Spend(ctx context.Context, token string) (AnswerClaim, error) {
	c, err := g.check(token)
	if err != nil {
		return c, err
	}
	ok, err := g.nonces.SpendNonce(ctx, c.Nonce, time.Unix(c.Expires, 0))
	if err != nil {
		return AnswerClaim{}, fmt.Errorf("answer link: %w", err)
	}
	if !ok {
		return AnswerClaim{}, ErrLinkSpent
	}
	return c, nil
}

// FormToken is the hidden field the confirmation page's form carries:
// bound to the link, so a form posted from anywhere else lacks it.
func (g *Signer) FormToken(token string) string {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte("herd answer form\x00" + token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckForm reports whether form is token's form token.
func (g *Signer) CheckForm(token, form string) bool {
	return hmac.Equal([]byte(form), []byte(g.FormToken(token)))
}
