package worktree

import (
	"testing"
	"time"
)

// TestStatusCache: a session without a worktree reads nil; with one, its
// status; a change is not seen while the cached status is within its TTL
// (views read git at most once per tick) and is seen once it is past it;
// Forget drops sessions no longer present.
func TestStatusCache(t *testing.T) {
	repo := newRepo(t)
	m := &Manager{}
	opts := Options{Workdir: repo, Session: "w-0"}
	if st, err := (&StatusCache{M: m}).Get(t.Context(), opts); st != nil || err != nil {
		t.Fatalf("[no worktree] expected nil, nil … got %+v, %v", st, err)
	}
	wt, err := m.Ensure(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	long := &StatusCache{M: m, TTL: time.Hour}
	st, err := long.Get(t.Context(), opts)
	if err != nil || st == nil || st.Path != wt.Path || st.Branch != "herd/w-0" || st.Dirty || st.Ahead != 0 {
		t.Fatalf("[clean] expected the clean worktree … got %+v, %v", st, err)
	}
	write(t, wt.Path, "notes.txt", "work\n")
	if st, _ := long.Get(t.Context(), opts); st == nil || st.Dirty {
		t.Errorf("[within the TTL] expected the cached clean status … got %+v", st)
	}
	short := &StatusCache{M: m, TTL: time.Nanosecond}
	short.Get(t.Context(), opts)
	if st, _ := short.Get(t.Context(), opts); st == nil || !st.Dirty {
		t.Errorf("[past the TTL] expected dirty … got %+v", st)
	}
	long.Forget(func(string) bool { return false })
	long.mu.Lock()
	n := len(long.entries)
	long.mu.Unlock()
	if n != 0 {
		t.Errorf("[forget] expected no entries … got %d", n)
	}
}
