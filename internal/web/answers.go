package web

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"herd/internal/store"
	"herd/internal/web/auth"
	"herd/internal/web/inbox"
)

// Answers keeps the answers given to the sessions' needs and the nonces
// of the answer links spent, so that a need is answered once and a link
// works once. The daemon's (StoreAnswers) keeps them in the store, where
// a restart of the daemon does not forget them; the console is their
// one writer.
type Answers interface {
	auth.Nonces
	// ClaimAnswer records a as the answer to its need (a.Session,
	// a.Since) unless one is recorded that has not expired; then it
	// returns that one and false.
	ClaimAnswer(ctx context.Context, a store.Answer) (store.Answer, bool, error)
	// ReleaseAnswer forgets the answer to session's need of since: typing
	// it failed.
	ReleaseAnswer(ctx context.Context, session string, since time.Time) error
	// RecentAnswers lists the answers not expired at now, oldest first.
	RecentAnswers(ctx context.Context, now time.Time) ([]store.Answer, error)
}

// AnswerTTL is how long the answer to a need is kept: far longer than an
// agent shows one need unchanged (a long tool run after "Yes"), since a
// need's since changes with every change of the session's activity.
const AnswerTTL = 7 * 24 * time.Hour

// pruneBatch is how many expired answers and nonces each write of them
// deletes at most: the records stay bounded without a loop of their own.
const pruneBatch = 100

// covers reports whether answer a settled item it: same incarnation, and
// the need began before the answer. A need that began after it (the
// agent moved on and asks again) is a new one.
func covers(a store.Answer, it inbox.Item) bool {
	return a.Incarnation == it.Incarnation && !it.Since.After(a.At)
}

// StoreAnswers keeps the answers and spent nonces in a store.
type StoreAnswers struct {
	Store store.Store
}

var _ Answers = StoreAnswers{}

// ClaimAnswer implements Answers; it prunes what expired by a.At first.
func (s StoreAnswers) ClaimAnswer(ctx context.Context, a store.Answer) (store.Answer, bool, error) {
	var (
		prior store.Answer
		ok    bool
	)
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.DeleteExpiredAnswers(a.At, pruneBatch); err != nil {
			return err
		}
		var err error
		if ok, err = tx.ClaimAnswer(a); err != nil || ok {
			return err
		}
		prior, err = tx.Answer(a.Session, a.Since)
		return err
	})
	if err != nil {
		return store.Answer{}, false, fmt.Errorf("web: record the answer to %s: %w", a.Session, err)
	}
	return prior, ok, nil
}

// ReleaseAnswer implements Answers.
func (s StoreAnswers) ReleaseAnswer(ctx context.Context, session string, since time.Time) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return tx.DeleteAnswer(session, since) })
}

// RecentAnswers implements Answers.
func (s StoreAnswers) RecentAnswers(ctx context.Context, now time.Time) ([]store.Answer, error) {
	var out []store.Answer
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.Answers(now)
		return err
	})
	return out, err
}

// SpendNonce implements auth.Nonces; it prunes what expired first.
func (s StoreAnswers) SpendNonce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	var ok bool
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.DeleteExpiredAnswers(time.Now(), pruneBatch); err != nil {
			return err
		}
		var err error
		ok, err = tx.SpendNonce(nonce, expires)
		return err
	})
	return ok, err
}

// NonceSpent implements auth.Nonces.
func (s StoreAnswers) NonceSpent(ctx context.Context, nonce string) (bool, error) {
	var ok bool
	err := s.Store.View(ctx, func(tx store.Tx) error {
		var err error
		ok, err = tx.NonceSpent(nonce)
		return err
	})
	return ok, err
}

// memAnswers keeps the answers and spent nonces in memory: a console
// without a store (tests, a console of its own) forgets them when it
// stops.
type memAnswers struct {
	// mu guards the fields below.
	mu      sync.Mutex
	answers map[need]store.Answer
	nonces  map[string]time.Time
}

// need is the key of an answer.
type need struct {
	session string
	since   int64
}

var _ Answers = (*memAnswers)(nil)

func newMemAnswers() *memAnswers {
	return &memAnswers{answers: map[need]store.Answer{}, nonces: map[string]time.Time{}}
}

func (m *memAnswers) ClaimAnswer(_ context.Context, a store.Answer) (store.Answer, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.answers {
		if !v.Expires.After(a.At) {
			delete(m.answers, k)
		}
	}
	k := need{a.Session, a.Since.UnixNano()}
	if prior, ok := m.answers[k]; ok {
		return prior, false, nil
	}
	m.answers[k] = a
	return store.Answer{}, true, nil
}

func (m *memAnswers) ReleaseAnswer(_ context.Context, session string, since time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.answers, need{session, since.UnixNano()})
	return nil
}

func (m *memAnswers) RecentAnswers(_ context.Context, now time.Time) ([]store.Answer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Answer
	for _, a := range m.answers {
		if a.Expires.After(now) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b store.Answer) int { return a.At.Compare(b.At) })
	return out, nil
}

func (m *memAnswers) SpendNonce(_ context.Context, nonce string, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for n, exp := range m.nonces {
		if now.After(exp) {
			delete(m.nonces, n)
		}
	}
	if _, ok := m.nonces[nonce]; ok {
		return false, nil
	}
	m.nonces[nonce] = expires
	return true, nil
}

func (m *memAnswers) NonceSpent(_ context.Context, nonce string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.nonces[nonce]
	return ok, nil
}
