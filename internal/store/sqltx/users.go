package sqltx

import (
	"fmt"
	"time"

	"herd/internal/errs"
	"herd/internal/store"
)

const userSelect = "SELECT users.seq, users.name, users.read_only, users.created_at FROM users"

// AddUser stores u as a new user and sets u.Seq.
func (t *tx) AddUser(u *store.User) error {
	if u == nil || u.Name == "" || u.CreatedAt.IsZero() {
		return fmt.Errorf("%s: add user: name and created_at are required", t.name)
	}
	at, err := nanos(u.CreatedAt)
	if err != nil {
		return fmt.Errorf("%s: add user %s: %w", t.name, u.Name, err)
	}
	var seq int64
	err = t.queryRow("INSERT INTO users (name, read_only, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING seq",
		u.Name, boolInt(u.ReadOnly), at).Scan(&seq)
	if err != nil {
		if _, gerr := t.User(u.Name); gerr == nil {
			return &errs.Error{Kind: errs.Conflict, Msg: "user " + u.Name + " exists"}
		}
		return fmt.Errorf("%s: add user %s: %w", t.name, u.Name, err)
	}
	u.Seq = seq
	return nil
}

// User returns the user called name.
func (t *tx) User(name string) (store.User, error) {
	u, err := scanUser(t.queryRow(userSelect+" WHERE name = ?", name))
	if err != nil {
		return u, t.notFound(err, "user", name)
	}
	return u, nil
}

// Users lists every user, by name.
func (t *tx) Users() ([]store.User, error) {
	return collect(t, "users", scanUser, userSelect+" ORDER BY name")
}

// DeleteUser forgets the user called name and their tokens.
func (t *tx) DeleteUser(name string) error {
	if _, err := t.exec("DELETE FROM user_tokens WHERE user_seq IN (SELECT seq FROM users WHERE name = ?)", name); err != nil {
		return fmt.Errorf("%s: delete user %s: %w", t.name, name, err)
	}
	if _, err := t.exec("DELETE FROM users WHERE name = ?", name); err != nil {
		return fmt.Errorf("%s: delete user %s: %w", t.name, name, err)
	}
	return nil
}

// AddUserToken records a token's hash for the user numbered userSeq.
func (t *tx) AddUserToken(hash string, userSeq int64, at time.Time) error {
	if hash == "" || userSeq <= 0 || at.IsZero() {
		return fmt.Errorf("%s: add user token: hash, user and time are required", t.name)
	}
	n, err := nanos(at)
	if err != nil {
		return fmt.Errorf("%s: add user token: %w", t.name, err)
	}
	if _, err := t.exec("INSERT INTO user_tokens (hash, user_seq, created_at) VALUES (?, ?, ?)", hash, userSeq, n); err != nil {
		return fmt.Errorf("%s: add user token: %w", t.name, err)
	}
	return nil
}

// TokenUser returns the user whose token has hash.
func (t *tx) TokenUser(hash string) (store.User, error) {
	u, err := scanUser(t.queryRow(userSelect+" JOIN user_tokens ON user_tokens.user_seq = users.seq WHERE user_tokens.hash = ?", hash))
	if err != nil {
		// The hash is a credential's: never in a message.
		return u, t.notFound(err, "user token", "(hash)")
	}
	return u, nil
}

func scanUser(sc scanner) (store.User, error) {
	var (
		u        store.User
		readOnly int64
		at       int64
	)
	err := sc.Scan(&u.Seq, &u.Name, &readOnly, &at)
	u.ReadOnly, u.CreatedAt = readOnly != 0, fromNanos(at)
	return u, err
}
