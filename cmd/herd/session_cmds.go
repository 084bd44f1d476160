package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"herd"
	"herd/internal/api"
	"herd/internal/runtime/tmux"
)

// post sends a command to the daemon and prints its one-line result.
func post(cmd *cobra.Command, g *globals, path string, body any) error {
	var res api.Result
	if err := g.do(cmd.Context(), http.MethodPost, path, nil, body, &res); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), res.Message)
	return nil
}

func newStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a session through the stop path; its role's replica count drops by one",
		Long: `Stop a session: its process identity is verified, its process group gets
SIGTERM (SIGKILL after a grace period), and one 'stopped' event records a
resume snapshot. 'herd resume NAME' brings it back. Stopping a session that
is already stopped is not an error.`,
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/stop"), nil)
		},
	}
}

func newResumeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "resume NAME",
		Short:             "Relaunch a stopped session from its snapshot (e.g. claude --resume <id>)",
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/resume"), nil)
		},
	}
}

func newArchiveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "archive NAME",
		Short:             "Mark a session done; the reaper stops it once detached",
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return post(cmd, g, sessionPath(args[0], "/archive"), nil)
		},
	}
}

func newScaleCmd(g *globals) *cobra.Command {
	var replicas int
	cmd := &cobra.Command{
		Use:               "scale ROLE --replicas N",
		Short:             "Change a role's desired replicas (re-arms failed sessions)",
		Example:           "  herd scale worker --replicas 3",
		Args:              roleArg,
		ValidArgsFunction: completeRoles(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("replicas") {
				return fmt.Errorf("scale: --replicas N is required")
			}
			if replicas < 0 {
				return fmt.Errorf("scale: --replicas must be >= 0")
			}
			return post(cmd, g, rolePath(args[0], "/scale"), api.ScaleRequest{Replicas: replicas})
		},
	}
	cmd.Flags().IntVar(&replicas, "replicas", 0, "desired replicas, 0 or more (required)")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "delete role NAME", Short: "Delete a role"}
	cmd.AddCommand(&cobra.Command{
		Use:               "role NAME",
		Short:             "Stop all of a role's sessions and forget the role and its crash history",
		Args:              roleArg,
		ValidArgsFunction: completeRoles(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res api.Result
			if err := g.do(cmd.Context(), http.MethodDelete, rolePath(args[0], ""), nil, nil, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Message)
			return nil
		},
	})
	requireSubcommand(cmd, "resource")
	return cmd
}

func newAttachCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "attach NAME",
		Short:             "Attach the terminal to a session's tmux pane (detach with C-b d)",
		Args:              sessionArg,
		ValidArgsFunction: completeSessions(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			// Ask the daemon first, so an exec or dead session gets a line
			// that says what to do instead of tmux's own error. With no
			// daemon, tmux alone decides: the pane may well be there.
			var v api.SessionDetail
			err := getJSON(cmd.Context(), g, sessionPath(name, ""), &v)
			switch {
			case err == nil:
				if err := attachable(v); err != nil {
					return err
				}
			case api.IsNotFound(err):
				return err
			}
			cfg, _, err := g.loadConfig()
			if err != nil {
				return err
			}
			x := attachCommand(cfg.Tmux.Binary, cfg.Tmux.Socket, name)
			x.Stdin, x.Stdout, x.Stderr = os.Stdin, os.Stdout, os.Stderr
			if err := x.Run(); err != nil {
				if _, ok := err.(*exec.ExitError); ok {
					return fmt.Errorf("attach %s: tmux could not attach (is it a live tmux session?)", name)
				}
				return fmt.Errorf("attach %s: %w", name, err)
			}
			return nil
		},
	}
}

// attachable says, in one line, why a session has no pane to attach to.
func attachable(v api.SessionDetail) error {
	switch {
	case v.RuntimeKind == herd.RuntimeExec:
		return fmt.Errorf("attach %s: an exec session has no terminal to attach to; see its output with 'herd logs -f %s'", v.Name, v.Name)
	case v.State == herd.StateStopped:
		return fmt.Errorf("attach %s: the session is stopped; 'herd resume %s' brings it back", v.Name, v.Name)
	case !v.State.Live():
		return fmt.Errorf("attach %s: the session is %s and has no live pane", v.Name, v.State)
	}
	return nil
}

// attachCommand is tmux attach-session for name. herd's sessions live on
// their own tmux server (-L socket), so attaching from inside the user's
// tmux is a nested client of another server, which is fine: $TMUX, which
// would make tmux refuse, is dropped. Inside herd's own server (or with
// socket "", the user's) it is kept, and tmux refuses to nest itself.
func attachCommand(binary, socket, name string) *exec.Cmd {
	x := (&tmux.Client{Binary: binary, Socket: socket}).AttachCommand(name)
	if inside := os.Getenv("TMUX"); inside != "" && socket != "" {
		path, _, _ := strings.Cut(inside, ",")
		if filepath.Base(path) != socket {
			x.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TMUX=") })
		}
	}
	return x
}
