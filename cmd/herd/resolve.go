package main

import "herd/internal/cmdpath"

// resolveCommand checks, before a role is declared, that its command can
// be started (see cmdpath.Resolve).
func resolveCommand(argv0, workdir string, env map[string]string, path string) (string, error) {
	return cmdpath.Resolve(argv0, workdir, env, path)
}
