package main

import (
	"fmt"
	"herd"
	"herd/internal/agents"
	"herd/internal/hookinstall"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func newHooksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Manage herd's hook entries in an agent's settings",
	}
	var dir, agent string
	install := &cobra.Command{
		Use:   "install [--agent claude|codex|gemini] [--dir DIR]",
		Short: "Write herd's hook entries into the agent's settings",
		Long: `Merge one 'herd hook EVENT' entry per hook event into the project's agent
settings (created when missing), so that the agent reports its activity to
herd: Claude Code's .claude/settings.local.json (the default), Codex's
.codex/hooks.json (and its notify program in the user's config.toml,
$CODEX_HOME or ~/.codex, unless one is set there), Gemini CLI's
.gemini/settings.json. The user's own hooks and settings are kept; running
it again changes nothing. The entries name this herd binary by its absolute
path (not a temporary one of 'go run').

Agents herd launches need none of this: a known agent (claude, codex,
gemini) gets herd's hooks at each launch without a file in the project.
This is for agents started outside herd, or a project that wants the
entries in its own files (herd then adds none of its own).`,
		Example: `  herd hooks install --dir ~/src/app
  herd hooks install --agent codex --dir ~/src/app`,
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
			if exe, err = filepath.EvalSymlinks(exe); err != nil {
				return fmt.Errorf("hooks install: %w", err)
			}
			res, err := hookinstall.Install(agent, abs, exe)
			if err != nil {
				return fmt.Errorf("hooks install: %w", err)
			}
			if agent == herd.AgentCodex {
				// Codex reads notify from the user's config only.
				cfg := hookinstall.CodexUserConfig()
				if cfg == "" {
					return fmt.Errorf("hooks install: no CODEX_HOME or HOME for Codex's config (its notify program)")
				}
				n, err := hookinstall.InstallCodexNotify(cfg, exe)
				if err != nil {
					return fmt.Errorf("hooks install: %w", err)
				}
				res.Files = append(res.Files, n.Files...)
				res.Changed = res.Changed || n.Changed
				res.Notes = append(res.Notes, n.Notes...)
			}
			files := strings.Join(res.Files, ", ")
			events := agents.HookEvents(agent)
			if !res.Changed {
				fmt.Fprintf(cmd.OutOrStdout(), "herd hooks already installed in %s; nothing changed\n", files)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "herd hooks installed in %s: %d events (%s) run %s\n",
					files, len(events), strings.Join(events, ", "), hookinstall.HookCommand(agent, exe, "EVENT"))
			}
			for _, n := range res.Notes {
				fmt.Fprintf(cmd.OutOrStdout(), "note: %s\n", n)
			}
			return nil
		},
	}
	install.Flags().StringVar(&dir, "dir", "", "project directory (default: the current directory)")
	install.Flags().StringVar(&agent, "agent", herd.AgentClaude, "the agent whose settings get the hooks: claude, codex or gemini")
	cmd.AddCommand(install)
	requireSubcommand(cmd, "action")
	return cmd
}
