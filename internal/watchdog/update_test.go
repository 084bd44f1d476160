package watchdog

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/proc"
	"herd/internal/status"
	"herd/internal/store/sqlite"
)

// TestBinaryCheckedThroughItsPath: an agent's executable is read once;
// while the file at its path is the file it runs, later ticks read only
// the path (once per binaryCheckEvery for all its agents), never the
// agent; once the path is replaced by a rename, the agent is read and
// found running a replaced binary.
func TestBinaryCheckedThroughItsPath(t *testing.T) {
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	boot, err := proc.BootID()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := New(Options{Status: status.New(st, "h", herd.RestartPolicy{}, log), Config: config.Default(), Proc: proc.Real(), BootID: boot, StateDir: t.TempDir(), Log: log})

	var items []watchItem
	for range 2 {
		cmd := exec.Command(bin, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		id, err := proc.Real().Identify(cmd.Process.Pid, boot)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, watchItem{Live: status.Live{S: herd.Session{Name: "w-0", Role: "w"}, Inc: herd.Incarnation{ID: "inc", Identity: id}}, m: &incWatch{}})
	}
	now := time.Now()
	w.watchBinaries(t.Context(), items, nil)
	for i, it := range items {
		if it.m.exePath != bin || it.m.exeID.Zero() || it.m.exeReplaced != "" {
			t.Fatalf("[first look, agent %d] expected the running file of %s remembered, got path %q id %v replaced %q", i, bin, it.m.exePath, it.m.exeID, it.m.exeReplaced)
		}
	}
	read := items[0].m.exeCheckedAt
	w.watchBinaries(t.Context(), items, nil) // the same file at the path: the agents are not read
	if got := items[0].m.exeCheckedAt; !got.Equal(read) {
		t.Errorf("[unchanged] expected the agent not read again, got a read at %v (first at %v)", got, read)
	}
	if len(w.exeStats) != 1 || !w.exeStats[bin].at.After(now) {
		t.Errorf("[unchanged] expected one stat of %s for both agents, got %+v", bin, w.exeStats)
	}

	tmp := bin + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	w.watchBinaries(t.Context(), items, nil) // within binaryCheckEvery of the last stat: not seen yet
	if items[0].m.exeReplaced != "" {
		t.Errorf("[replaced, stat fresh] expected no read before binaryCheckEvery, got %q", items[0].m.exeReplaced)
	}
	w.mu.Lock()
	w.exeStats[bin] = exeStat{at: time.Now().Add(-binaryCheckEvery), id: w.exeStats[bin].id}
	w.mu.Unlock()
	w.watchBinaries(t.Context(), items, nil)
	for i, it := range items {
		if it.m.exeReplaced != bin {
			t.Errorf("[replaced, agent %d] expected %s seen replaced, got %q", i, bin, it.m.exeReplaced)
		}
	}
}
