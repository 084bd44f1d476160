package resources

import (
	"context"
	"os"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/status"
)

// fakeLive lists fixed live sessions.
type fakeLive struct{ live []status.Live }

func (f *fakeLive) Live(context.Context) ([]herd.Session, []status.Live, error) {
	return nil, f.live, nil
}

// self is a live session whose agent is this test's process.
func self(t *testing.T, name, inc string) status.Live {
	t.Helper()
	boot, err := proc.BootID()
	if err != nil {
		t.Skip("no boot id:", err)
	}
	id, err := proc.Real().Identify(os.Getpid(), boot)
	if err != nil {
		t.Fatal(err)
	}
	return status.Live{S: herd.Session{Name: name}, Inc: herd.Incarnation{ID: inc, Identity: id}}
}

func TestSample(t *testing.T) {
	boot, _ := proc.BootID()
	live := &fakeLive{live: []status.Live{self(t, "w-0", "i1"),
		// Another process's pid with a wrong start time: never sampled.
		{S: herd.Session{Name: "w-1"}, Inc: herd.Incarnation{ID: "i2", Identity: herd.Identity{PID: os.Getppid(), StartTime: 1, BootID: boot}}}}}
	s := New(Options{Live: live, BootID: boot, Every: 30 * time.Second, Points: 3})
	ctx := context.Background()
	t0 := time.Now()
	for i := range 5 {
		// Spend some CPU between samples.
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		}
		s.Sample(ctx, t0.Add(time.Duration(i)*30*time.Second))
	}
	got := s.Series("w-0")
	if len(got) != 3 {
		t.Fatalf("[ring] expected the last 3 samples … got %d", len(got))
	}
	for i, p := range got {
		if p.RSSBytes <= 0 || p.CPUPercent == nil || *p.CPUPercent < 0 {
			t.Errorf("[sample %d] expected rss and a cpu percentage … got %+v", i, p)
		}
		if want := t0.Add(time.Duration(i+2) * 30 * time.Second).UTC(); !p.At.Equal(want) {
			t.Errorf("[order %d] expected %v … got %v", i, want, p.At)
		}
	}
	if n := len(s.Series("w-1")); n != 0 {
		t.Errorf("[unverified] expected no samples of a pid that is not the agent … got %d", n)
	}

	// A new incarnation: its first sample has no CPU percentage (no base).
	live.live = []status.Live{self(t, "w-0", "i3")}
	s.Sample(ctx, t0.Add(5*30*time.Second))
	got = s.Series("w-0")
	if last := got[len(got)-1]; last.CPUPercent != nil {
		t.Errorf("[new incarnation] expected no cpu percentage … got %v", *last.CPUPercent)
	}

	// Gone from the live set: kept for the window, then forgotten.
	live.live = nil
	s.Sample(ctx, t0.Add(7*30*time.Second))
	if len(s.Series("w-0")) == 0 {
		t.Errorf("[ended] expected the samples kept within the window … gone")
	}
	s.Sample(ctx, t0.Add(10*30*time.Second))
	if n := len(s.Series("w-0")); n != 0 {
		t.Errorf("[ended] expected the samples forgotten after the window … got %d", n)
	}
}
