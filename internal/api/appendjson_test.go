package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"herd"
)

// TestAppendSessionViews: the hand-written encoding of get sessions is
// byte for byte encoding/json's, for every field set and unset, strings
// it must escape and times in other zones.
func TestAppendSessionViews(t *testing.T) {
	at := time.Date(2026, 11, 22, 21, 0, 0, 123456789, time.UTC)
	zoned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -5*3600-30*60))
	code, sig := 3, 9
	full := SessionView{
		Name: "w-0", Role: "w", Index: 7, Host: "host-a", Incarnation: "1a2b", RuntimeKind: herd.RuntimeTmux,
		State: herd.StateRunning, Runtime: herd.Alive, Process: herd.Unknown, Activity: herd.ActivityBlocked,
		Restarts: 4, PID: 4242, StartedAt: &at, LastActivityAt: &zoned, BackoffUntil: &at, Attached: true,
		Exit:       &herd.Exit{Code: &code, Signal: &sig, Reason: "signal", At: zoned, Message: "never ran: <missing> & \"quoted\"\n"},
		StateSince: at, Archived: true, Escalated: true, Notified: true, Outdated: true, OutdatedReason: "role_changed: command, env",
		Unmanaged: true, Worktree: &Worktree{Path: "/src/app/.herd/worktrees/w-0", Branch: "herd/w-0", Dirty: true, Ahead: -1},
		Account: "/home/u/.claude-b \"x\"",
		Usage:   Usage{InputTokens: 1 << 40, OutputTokens: 7, CacheReadTokens: 123456789, CacheWriteTokens: 3, CostUSD: 0.000385},
	}
	tests := []struct {
		name  string
		views []SessionView
	}{
		{"nil", nil},
		{"empty", []SessionView{}},
		{"zero", []SessionView{{}}},
		{"full", []SessionView{full}},
		{"escapes", []SessionView{{Name: "a\tb\\c\"d", Role: "ünïcode ✓", Host: "x\u2028y", Incarnation: "<&>", RuntimeKind: "\x00\x1f\x7f",
			Exit: &herd.Exit{Reason: "bad \xff utf-8"}}}},
		{"fractions", []SessionView{
			{StateSince: at.Add(-123456789 + 120000000)}, {StateSince: at.Add(-123456788)}, {StateSince: at.Add(-123456789 + 100)},
			{StateSince: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}, {StateSince: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
			{StateSince: time.Date(2026, 3, 4, 5, 6, 7, 0, time.Local)}}},
		{"costs", []SessionView{
			{Usage: Usage{CostUSD: 1e-7}}, {Usage: Usage{CostUSD: 1.5e-12}}, {Usage: Usage{CostUSD: 12345.678}}, {Usage: Usage{CostUSD: 1e21}},
			{Usage: Usage{CostUSD: 1e-6}}, {Usage: Usage{CostUSD: 0.1 + 0.2}}, {Usage: Usage{CostUSD: 3e100}}}},
		{"several", []SessionView{full, {Name: "w-1", State: herd.StateStopped, Exit: &herd.Exit{At: at}}, {Name: "w-2", Unmanaged: true}}},
	}
	for _, tt := range tests {
		want, err := json.Marshal(tt.views)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendSessionViews(nil, tt.views); !bytes.Equal(got, want) {
			t.Errorf("[%s] expected\n%s\n… got\n%s", tt.name, want, got)
		}
	}
}

// BenchmarkSessionViews1000 compares the encodings of 1000 views.
func BenchmarkSessionViews1000(b *testing.B) {
	now := time.Now().UTC()
	code := 1
	vs := make([]SessionView, 1000)
	for i := range vs {
		vs[i] = SessionView{Name: herd.SessionName("w", i), Role: "w", Index: i, Host: "host", Incarnation: "19a2b3c4d5e6f7a8b9c0d", RuntimeKind: herd.RuntimeExec,
			State: herd.StateRunning, Runtime: herd.Alive, Process: herd.Alive, Activity: herd.ActivityIdle, PID: 12345, StartedAt: &now, LastActivityAt: &now,
			StateSince: now, Exit: &herd.Exit{Code: &code, Reason: herd.ReasonExitCode, At: now}}
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(vs)
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = AppendSessionViews(buf[:0], vs)
		}
	})
}
