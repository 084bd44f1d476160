package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"herd"
)

// TestRunHookLogsDroppedSessionID: a flag-shaped session_id is reported on
// stderr, in one line, and the hook still records the event (spooled here,
// as no daemon answers).
func TestRunHookLogsDroppedSessionID(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(herd.EnvSession, "w-0")
	t.Setenv(herd.EnvIncarnation, "inc-1")
	t.Setenv(herd.EnvSocket, filepath.Join(dir, "herd.sock"))
	var stderr bytes.Buffer
	payload := `{"hook_event_name":"PreToolUse","tool_name":"Bash","session_id":"--dangerously-skip-permissions"}`
	runHook(context.Background(), &globals{}, "", "", strings.NewReader(payload), &stderr)
	got := stderr.String()
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, "session") || !strings.Contains(got, "dropped") {
		t.Errorf("[flag id] expected one line saying the session_id was dropped, got %q", got)
	}
	if spooled, _ := filepath.Glob(filepath.Join(dir, "activity", "w-0.jsonl")); len(spooled) != 1 {
		t.Errorf("[flag id] expected the event spooled all the same, got %v", spooled)
	}
}
