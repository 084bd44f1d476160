package cells

import (
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

func TestClock(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-time.Hour), "14:00:00.000"},
		{time.Date(2026, 11, 22, 0, 0, 1, 0, time.Local), "00:00:01.000"},
		{time.Date(2026, 11, 21, 23, 59, 59, 0, time.Local), "2026-11-21 23:59:59"},
		{time.Date(2025, 11, 22, 15, 0, 0, 0, time.Local), "2025-11-22 15:00:00"},
	} {
		if got := Clock(tc.at, now); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.at, tc.want, got)
		}
	}
}

func TestState(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    api.SessionView
		want string
	}{
		{"plain", api.SessionView{State: herd.StateRunning}, "running"},
		{"escalated", api.SessionView{State: herd.StateFailed, Escalated: true}, "failed!"},
		{"markers", api.SessionView{State: herd.StateRunning, Escalated: true, Archived: true, Outdated: true}, "running!,ARCHIVED,OUTDATED"},
		{"unmanaged", api.SessionView{State: herd.StateUnknown, Unmanaged: true, Escalated: true}, "unmanaged"},
	} {
		if got := State(tc.v); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}

func TestActivity(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    api.SessionView
		want string
	}{
		{"working", api.SessionView{State: herd.StateRunning, Activity: herd.ActivityWorking}, "working"},
		{"stalled", api.SessionView{State: herd.StateStalled, Activity: herd.ActivityUnknown}, "unknown"},
		{"dead agent", api.SessionView{State: herd.StateBackoff, Activity: herd.ActivityUnknown}, "-"},
		{"failed", api.SessionView{State: herd.StateFailed, Activity: herd.ActivityIdle}, "-"},
		{"unmanaged", api.SessionView{State: herd.StateUnknown, Unmanaged: true, Activity: herd.ActivityUnknown}, "unknown"},
		{"empty", api.SessionView{State: herd.StateRunning}, "-"},
	} {
		if got := Activity(tc.v); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}

func TestLastExit(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	at := now.Add(-90 * time.Second)
	code := func(c int) *int { return &c }
	for _, tc := range []struct {
		name string
		e    *herd.Exit
		want string
	}{
		{"none", nil, "-"},
		{"signal", &herd.Exit{Signal: code(11), Reason: herd.ReasonSignal, At: at}, "signal 11 1m30s ago"},
		{"code", &herd.Exit{Code: code(1), Reason: herd.ReasonExitCode}, "code 1"},
		{"not found", &herd.Exit{Code: code(127), Reason: herd.ReasonExitCode}, "code 127 (command not found)"},
		{"not executable", &herd.Exit{Code: code(126), Reason: herd.ReasonExitCode}, "code 126 (not executable)"},
		{"other reason", &herd.Exit{Code: code(137), Reason: "killed"}, "code 137 (killed)"},
		{"reason only", &herd.Exit{Reason: "launch_failed", Message: "exec: no such file"}, "launch_failed: exec: no such file"},
	} {
		if got := LastExit(tc.e, now); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}

func TestDurationsAndSizes(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {59 * time.Second, "59s"}, {61 * time.Second, "1m1s"},
		{3*time.Hour + 5*time.Minute, "3h5m"}, {72 * time.Hour, "3d"},
	} {
		if got := ShortDur(tc.d); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.d, tc.want, got)
		}
	}
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{512 << 10, "512K"}, {200 << 20, "200.0M"}, {3 << 30, "3.0G"},
	} {
		if got := Bytes(tc.f); got != tc.want {
			t.Errorf("[%v] expected %q, got %q", tc.f, tc.want, got)
		}
	}
	if got := Clip("abcdefgh", 6); got != "abc..." {
		t.Errorf("[clip] expected %q, got %q", "abc...", got)
	}
	started := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	if got := AgeText(api.SessionView{State: herd.StateRunning, StartedAt: &started}, started.Add(2*time.Minute)); got != "2m0s" {
		t.Errorf("[age] expected 2m0s, got %q", got)
	}
	if got := AgeText(api.SessionView{State: herd.StateStopped, StartedAt: &started}, started.Add(time.Minute)); got != "-" {
		t.Errorf("[age of a stopped session] expected -, got %q", got)
	}
}
