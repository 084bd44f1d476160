package cgroup

import (
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
)

func TestStopMarkedEndsDetachedTree(t *testing.T) {
	boot := bootID(t)
	fsys := proc.Real()
	marker := "inc-tree-" + strings.ReplaceAll(t.Name(), "/", "-")
	cleanupMarked(t, boot, marker)

	canary := start(t, "", nil, "sleep", "1000")
	other := start(t, "inc-other", nil, "sleep", "1000")
	agent := start(t, marker, nil, "sh", "-c", treeScript)

	waitFor(t, "the tree of 52 processes", 15*time.Second, func() bool {
		return treeUp(boot, marker)
	})
	ids, err := Marked(fsys, boot, marker)
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[int]bool{}
	for _, id := range ids {
		st, err := fsys.Stat(id.PID)
		if err == nil {
			sessions[st.Session] = true
		}
	}
	if len(sessions) < 2 {
		t.Fatalf("expected a setsid'd process in a session of its own, got sessions %v", sessions)
	}
	canaryID, _ := fsys.Identify(canary.cmd.Process.Pid, boot)
	otherID, _ := fsys.Identify(other.cmd.Process.Pid, boot)

	const grace = 1 * time.Second
	begin := time.Now()
	res, err := StopMarked(t.Context(), fsys, boot, marker, grace)
	took := time.Since(begin)
	if err != nil {
		t.Fatalf("stop: %v (%+v)", err, res)
	}
	t.Logf("marker fallback: stopped %d processes (%d needed SIGKILL) in %v, grace %v", res.Found, res.Killed, took, grace)
	if res.Found != treeSize || res.Killed != treeSize {
		t.Errorf("expected %d found and all SIGKILLed (they ignore SIGTERM), got %+v", treeSize, res)
	}
	// grace + 1s on an idle machine; a loaded one scans /proc far slower.
	if took > grace+3*time.Second {
		t.Errorf("expected the tree gone within grace + 3s, took %v", took)
	}
	if left, _ := Marked(fsys, boot, marker); len(left) != 0 {
		t.Errorf("expected no marked process left, got %d", len(left))
	}
	select {
	case <-agent.reaped:
	case <-time.After(5 * time.Second):
		t.Error("expected the agent itself to have exited")
	}
	for name, id := range map[string]herd.Identity{"canary": canaryID, "other incarnation": otherID} {
		if got := fsys.Check(id, boot); got != herd.Alive {
			t.Errorf("[%s] expected untouched and alive, got %s", name, got)
		}
	}
}

func TestStopMarkedPolite(t *testing.T) {
	// A tree that obeys SIGTERM ends without SIGKILL, well before the grace.
	boot := bootID(t)
	fsys := proc.Real()
	marker := "inc-polite"
	cleanupMarked(t, boot, marker)
	start(t, marker, nil, "sh", "-c", "sleep 1000 & setsid sleep 1000 & wait")
	waitFor(t, "three processes", 10*time.Second, func() bool {
		ids, _ := Marked(fsys, boot, marker)
		return len(ids) == 3
	})
	res, err := StopMarked(t.Context(), fsys, boot, marker, 10*time.Second)
	if err != nil || res.Found != 3 || res.Killed != 0 || res.Took > 5*time.Second {
		t.Fatalf("expected 3 found, none killed, quickly; got %+v (%v)", res, err)
	}
}

func TestMarkedRejectsEmpty(t *testing.T) {
	if _, err := Marked(proc.Real(), "boot", ""); err == nil {
		t.Fatal("expected an error for an empty marker (it would match nothing or everything)")
	}
}

func TestSumRSSAndOverMemory(t *testing.T) {
	const page = 4096
	cases := []struct {
		name  string
		stats []proc.Stat
		max   int64
		rss   int64
		over  bool
	}{
		{"no processes", nil, 64 << 20, 0, false},
		{"one under", []proc.Stat{{State: 'S', RSSPages: 1000}}, 64 << 20, 1000 * page, false},
		{"tree over", []proc.Stat{{State: 'S', RSSPages: 10000}, {State: 'R', RSSPages: 8000}}, 64 << 20, 18000 * page, true},
		{"exactly at the limit", []proc.Stat{{State: 'S', RSSPages: 16384}}, 64 << 20, 64 << 20, false},
		{"zombie holds nothing", []proc.Stat{{State: 'Z', RSSPages: 99999}, {State: 'S', RSSPages: 1}}, 64 << 20, page, false},
		{"garbled negative ignored", []proc.Stat{{State: 'S', RSSPages: -5}}, 1, 0, false},
		{"no limit", []proc.Stat{{State: 'S', RSSPages: 1 << 30}}, 0, (1 << 30) * page, false},
	}
	for _, c := range cases {
		rss := SumRSS(c.stats, page)
		if rss != c.rss || OverMemory(rss, c.max) != c.over {
			t.Errorf("[%s] expected rss %d over %v, got %d %v", c.name, c.rss, c.over, rss, OverMemory(rss, c.max))
		}
	}
}

func TestMarkedMemoryReal(t *testing.T) {
	boot := bootID(t)
	fsys := proc.Real()
	marker := "inc-hog"
	cleanupMarked(t, boot, marker)
	const mb = 96
	hogCmd := startHog(t, marker, nil, mb)
	var mem TreeMemory
	waitFor(t, "the hog to reach its size", 30*time.Second, func() bool {
		mem, _ = MarkedMemory(fsys, boot, marker)
		return mem.RSS >= mb<<20
	})
	t.Logf("marker fallback: measured RSS of the tree %d MiB over %d processes", mem.RSS>>20, mem.Procs)
	if !OverMemory(mem.RSS, 64<<20) {
		t.Fatalf("expected %d bytes to break memory_max 64M", mem.RSS)
	}
	res, err := StopMarked(t.Context(), fsys, boot, marker, time.Second)
	if err != nil || res.Found < 1 {
		t.Fatalf("expected the hog stopped, got %+v (%v)", res, err)
	}
	<-hogCmd.reaped
}
