package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestReadIdentity(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "herd", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.time", Value: "2026-11-22T15:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		name         string
		bi           *debug.BuildInfo
		ok           bool
		link, commit string
		dirty        string
		want         string
	}{
		{"full", bi, true, "", "", "", "herd v1.2.3 (commit 0123456789ab-dirty, 2026-11-22T15:00:00Z, go1.26.8, static)"},
		{"linker wins", bi, true, "v9", "beef", "false", "herd v9 (commit beef, 2026-11-22T15:00:00Z, go1.26.8, static)"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true, "", "", "", "herd (devel) (commit unknown, go1.26.8)"},
		{"no build info", nil, false, "", "", "", "herd (devel) (commit unknown, " + runtime.Version() + ")"},
	} {
		if got := readIdentity(tc.bi, tc.ok, tc.link, tc.commit, tc.dirty).String(); got != tc.want {
			t.Errorf("[%s] expected %q, got %q", tc.name, tc.want, got)
		}
	}
}
