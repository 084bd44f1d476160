package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
	"herd/internal/web"
)

func newWebCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "web",
		Short: "The console: log in from a browser",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newWebURLCmd(g))
	return cmd
}

func newWebURLCmd(g *globals) *cobra.Command {
	var (
		readOnly bool
		next     string
	)
	cmd := &cobra.Command{
		Use:   "url",
		Short: "Print a single-use login link to the console (valid 5 minutes)",
		Long: `Print a single-use login link to the daemon's console ([web] listen). Opening
it shows a page with a "Log in" button; the button logs the browser in (a
session cookie) and lands on --next. Opening the link spends nothing, so a
chat app's preview of it cannot log in. The link works once and for 5 minutes. --read-only logs in with the read scope: everything is
shown, nothing can be answered, typed or stopped. API clients use the token in
<state-dir>/web.token as "Authorization: Bearer TOKEN" instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res web.LinkResult
			req := web.LinkRequest{ReadOnly: readOnly, Next: next}
			if err := g.do(cmd.Context(), http.MethodPost, web.LinkPath, nil, req, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.URL)
			return nil
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "log in with the read scope (no answers, input or verbs)")
	cmd.Flags().StringVar(&next, "next", "/", "console path to open, e.g. /sessions/worker-0")
	return cmd
}
