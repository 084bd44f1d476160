package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"herd/internal/api"
	"herd/internal/users"
)

// newWebUserCmd is `herd web user add|list|remove`: the people who log in
// to the console by name.
func newWebUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user add|list|remove",
		Short: "The people of the console: add, list, remove",
		Long: `The people who log in to the console by name. Each logs in with a link of
'herd web url --user NAME' or a token of 'herd web token --user NAME', and
every answer and action of theirs names them (data.by of the answered and
console events). A --read-only user sees everything and changes nothing.
Users are kept in the store: on a fleet sharing PostgreSQL, every daemon's
console knows them. Removing a user ends their tokens and browser sessions
at once.`,
		Example: `  herd web user add alice
  herd web user add rob --read-only
  herd web user list
  herd web user remove alice`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return fmt.Errorf("web user: unknown action %q (want %s)", args[0], orList([]string{"add", "list", "remove"}))
		},
	}
	cmd.AddCommand(newWebUserAddCmd(g), newWebUserListCmd(g), newWebUserRemoveCmd(g))
	return cmd
}

func newWebUserAddCmd(g *globals) *cobra.Command {
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "add NAME [--read-only]",
		Short: "Add a user of the console",
		Long: `Add a user called NAME: a lowercase letter, then up to 63 of a-z, 0-9, '_',
'.' and '-'. Then give them a login link (herd web url --user NAME) or a
token (herd web token --user NAME).`,
		Example: `  herd web user add alice
  herd web user add rob --read-only`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := users.ValidName(args[0]); err != nil {
				return fmt.Errorf("web user add: %w", err)
			}
			var u api.User
			req := api.AddUserRequest{Name: args[0], ReadOnly: readOnly}
			if err := g.do(cmd.Context(), http.MethodPost, api.UsersPath, nil, req, &u); err != nil {
				return err
			}
			what := "can answer, type and run verbs"
			if u.ReadOnly {
				what = "read-only"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s added (%s): log in with 'herd web url --user %s' or 'herd web token --user %s'\n", u.Name, what, u.Name, u.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "the user sees everything and changes nothing")
	return cmd
}

func newWebUserListCmd(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the users of the console",
		Example: `  herd web user list
  herd web user list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("web user list: -o %q: want json (or nothing, for a table)", output)
			}
			var all []api.User
			if err := getJSON(cmd.Context(), g, api.UsersPath, &all); err != nil {
				return err
			}
			if output == "json" {
				if all == nil {
					all = []api.User{}
				}
				return writeJSON(cmd.OutOrStdout(), all)
			}
			return printUsers(cmd.OutOrStdout(), all)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json")
	return cmd
}

// printUsers writes the users as a table.
func printUsers(w io.Writer, all []api.User) error {
	tw, flush := newTable(w)
	fmt.Fprintln(tw, "NAME\tSCOPE\tADDED")
	for _, u := range all {
		scope := "operate"
		if u.ReadOnly {
			scope = "read"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, scope, u.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	return flush()
}

func newWebUserRemoveCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a user: their tokens and browser sessions end at once",
		Long: `Remove the user called NAME. Their tokens and browser sessions are refused
from their next request on, on every daemon sharing the store. Adding the
name again makes a new user: the old tokens and sessions stay refused.`,
		Example: `  herd web user remove alice`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res api.Result
			if err := g.do(cmd.Context(), http.MethodDelete, api.UsersPath+"/"+url.PathEscape(args[0]), nil, nil, &res); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Message)
			return nil
		},
	}
}
