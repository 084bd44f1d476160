package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"herd"
	"herd/internal/api"
	"herd/internal/mcp"
)

func newMCPCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve herd's tools to an agent over MCP (stdio)",
		Long: `Serve herd's tools to an agent as an MCP server over stdin and stdout:
list_sessions, describe_session, read_output, send, wait, run, scale,
stop, restart and resume, each a call of the local daemon's API.

The calling session is HERD_SESSION (herd sets it in every agent it
launches). The daemon's [mcp] table bounds what the server may touch:
roles (the roles its tools see; default all) and verbs (which of run,
scale, stop, restart and resume it may call; default none). send and wait
reach only the roles the calling agent's role lists in manages, and an
agent never types into or stops itself unless its role manages itself.
Every call is an mcp_call event of the calling session; a refusal too
(reason mcp_refused). The daemon checks every call again, from who calls
on its socket (the agent whose process tree holds the caller), whatever
HERD_SESSION says: its answer is the one that holds.

A role with mcp = true gets this server added to its agents at launch.`,
		Example: `  claude mcp add herd -- herd mcp
  herd mcp --state-dir ~/.local/state/herd`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := mcpClient(g)
			if err != nil {
				return err
			}
			wd, _ := os.Getwd()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			s := mcp.New(mcp.Options{Daemon: c, Caller: os.Getenv(herd.EnvSession), Version: version, Workdir: wd, Log: log})
			return s.Run(cmd.Context(), s.Stdio())
		},
	}
}

// mcpClient is the daemon the server talks to: the state dir's when one
// is named, else, inside an agent, the daemon that launched it
// (HERD_SOCKET).
func mcpClient(g *globals) (*api.Client, error) {
	if sock := os.Getenv(herd.EnvSocket); sock != "" && g.stateDir == "" && os.Getenv("HERD_STATE_DIR") == "" {
		return api.NewClient(sock), nil
	}
	return g.client()
}
