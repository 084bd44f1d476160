package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"herd/internal/activity"
	"herd/internal/hooks"
)

func newHooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Manage herd's hook entries in an agent's settings",
	}
	var dir string
	install := &cobra.Command{
		Use:   "install [--dir DIR]",
		Short: "Write herd's hook entries into the agent's settings (.claude/settings.local.json)",
		Long: `Merge one 'herd hook EVENT' entry per hook event into the project's
.claude/settings.local.json (created when missing), so that Claude Code
reports its activity to herd. The user's own hooks and settings are kept;
running it again changes nothing. The entries name this herd binary by its
absolute path.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = "."
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return fmt.Errorf("hooks install: %w", err)
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("hooks install: find the herd binary: %w", err)
			}
			if exe, err = filepath.Abs(exe); err != nil {
				return fmt.Errorf("hooks install: %w", err)
			}
			changed, err := hooks.Install(abs, exe)
			if err != nil {
				return err
			}
			path := hooks.SettingsPath(abs)
			events := activity.HookEvents()
			if !changed {
				fmt.Fprintf(cmd.OutOrStdout(), "herd hooks already installed in %s; nothing changed\n", path)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "herd hooks installed in %s: %d events (%s) run %s\n",
				path, len(events), strings.Join(events, ", "), hooks.Command(exe, "EVENT"))
			return nil
		},
	}
	install.Flags().StringVar(&dir, "dir", "", "project directory (default: the current directory)")
	cmd.AddCommand(install)
	requireSubcommand(cmd, "action")
	return cmd
}
