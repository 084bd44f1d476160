package storetest

import (
	"errors"
	"testing"

	"herd/internal/errs"
	"herd/internal/store"
)

// testUsers: a user reads back whole (time in UTC) with a Seq; a second
// user of the name is a conflict; Users lists by name; a missing user is
// ErrNotFound; a user without a name or time is refused.
func testUsers(t *testing.T, s store.Store) {
	bob := store.User{Name: "bob", ReadOnly: true, CreatedAt: at(1)}
	alice := store.User{Name: "alice", CreatedAt: at(2)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.AddUser(&bob); err != nil {
			return err
		}
		return tx.AddUser(&alice)
	})
	if bob.Seq <= 0 || alice.Seq <= bob.Seq {
		t.Errorf("[seqs] expected increasing seqs above 0, got bob %d alice %d", bob.Seq, alice.Seq)
	}
	err := s.Update(ctx(t), func(tx store.Tx) error {
		return tx.AddUser(&store.User{Name: "alice", ReadOnly: true, CreatedAt: at(3)})
	})
	if errs.KindOf(err) != errs.Conflict {
		t.Errorf("[add an existing name] expected a conflict, got %v", err)
	}
	for _, u := range []store.User{{Name: "", CreatedAt: at(1)}, {Name: "carol"}} {
		if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddUser(&u) }); err == nil {
			t.Errorf("[add %+v] expected an error, got none", u)
		}
	}
	view(t, s, func(tx store.Tx) error {
		got, err := tx.User("alice")
		if err != nil {
			return err
		}
		diff(t, "alice", alice, got)
		checkUTC(t, "user", &got.CreatedAt)
		all, err := tx.Users()
		if err != nil {
			return err
		}
		diff(t, "users by name", []store.User{alice, bob}, all)
		if _, err := tx.User("carol"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[missing user] expected ErrNotFound, got %v", err)
		}
		return nil
	})
}

// testUserTokens: a token's hash finds its user; another hash finds
// none; deleting the user deletes its tokens, and a user added again
// under the name is another (a new Seq) that the old hash does not find;
// deleting a missing user is not an error.
func testUserTokens(t *testing.T, s store.Store) {
	alice := store.User{Name: "alice", CreatedAt: at(0)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.AddUser(&alice); err != nil {
			return err
		}
		if err := tx.AddUserToken("h1", alice.Seq, at(1)); err != nil {
			return err
		}
		return tx.AddUserToken("h2", alice.Seq, at(2))
	})
	if err := s.Update(ctx(t), func(tx store.Tx) error { return tx.AddUserToken("h1", alice.Seq, at(3)) }); err == nil {
		t.Errorf("[a hash recorded twice] expected an error, got none")
	}
	view(t, s, func(tx store.Tx) error {
		for _, h := range []string{"h1", "h2"} {
			got, err := tx.TokenUser(h)
			if err != nil {
				return err
			}
			diff(t, "token "+h, alice, got)
		}
		if _, err := tx.TokenUser("h3"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("[unknown hash] expected ErrNotFound, got %v", err)
		}
		return nil
	})
	again := store.User{Name: "alice", ReadOnly: true, CreatedAt: at(5)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.DeleteUser("alice"); err != nil {
			return err
		}
		if err := tx.DeleteUser("nobody"); err != nil {
			return err
		}
		return tx.AddUser(&again)
	})
	if again.Seq == alice.Seq {
		t.Errorf("[added again] expected a new seq, got the old one %d", again.Seq)
	}
	view(t, s, func(tx store.Tx) error {
		for _, h := range []string{"h1", "h2"} {
			if u, err := tx.TokenUser(h); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("[token %s of the deleted user] expected ErrNotFound, got %+v %v", h, u, err)
			}
		}
		got, err := tx.User("alice")
		if err != nil {
			return err
		}
		diff(t, "alice added again", again, got)
		return nil
	})
}
