// Package users owns the console's people: one row per name in the store
// (read-only or not) and the bearer tokens minted for them, kept only as
// their SHA-256. The socket API calls it for `herd web user` and `herd
// web token --user`; the console's auth reads it on every request that
// carries a person's credential. It never touches sessions, and never
// keeps a token it handed out.
package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"time"

	"herd/internal/errs"
	"herd/internal/store"
)

// namePattern is what a user's name may be: it names the person in
// events (data.by) and on command lines, so it is short and plain.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// reserved are names the console gives its other logins in events: a
// person may not take them.
var reserved = map[string]bool{"token": true, "api": true, "mcp": true}

// ValidName returns nil when name may name a user, else why not.
func ValidName(name string) error {
	if !namePattern.MatchString(name) {
		return errs.Badf("user name %q: want a lowercase letter, then up to 63 of a-z, 0-9, '_', '.', '-'", name)
	}
	if reserved[name] {
		return errs.Badf("user name %q is reserved (events name the machine's own token, the socket API or an MCP client so)", name)
	}
	return nil
}

// Manager reads and writes the users of one store.
type Manager struct {
	store store.Store
	now   func() time.Time
}

// New returns the users of s.
func New(s store.Store) *Manager {
	return &Manager{store: s, now: time.Now}
}

// Add adds a user called name.
func (m *Manager) Add(ctx context.Context, name string, readOnly bool) (store.User, error) {
	if err := ValidName(name); err != nil {
		return store.User{}, err
	}
	u := store.User{Name: name, ReadOnly: readOnly, CreatedAt: m.now().UTC()}
	err := m.store.Update(ctx, func(tx store.Tx) error {
		u.Seq = 0
		return tx.AddUser(&u)
	})
	if err != nil {
		return store.User{}, wrap("add user "+name, err)
	}
	return u, nil
}

// List lists the users, by name.
func (m *Manager) List(ctx context.Context) ([]store.User, error) {
	var all []store.User
	err := m.store.View(ctx, func(tx store.Tx) error {
		var err error
		all, err = tx.Users()
		return err
	})
	return all, wrap("list users", err)
}

// Remove removes the user called name and every token of theirs: the
// console refuses their tokens and browser sessions from the next
// request on, on every host of a shared store.
func (m *Manager) Remove(ctx context.Context, name string) error {
	err := m.store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.User(name); err != nil {
			return err
		}
		return tx.DeleteUser(name)
	})
	return wrap("remove user", err)
}

// Token mints a bearer token for the user called name and records its
// hash. The token itself is returned once and kept nowhere.
func (m *Manager) Token(ctx context.Context, name string) (string, store.User, error) {
	b := make([]byte, 32)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	var u store.User
	err := m.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if u, err = tx.User(name); err != nil {
			return err
		}
		return tx.AddUserToken(HashToken(tok), u.Seq, m.now().UTC())
	})
	if err != nil {
		return "", store.User{}, wrap("token", err)
	}
	return tok, u, nil
}

// User returns the user called name (an error wrapping
// store.ErrNotFound when there is none).
func (m *Manager) User(ctx context.Context, name string) (store.User, error) {
	var u store.User
	err := m.store.View(ctx, func(tx store.Tx) error {
		var err error
		u, err = tx.User(name)
		return err
	})
	return u, wrap("user", err)
}

// TokenUser returns the user holding token (an error wrapping
// store.ErrNotFound when none does).
func (m *Manager) TokenUser(ctx context.Context, token string) (store.User, error) {
	var u store.User
	err := m.store.View(ctx, func(tx store.Tx) error {
		var err error
		u, err = tx.TokenUser(HashToken(token))
		return err
	})
	return u, wrap("user token", err)
}

// HashToken is what the store keeps of a user's token: its SHA-256, in
// hex. The token is 256 random bits, so no salt or slow hash is needed.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// ErrStoreAway is a user verb or a person's credential that the store
// cannot answer for now (a shared store away): nothing was done, and the
// credential is refused.
var ErrStoreAway = errs.New(errs.Unavailable, "users: the store is away: users cannot be read or changed until it is back")

// wrap prefixes err with what was done; a store that is away becomes
// ErrStoreAway (with its cause), which the front doors answer with 503.
func wrap(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrAway) || errors.Is(err, store.ErrUnreachable):
		return fmt.Errorf("%s: %w (%w)", what, ErrStoreAway, err)
	case errors.Is(err, store.ErrNotFound) || errs.KindOf(err) != errs.Internal:
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
