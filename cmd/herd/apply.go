package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
	"herd/internal/api"
	"herd/internal/config"
)

func newApplyCmd(g *globals) *cobra.Command {
	var file string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Declare the roles in FILE (validated whole; nothing is half-applied)",
		Long: `Upsert the roles of a herd.toml file. The whole file is validated first: an
unknown key, a bad duration or policy, a duplicate or malformed role name, a
missing command — any error names the key and its line, and nothing is applied.
The file holds roles, and optionally a [restart] table for them; restart keys
it leaves unset take the daemon's [restart] defaults. Tables that configure
the daemon ([probe], [watchdog], ...) are refused: they belong in the
daemon's own config file, read again by 'herd reload'.

apply prints what it changed per role (created, configured: which fields,
unchanged), and how many sessions a changed command, workdir or env leaves
OUTDATED; --dry-run prints the same and changes nothing.

In a fleet (several hosts on one PostgreSQL) a role runs on the host that
applied it, unless it is placed: hosts = ["a", "b"] (the first live one),
spread = true (balanced over the live hosts, of hosts when given) and
failover = true (a stale host's slots move to a live one). The placement
leader assigns the slots; describe role shows where each runs.`,
		Example: `  herd apply -f herd.toml
  herd apply -f herd.toml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("apply: -f FILE is required")
			}
			rf, err := config.LoadRoles(file)
			if err != nil {
				return err
			}
			if len(rf.Roles) == 0 {
				return fmt.Errorf("apply: %s declares no [[role]]", file)
			}
			var res api.ApplyResult
			req := api.ApplyRequest{Roles: rf.Roles, Inherit: rf.Inherit, DryRun: dryRun}
			if err := g.do(cmd.Context(), http.MethodPost, "/v1/roles", nil, req, &res); err != nil {
				return err
			}
			printChanges(cmd.OutOrStdout(), res.Changes, dryRun)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "herd.toml file to apply")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change; change nothing")
	return cmd
}

// printChanges prints one line per role: what apply did, or would do.
func printChanges(w io.Writer, changes []api.RoleChange, dryRun bool) {
	suffix := ""
	if dryRun {
		suffix = " (dry run)"
	}
	for _, c := range changes {
		line := fmt.Sprintf("role/%s %s", c.Role, c.Action)
		if len(c.Changed) > 0 {
			line += ": " + strings.Join(c.Changed, ", ")
		}
		if c.Outdated > 0 {
			line += fmt.Sprintf("; %d session(s) OUTDATED (herd rollout restart %s replaces them)", c.Outdated, c.Role)
		}
		if c.Rearmed > 0 {
			line += fmt.Sprintf("; %d failed session(s) re-armed", c.Rearmed)
		}
		fmt.Fprintln(w, line+suffix)
	}
}
