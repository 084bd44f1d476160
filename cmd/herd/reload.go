package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"
	"herd/internal/api"
)

func newReloadCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make the daemon read its config file again (as SIGHUP does)",
		Long: `Make the daemon read its config file again. The file is validated whole: with
any error nothing changes. [restart], [watchdog], [reaper], [escalation] and
[notify] apply at once, and the file's roles are applied as 'herd apply' would;
changed sections that are bound at start ([daemon], [store], [tmux], [probe],
[metrics]) are named, with why, and take effect when the daemon restarts.
Sending the daemon SIGHUP does the same.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res api.ReloadResult
			if err := g.do(cmd.Context(), http.MethodPost, "/v1/reload", nil, nil, &res); err != nil {
				return err
			}
			printReload(cmd.OutOrStdout(), res)
			return nil
		},
	}
}

// printReload prints what a reload changed.
func printReload(w io.Writer, res api.ReloadResult) {
	file := res.File
	if file == "" {
		file = "(no file: the defaults)"
	}
	fmt.Fprintf(w, "read %s\n", file)
	for _, s := range res.Applied {
		fmt.Fprintf(w, "[%s] applied\n", s)
	}
	for _, n := range res.NeedsRestart {
		fmt.Fprintf(w, "[%s] changed; takes effect when the daemon restarts (%s)\n", n.Section, n.Why)
	}
	printChanges(w, res.Roles, false)
	fmt.Fprintln(w, res.Message)
}
