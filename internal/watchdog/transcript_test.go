package watchdog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/proc"
	"herd/internal/status"
)

// TestTranscriptGrowthIsProgress: a working agent whose transcript grows
// is making progress; one whose transcript stands still, or an idle one,
// is not; the file named by the hooks is followed.
func TestTranscriptGrowthIsProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &Watchdog{o: Options{Config: config.Default(), Proc: proc.FS{Root: t.TempDir()}}}
	t0 := time.Now().Add(-time.Hour)
	newItem := func(act herd.Activity) watchItem {
		m := &incWatch{kind: herd.AgentClaude, lastActivity: t0}
		m.hook.Activity, m.hook.TranscriptPath = act, path
		return watchItem{Live: status.Live{S: herd.Session{Name: "w-0"}}, m: m}
	}
	working, idle := newItem(herd.ActivityWorking), newItem(herd.ActivityIdle)
	items := []watchItem{working, idle}

	now := time.Now()
	w.watchTranscripts(items, now) // the first look sets the baseline
	w.watchTranscripts(items, now.Add(time.Second))
	if !working.m.lastActivity.Equal(t0) {
		t.Fatalf("[unchanged] expected no progress, got last activity %v", working.m.lastActivity)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"assistant"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	at := now.Add(2 * time.Second)
	w.watchTranscripts(items, at)
	if !working.m.lastActivity.Equal(at) {
		t.Errorf("[grew, working] expected progress at %v, got %v", at, working.m.lastActivity)
	}
	if !idle.m.lastActivity.Equal(t0) || idle.m.transcript.path != "" {
		t.Errorf("[idle] expected the transcript not looked at, got %+v", idle.m.transcript)
	}
	if working.m.transcript.path != path {
		t.Errorf("[path] expected the hook's transcript_path followed, got %q", working.m.transcript.path)
	}
}
