package sqltx

import (
	"fmt"
	"strings"
	"time"

	"herd/internal/store"
)

var answerCols = []string{"session", "since", "incarnation", "who", "choice", "nonce", "answered_at", "expires"}

var (
	answerSelect = "SELECT " + strings.Join(answerCols, ", ") + " FROM answers"
	answerClaim  = "INSERT INTO answers (" + strings.Join(answerCols, ", ") + ") VALUES (" + placeholders(len(answerCols)) + ")" +
		" ON CONFLICT (session, since) DO NOTHING"
)

// ClaimAnswer records a unless its need has an answer that has not
// expired by a.At. An expired one is replaced.
func (t *tx) ClaimAnswer(a store.Answer) (bool, error) {
	if a.Session == "" || a.Since.IsZero() || a.At.IsZero() || a.Expires.IsZero() {
		return false, fmt.Errorf("%s: claim answer: session, since, at and expires are required, got %+v", t.name, a)
	}
	var ns [3]int64
	for i, v := range []time.Time{a.Since, a.At, a.Expires} {
		n, err := nanos(v)
		if err != nil {
			return false, fmt.Errorf("%s: claim answer of %s: %w", t.name, a.Session, err)
		}
		ns[i] = n
	}
	if _, err := t.exec("DELETE FROM answers WHERE session = ? AND since = ? AND expires <= ?", a.Session, ns[0], ns[1]); err != nil {
		return false, fmt.Errorf("%s: claim answer of %s: %w", t.name, a.Session, err)
	}
	res, err := t.exec(answerClaim, a.Session, ns[0], a.Incarnation, a.Who, a.Choice, a.Nonce, ns[1], ns[2])
	if err != nil {
		return false, fmt.Errorf("%s: claim answer of %s: %w", t.name, a.Session, err)
	}
	n, err := t.affected(res, "claim answer")
	return n == 1, err
}

// Answer returns the answer to session's need that began at since.
func (t *tx) Answer(session string, since time.Time) (store.Answer, error) {
	a, err := scanAnswer(t.queryRow(answerSelect+" WHERE session = ? AND since = ?", session, clampNanos(since)))
	if err != nil {
		return a, t.notFound(err, "answer", session+" since "+since.UTC().Format(time.RFC3339Nano))
	}
	return a, nil
}

// Answers lists the answers that expire after now, by time answered.
func (t *tx) Answers(now time.Time) ([]store.Answer, error) {
	return collect(t, "answers", scanAnswer, answerSelect+" WHERE expires > ? ORDER BY answered_at, session, since", clampNanos(now))
}

// DeleteAnswer forgets the answer to session's need of since.
func (t *tx) DeleteAnswer(session string, since time.Time) error {
	if _, err := t.exec("DELETE FROM answers WHERE session = ? AND since = ?", session, clampNanos(since)); err != nil {
		return fmt.Errorf("%s: delete answer of %s: %w", t.name, session, err)
	}
	return nil
}

func scanAnswer(sc scanner) (store.Answer, error) {
	var (
		a                      store.Answer
		since, at, expiresNano int64
	)
	err := sc.Scan(&a.Session, &since, &a.Incarnation, &a.Who, &a.Choice, &a.Nonce, &at, &expiresNano)
	a.Since, a.At, a.Expires = fromNanos(since), fromNanos(at), fromNanos(expiresNano)
	return a, err
}

// SpendNonce records nonce spent until expires unless it is.
func (t *tx) SpendNonce(nonce string, expires time.Time) (bool, error) {
	if nonce == "" || expires.IsZero() {
		return false, fmt.Errorf("%s: spend nonce: a nonce and its expiry are required", t.name)
	}
	exp, err := nanos(expires)
	if err != nil {
		return false, fmt.Errorf("%s: spend nonce: %w", t.name, err)
	}
	res, err := t.exec("INSERT INTO answer_nonces (nonce, expires) VALUES (?, ?) ON CONFLICT (nonce) DO NOTHING", nonce, exp)
	if err != nil {
		return false, fmt.Errorf("%s: spend nonce: %w", t.name, err)
	}
	n, err := t.affected(res, "spend nonce")
	return n == 1, err
}

// NonceSpent reports whether nonce is recorded as spent.
func (t *tx) NonceSpent(nonce string) (bool, error) {
	var n int64
	if err := t.queryRow("SELECT count(*) FROM answer_nonces WHERE nonce = ?", nonce).Scan(&n); err != nil {
		return false, fmt.Errorf("%s: nonce spent: %w", t.name, err)
	}
	return n > 0, nil
}

// DeleteExpiredAnswers deletes at most limit answers and nonces that
// expired before now, oldest first, answers first.
func (t *tx) DeleteExpiredAnswers(now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%s: delete expired answers: limit %d, want > 0", t.name, limit)
	}
	cut := clampNanos(now)
	res, err := t.exec("DELETE FROM answers WHERE (session, since) IN"+
		" (SELECT session, since FROM answers WHERE expires < ? ORDER BY expires LIMIT ?)", cut, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: delete expired answers: %w", t.name, err)
	}
	n, err := t.affected(res, "delete expired answers")
	if err != nil || n >= limit {
		return n, err
	}
	res, err = t.exec("DELETE FROM answer_nonces WHERE nonce IN"+
		" (SELECT nonce FROM answer_nonces WHERE expires < ? ORDER BY expires LIMIT ?)", cut, limit-n)
	if err != nil {
		return n, fmt.Errorf("%s: delete expired nonces: %w", t.name, err)
	}
	m, err := t.affected(res, "delete expired nonces")
	return n + m, err
}
