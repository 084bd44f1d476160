package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/store"
)

// childDBEnv names the database a re-executed test binary appends events to.
const childDBEnv = "HERD_SQLITE_TEST_CHILD_DB"

// TestSIGKILLKeepsCommittedEvents runs a child process that appends events
// and reports each commit, kills it with SIGKILL mid-stream, and expects
// every reported event in the reopened database.
func TestSIGKILLKeepsCommittedEvents(t *testing.T) {
	if path := os.Getenv(childDBEnv); path != "" {
		appendForever(path)
		return
	}
	path := filepath.Join(t.TempDir(), "herd.db")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSIGKILLKeepsCommittedEvents$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const want = 40
	var committed []int64
	sc := bufio.NewScanner(out)
	for len(committed) < want && sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "committed ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatalf("child output %q: %v", sc.Text(), err)
		}
		committed = append(committed, n)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	_ = cmd.Wait()
	if len(committed) < want {
		t.Fatalf("child reported %d commits, want %d; stderr: %s", len(committed), want, stderr.String())
	}

	s := openAt(t, path)
	err = s.View(ctx, func(tx store.Tx) error {
		events, err := tx.Events(store.EventFilter{Session: "crash-0"})
		if err != nil {
			return err
		}
		have := make(map[int64]bool, len(events))
		for _, e := range events {
			have[e.ID] = true
		}
		for _, id := range committed {
			if !have[id] {
				t.Errorf("[committed event %d] expected it after SIGKILL, missing", id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("view: %v", err)
	}
}

// appendForever is the child: it appends events one transaction at a time
// and prints each id once committed, until it is killed.
func appendForever(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		e := herd.Event{Time: time.Now(), Session: "crash-0", Kind: herd.EventActivity,
			Data: map[string]any{"i": i}}
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(&e) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("committed %d\n", e.ID)
	}
}
