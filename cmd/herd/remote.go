package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"herd/internal/api"
)

// remoteHost returns the host session name runs on when that is not the
// host of the daemon answering: its pane and its output files are there,
// so attach and logs run there. "" for a local session, and when the
// daemon cannot say (the local path then reports what is wrong).
func remoteHost(ctx context.Context, g *globals, name string) string {
	var v api.SessionView
	if err := getJSON(ctx, g, sessionPath(name, ""), &v); err != nil || v.Host == "" {
		return ""
	}
	var h api.Health
	if err := getJSON(ctx, g, "/v1/health", &h); err != nil || h.Host == "" || h.Host == v.Host {
		return ""
	}
	return v.Host
}

// runRemote runs `herd ARGS...` on host through fleet.ssh (["ssh", "-t"]
// by default), attached to this terminal: no listener of herd's own
// crosses hosts. ssh joins the remote words into one command line, so only
// checked names and numbers go in args.
func runRemote(cmd *cobra.Command, g *globals, host string, args ...string) error {
	cfg, _, err := g.loadConfig()
	if err != nil {
		return err
	}
	argv := append(append(append([]string{}, cfg.Fleet.SSH...), host, "herd"), args...)
	x := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
	x.Stdin, x.Stdout, x.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	if err := x.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s %s on host %s: exit %d", args[0], args[len(args)-1], host, ee.ExitCode())
		}
		return fmt.Errorf("%s on host %s: %w", args[0], host, err)
	}
	return nil
}
