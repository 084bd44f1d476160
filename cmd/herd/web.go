package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"herd/internal/users"
	"herd/internal/web"
)

func newWebCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "web",
		Short: "The console: log in from a browser; its people and their tokens",
		Long: `The daemon's web console ([web] listen). 'herd web url' prints a single-use
login link; 'herd web user' keeps the people who log in by name, so that
every answer and action names them (data.by of answered and console
events); 'herd web token --user NAME' gives one of them a bearer token for
the console's API. The machine's own token stays <state-dir>/web.token.`,
		Example: `  herd web url
  herd web user add alice
  herd web user add rob --read-only
  herd web url --user alice
  herd web token --user rob
  herd web user remove alice`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newWebURLCmd(g), newWebTokenCmd(g), newWebUserCmd(g))
	return cmd
}

func newWebURLCmd(g *globals) *cobra.Command {
	var (
		readOnly bool
		next     string
		user     string
	)
	cmd := &cobra.Command{
		Use:   "url",
		Short: "Print a single-use login link to the console (valid 5 minutes)",
		Long: `Print a single-use login link to the daemon's console ([web] listen). Opening
it shows a page with a "Log in" button; the button logs the browser in (a
session cookie) and lands on --next. Opening the link spends nothing, so a
chat app's preview of it cannot log in. The link works once and for 5 minutes. --read-only logs in with the read scope: everything is
shown, nothing can be answered, typed or stopped. --user NAME logs in a user
of 'herd web user add': every action is recorded as theirs, read-only when
the user is, and the browser session ends when the user is removed. API
clients use a token instead ('herd web token --user NAME', or the machine's
own in <state-dir>/web.token) as "Authorization: Bearer TOKEN".`,
		Example: `  herd web url
  herd web url --read-only --next /sessions/worker-0
  herd web url --user alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res web.LinkResult
			if cmd.Flags().Changed("user") {
				if err := users.ValidName(user); err != nil {
					return fmt.Errorf("web url: %w", err)
				}
			}
			req := web.LinkRequest{ReadOnly: readOnly, Next: next, User: user}
			if err := g.do(cmd.Context(), http.MethodPost, web.LinkPath, nil, req, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.URL)
			return nil
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "log in with the read scope (no answers, input or verbs)")
	cmd.Flags().StringVar(&next, "next", "/", "console path to open, e.g. /sessions/worker-0")
	cmd.Flags().StringVar(&user, "user", "", "log in as this user (herd web user add)")
	return cmd
}
