package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
	"herd/internal/api"
	"herd/internal/config"
)

func newApplyCmd(g *globals) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Declare the roles in FILE (validated whole; nothing is half-applied)",
		Long: `Upsert the roles of a herd.toml file. The whole file is validated first: an
unknown key, a bad duration or policy, a duplicate or malformed role name, a
missing command — any error names the key and its line, and nothing is applied.`,
		Example: `  herd apply -f herd.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("apply: -f FILE is required")
			}
			cfg, err := config.Load(file)
			if err != nil {
				return err
			}
			if len(cfg.Roles) == 0 {
				return fmt.Errorf("apply: %s declares no [[role]]", file)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var res api.Result
			if err := c.Do(cmd.Context(), http.MethodPost, "/v1/roles", nil, cfg.Roles, &res); err != nil {
				return explain(err, g)
			}
			for _, r := range cfg.Roles {
				fmt.Fprintf(cmd.OutOrStdout(), "role/%s configured (replicas %d)\n", r.Name, r.Replicas)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "herd.toml file to apply")
	return cmd
}
