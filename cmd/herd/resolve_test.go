package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "agent"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "script.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	for _, tc := range []struct {
		name    string
		argv0   string
		workdir string
		env     map[string]string
		path    string
		want    string // path found, or error text
		wantErr bool
	}{
		{"in PATH", "agent", dir, nil, "/nonexistent:" + bin, filepath.Join(bin, "agent"), false},
		{"role PATH wins", "agent", dir, map[string]string{"PATH": bin}, "/usr/bin", filepath.Join(bin, "agent"), false},
		{"relative PATH entry", "agent", dir, map[string]string{"PATH": "bin"}, "", filepath.Join(bin, "agent"), false},
		{"not in PATH", "no-such-binary", dir, nil, bin, `command "no-such-binary" not found in PATH`, true},
		{"relative to workdir", "./script.sh", dir, nil, "", filepath.Join(dir, "script.sh"), false},
		{"absolute", filepath.Join(bin, "agent"), dir, nil, "", filepath.Join(bin, "agent"), false},
		{"missing file", "./nope.sh", dir, nil, "", "command ./nope.sh: no such file", true},
		{"not executable", "./notes.txt", dir, nil, "", "command ./notes.txt: is not executable", true},
		{"directory", "./bin", dir, nil, "", "command ./bin: is a directory", true},
		{"workdir missing", "agent", filepath.Join(dir, "gone"), nil, bin, "is not a directory", true},
		{"empty", "", dir, nil, bin, "the command is empty", true},
	} {
		got, err := resolveCommand(tc.argv0, tc.workdir, tc.env, tc.path)
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("[%s] expected error %q, got %q %v", tc.name, tc.want, got, err)
		case !tc.wantErr && (err != nil || got != tc.want):
			t.Errorf("[%s] expected %q, got %q %v", tc.name, tc.want, got, err)
		}
	}
}
