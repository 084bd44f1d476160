package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"herd/internal/api"
)

func TestPrintSessionsFleet(t *testing.T) {
	views := sessionsFixture()
	if !spansHosts(views) || spansHosts(views[:2]) || spansHosts(nil) {
		t.Errorf("[spansHosts] expected true for h1+h2 only")
	}
	var b bytes.Buffer
	if err := printSessions(&b, views, printOpts{fleet: true, now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for i, want := range map[int]string{0: "NAME HOST ROLE STATE", 1: "worker-0 h1 worker running", 3: "batch-0 h2 batch failed"} {
		if got := strings.Join(strings.Fields(lines[i])[:4], " "); got != want {
			t.Errorf("[row %d] expected %q first, got %q", i, want, lines[i])
		}
	}
}

func TestPrintSessionsFleetWide(t *testing.T) {
	var b bytes.Buffer
	if err := printSessions(&b, sessionsFixture(), printOpts{fleet: true, wide: true, now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if n := strings.Count(lines[0], "HOST"); n != 1 || len(head) != len(row) {
		t.Errorf("expected HOST once and a field per column, got %q / %q", lines[0], lines[1])
	}
}

func TestRolesOnHost(t *testing.T) {
	views := []api.RoleView{
		{Live: 3, Ready: 2, Hosts: map[string]api.RoleCount{"a": {Live: 2, Ready: 2}, "b": {Live: 1}}},
		{Live: 1, Hosts: map[string]api.RoleCount{"b": {Live: 1}}},
		{},
	}
	views[0].Name, views[1].Name, views[2].Name = "w", "x", "y"
	if !rolesSpanHosts(views) || rolesSpanHosts(views[1:]) {
		t.Errorf("[rolesSpanHosts] expected true with a and b, false with b alone")
	}
	for _, tc := range []struct {
		host      string
		want      string
		wantLives []int
	}{
		{"", "w x y", []int{3, 1, 0}},
		{"a", "w", []int{2}},
		{"b", "w x", []int{1, 1}},
		{"c", "", nil},
	} {
		got := filterRolesOnHost(views, tc.host)
		var lives []int
		for _, v := range got {
			lives = append(lives, v.Live)
		}
		if names := strings.Join(roleNames(got), " "); names != tc.want || !slices.Equal(lives, tc.wantLives) {
			t.Errorf("[host %q] expected %q with live %v, got %q with live %v", tc.host, tc.want, tc.wantLives, names, lives)
		}
	}
	if got := roleHostsText(views[0]); got != "a:2,b:1" {
		t.Errorf("[hosts column] expected a:2,b:1, got %q", got)
	}
}

func TestPrintHosts(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	beat := now.Add(-4 * time.Second)
	old := now.Add(-2 * time.Minute)
	views := []api.HostView{
		{Name: "a", Daemon: "up", Sessions: 3, HeartbeatAt: &beat, StartedAt: &old, BootID: "0123456789abcdef", Version: "v1"},
		{Name: "b", Daemon: "stale", Sessions: 1, HeartbeatAt: &old, StartedAt: &old, BootID: "fedcba98"},
		{Name: "c", Daemon: "stale"},
	}
	var b bytes.Buffer
	if err := printHosts(&b, views, printOpts{now: now}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{"HOST DAEMON SESSIONS HEARTBEAT BOOT", "a up 3 4s ago 01234567", "b stale 1 2m0s ago fedcba98", "c stale 0 never -"}
	if len(lines) != len(want) {
		t.Fatalf("expected %d lines, got %q", len(want), b.String())
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Errorf("[line %d] expected %q, got %q", i, w, got)
		}
	}
}
