package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// resolveCommand checks, before a role is declared, that its command can
// be started: a name is looked up in PATH (the role's own PATH when it
// sets one, else path), a path with a slash is taken relative to workdir,
// and either must be an executable file. The daemon runs the command on
// this host, so what is missing here would only crash-loop with code 127.
func resolveCommand(argv0, workdir string, env map[string]string, path string) (string, error) {
	if p, ok := env["PATH"]; ok {
		path = p
	}
	if info, err := os.Stat(workdir); err != nil || !info.IsDir() {
		return "", fmt.Errorf("workdir %s is not a directory", workdir)
	}
	if argv0 == "" {
		return "", errors.New("the command is empty")
	}
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(workdir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("command %s: %w", argv0, err)
		}
		return p, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workdir, dir)
		}
		p := filepath.Join(dir, argv0)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH", argv0)
}

// executable reports why p is not a file anyone may execute, or nil.
func executable(p string) error {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("no such file")
	case err != nil:
		return err
	case info.IsDir():
		return errors.New("is a directory")
	case info.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}
