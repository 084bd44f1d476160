package storetest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"herd/internal/store"
)

// claimAnswer claims a in its own transaction and reports whether it won.
func claimAnswer(t *testing.T, s store.Store, a store.Answer) bool {
	t.Helper()
	var ok bool
	update(t, s, func(tx store.Tx) error {
		var err error
		ok, err = tx.ClaimAnswer(a)
		return err
	})
	return ok
}

// testAnswersOnce: a need (session, since) is claimed once; the first
// answer reads back whole (times in UTC) and stays after a second claim;
// another since or session is another need; an answer that expired is
// replaced by a new claim; a deleted one can be claimed again; Answers
// lists what has not expired, by time answered; a claim without its key
// or times is refused.
func testAnswersOnce(t *testing.T, s store.Store) {
	first := store.Answer{Session: "w-0", Since: at(0), Incarnation: "i1", Who: "browser:ab", Choice: "option Yes",
		Nonce: "n1", At: at(10), Expires: at(100)}
	if !claimAnswer(t, s, first) {
		t.Fatalf("[first claim] expected true, got false")
	}
	second := first
	second.Who, second.Choice, second.Nonce, second.At = "token", "text", "", at(20)
	if claimAnswer(t, s, second) {
		t.Errorf("[second claim of the need] expected false, got true")
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Answer("w-0", at(0).In(time.UTC))
		if err != nil {
			return err
		}
		diff(t, "first answer kept", first, got)
		checkUTC(t, "answer", &got.Since, &got.At, &got.Expires)
		if _, err := tx.Answer("w-0", at(1)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[another since] expected ErrNotFound, got %v", err)
		}
		return nil
	})
	later := first
	later.Since, later.At, later.Expires = at(30), at(40), at(200)
	other := first
	other.Session, other.At, other.Expires = "w-1", at(5), at(50)
	if !claimAnswer(t, s, later) || !claimAnswer(t, s, other) {
		t.Errorf("[another need] expected claims of another since and another session")
	}
	view(t, s, func(tx store.Tx) error {
		all, err := tx.Answers(at(50))
		if err != nil {
			return err
		}
		diff(t, "answers not expired at 50", []store.Answer{first, later}, all)
		all, err = tx.Answers(at(0))
		if err != nil {
			return err
		}
		diff(t, "answers at 0, by time answered", []store.Answer{other, first, later}, all)
		return nil
	})

	// Expired: the need may be answered again.
	again := other
	again.Who, again.At, again.Expires = "link:n2", at(50), at(150)
	if !claimAnswer(t, s, again) {
		t.Errorf("[claim once expired] expected true, got false")
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Answer("w-1", other.Since)
		if err != nil {
			return err
		}
		diff(t, "expired answer replaced", again, got)
		return nil
	})

	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DeleteAnswer("w-0", at(0)), tx.DeleteAnswer("never", at(0)))
	})
	if !claimAnswer(t, s, second) {
		t.Errorf("[claim after delete] expected true, got false")
	}

	for _, bad := range []store.Answer{
		{Since: at(0), At: at(1), Expires: at(2)},
		{Session: "w-0", At: at(1), Expires: at(2)},
		{Session: "w-0", Since: at(0), Expires: at(2)},
		{Session: "w-0", Since: at(0), At: at(1)},
	} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { _, err := tx.ClaimAnswer(bad); return err }); err == nil {
			t.Errorf("expected an error claiming %+v", bad)
		}
	}
}

// testAnswerClaimConcurrent: of many answers to one need at once, one
// wins, and it is the one recorded.
func testAnswerClaimConcurrent(t *testing.T, s store.Store) {
	const n = 20
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards the fields below
		wins  []string
		errs  []error
		c     = ctx(t)
		start = make(chan struct{})
	)
	for i := range n {
		who := "p" + strconv.Itoa(i)
		wg.Go(func() {
			<-start
			var ok bool
			err := s.Update(c, func(tx store.Tx) error {
				var err error
				ok, err = tx.ClaimAnswer(store.Answer{Session: "w-0", Since: at(0), Who: who, At: at(1), Expires: at(100)})
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				wins = append(wins, who)
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("[concurrent answers] unexpected errors: %v", err)
	}
	if len(wins) != 1 {
		t.Fatalf("[concurrent answers] expected exactly 1 winner, got %d: %v", len(wins), wins)
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Answer("w-0", at(0))
		if err != nil {
			return err
		}
		if got.Who != wins[0] {
			t.Errorf("[concurrent answers] expected the winner %s recorded, got %s", wins[0], got.Who)
		}
		return nil
	})
}

// testSpentNonces: a nonce is spent once and reads as spent; expired
// answers and nonces are deleted in batches of at most limit, answers
// first, and only those expired.
func testSpentNonces(t *testing.T, s store.Store) {
	spend := func(nonce string, exp time.Time) bool {
		t.Helper()
		var ok bool
		update(t, s, func(tx store.Tx) error {
			var err error
			ok, err = tx.SpendNonce(nonce, exp)
			return err
		})
		return ok
	}
	spent := func(nonce string) bool {
		t.Helper()
		var ok bool
		view(t, s, func(tx store.Tx) error {
			var err error
			ok, err = tx.NonceSpent(nonce)
			return err
		})
		return ok
	}
	if spent("a") {
		t.Errorf("[unspent] expected false, got true")
	}
	if !spend("a", at(10)) || !spent("a") {
		t.Errorf("[first spend] expected spent")
	}
	if spend("a", at(20)) {
		t.Errorf("[second spend] expected false, got true")
	}
	if !spend("b", at(30)) || !spend("c", at(100)) {
		t.Errorf("[other nonces] expected spent")
	}
	for _, bad := range []func(tx store.Tx) error{
		func(tx store.Tx) error { _, err := tx.SpendNonce("", at(10)); return err },
		func(tx store.Tx) error { _, err := tx.SpendNonce("d", time.Time{}); return err },
		func(tx store.Tx) error { _, err := tx.DeleteExpiredAnswers(at(0), 0); return err },
	} {
		if err := s.Update(ctx(t), bad); err == nil {
			t.Errorf("expected an error for bad input")
		}
	}
	if !claimAnswer(t, s, store.Answer{Session: "w-0", Since: at(0), At: at(1), Expires: at(5)}) ||
		!claimAnswer(t, s, store.Answer{Session: "w-1", Since: at(0), At: at(1), Expires: at(500)}) {
		t.Fatalf("[answers] expected claimed")
	}
	prune := func(limit int) int {
		t.Helper()
		var n int
		update(t, s, func(tx store.Tx) error {
			var err error
			n, err = tx.DeleteExpiredAnswers(at(50), limit)
			return err
		})
		return n
	}
	if n := prune(2); n != 2 {
		t.Errorf("[prune, limit 2] expected 2 deleted, got %d", n)
	}
	if n := prune(10); n != 1 {
		t.Errorf("[prune the rest] expected 1 deleted, got %d", n)
	}
	if n := prune(10); n != 0 {
		t.Errorf("[prune again] expected 0 deleted, got %d", n)
	}
	if spent("a") || spent("b") || !spent("c") {
		t.Errorf("[after prune] expected a and b forgotten, c kept")
	}
	view(t, s, func(tx store.Tx) error {
		if _, err := tx.Answer("w-0", at(0)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[expired answer pruned] expected ErrNotFound, got %v", err)
		}
		if _, err := tx.Answer("w-1", at(0)); err != nil {
			t.Errorf("[answer not expired kept] expected it, got %v", err)
		}
		return nil
	})
}
