package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/users"
)

// newWebTokenCmd is `herd web token --user NAME`: a bearer token for one
// person, printed once.
func newWebTokenCmd(g *globals) *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "token --user NAME",
		Short: "Print a new bearer token for a user of the console (shown once)",
		Long: `Mint a bearer token for a user of 'herd web user add' and print it, once:
the store keeps only its SHA-256, so it cannot be shown again (mint another
instead). The token acts as the user on the console's API (as
"Authorization: Bearer TOKEN"), read-only when the user is, on every
daemon of a fleet sharing one store; removing the user ends it at once.
The machine's own token is <state-dir>/web.token.`,
		Example: `  herd web token --user alice
  curl -H "Authorization: Bearer $(herd web token --user alice)" http://127.0.0.1:7780/api/v1/inbox`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if user == "" {
				return fmt.Errorf("web token: --user NAME is required (the machine's own token is <state-dir>/web.token)")
			}
			if err := users.ValidName(user); err != nil {
				return fmt.Errorf("web token: %w", err)
			}
			var res api.UserToken
			if err := g.do(cmd.Context(), http.MethodPost, api.UsersPath+"/"+url.PathEscape(user)+"/token", nil, nil, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "the user the token acts as (herd web user add)")
	return cmd
}
