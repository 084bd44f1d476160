package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
	"herd/internal/store/sqlite"
)

// TestEventTimesDated: `herd events` and `describe` show the clock alone
// for today's events and the date too for older ones. An event of two days
// ago is written into the daemon's store, as the daemon would have then.
func TestEventTimesDated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "alpha", "--runtime", "exec", "--", "sleep", "300")
	v := e.waitState("alpha-0", herd.StateRunning, 10*time.Second)

	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(e.dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	err = st.Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(&herd.Event{Time: old, Host: v.Host, Session: "alpha-0", Incarnation: v.Incarnation,
			Kind: herd.EventActivity, Reason: "hook", Message: "an event of two days ago"})
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	today := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d$`)
	for _, args := range [][]string{{"events", "--session", "alpha-0"}, {"describe", "session", "alpha-0"}} {
		out := e.must(args...)
		var sawOld, sawToday bool
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			switch {
			case strings.Contains(line, "an event of two days ago"):
				sawOld = len(f) > 1 && f[0] == old.Local().Format("2006-01-02") && f[1] == old.Local().Format("15:04:05")
			case strings.Contains(line, "spawned"):
				sawToday = len(f) > 0 && today.MatchString(f[0])
			}
		}
		if !sawOld || !sawToday {
			t.Errorf("[%v] expected the old event dated and today's with the clock alone (old %v, today %v):\n%s", args, sawOld, sawToday, out)
		}
	}
}

// TestExecCaptureBounded: an exec agent flooding its stdout keeps its
// capture files under the cap (8 MiB, rotated once), and `herd logs` still
// shows its latest lines.
func TestExecCaptureBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart)
	e.start()
	const capBytes = 8 << 20
	// About 40 MB, then a last line, then alive.
	e.must("run", "flood", "--runtime", "exec", "--", "sh", "-c",
		"yes 0123456789abcdef0123456789abcdef0123456789abcdef | head -c 40000000; echo; echo the-last-line; exec sleep 300")
	e.waitState("flood-0", herd.StateRunning, 10*time.Second)
	e.waitFor("the last line in logs", 60*time.Second, func() bool {
		return strings.Contains(e.try("logs", "flood-0", "--tail", "1"), "the-last-line")
	})
	var files []string
	var total int64
	err := filepath.Walk(filepath.Join(e.dir, "logs", "flood-0"), func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		files = append(files, filepath.Base(path))
		if fi.Size() > capBytes {
			t.Errorf("expected %s under the cap of %d bytes, got %d", path, capBytes, fi.Size())
		}
		if strings.Contains(fi.Name(), ".stdout") {
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 2*capBytes || total < capBytes {
		t.Errorf("expected the stdout capture rotated (between one and two caps on disk), got %d bytes in %v", total, files)
	}
	if !slices.ContainsFunc(files, func(n string) bool { return strings.HasSuffix(n, ".stdout.1") }) {
		t.Errorf("expected a rotated .stdout.1 file, got %v", files)
	}
}
