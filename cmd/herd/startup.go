package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"github.com/spf13/cobra"
	"herd/internal/startup"
)

func newStartupCmd(g *globals) *cobra.Command {
	var print, remove bool
	cmd := &cobra.Command{
		Use:   "startup [--print|--remove]",
		Short: "Start the daemon at boot: write a systemd user unit",
		Long: `Write a systemd user unit (~/.config/systemd/user/herd.service) that runs
'herd daemon' for this state directory. KillMode=process keeps the agents
running when the daemon stops or restarts; Restart=on-failure brings a
crashed daemon back; Type=notify and WatchdogSec let systemd restart a
daemon that stopped answering. The unit records this shell's PATH, so the
agents' commands are found as they are here.

--print shows the unit instead of writing it; --remove deletes it.`,
		Example: `  herd startup --print
  herd startup && systemctl --user daemon-reload && systemctl --user enable --now herd.service
  herd startup --remove`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if print && remove {
				return fmt.Errorf("startup: --print and --remove are exclusive")
			}
			dir, err := startup.Dir()
			if err != nil {
				return err
			}
			if remove {
				path, removed, err := startup.Remove(dir)
				if err != nil {
					return err
				}
				if !removed {
					fmt.Fprintf(out, "no unit at %s; nothing to remove\n", path)
					return nil
				}
				fmt.Fprintf(out, "removed %s\nstop it and forget it with:\n  systemctl --user disable --now %s\n  systemctl --user daemon-reload\n", path, startup.UnitName)
				return nil
			}
			unit, err := unitFor(g)
			if err != nil {
				return err
			}
			if print {
				fmt.Fprint(out, unit)
				return nil
			}
			path, err := startup.Install(dir, unit)
			if err != nil {
				return err
			}
			name := "$USER"
			if u, err := user.Current(); err == nil {
				name = u.Username
			}
			fmt.Fprintf(out, `wrote %s
start it now and at every login with:
  systemctl --user daemon-reload
  systemctl --user enable --now %s
to keep it running after you log out, and start it at boot before any login:
  loginctl enable-linger %s
`, path, startup.UnitName, name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&print, "print", false, "print the unit instead of writing it")
	cmd.Flags().BoolVar(&remove, "remove", false, "delete the unit")
	return cmd
}

// unitFor renders the unit for this binary, state dir and config.
func unitFor(g *globals) (string, error) {
	bin, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("startup: cannot find this binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(bin); err == nil {
		bin = resolved
	}
	dir, err := g.dir()
	if err != nil {
		return "", err
	}
	cfgPath := g.config
	if cfgPath == "" {
		cfgPath = os.Getenv("HERD_CONFIG")
	}
	if cfgPath != "" {
		if cfgPath, err = filepath.Abs(cfgPath); err != nil {
			return "", err
		}
		// A config that does not parse would crash-loop the unit.
		if _, _, err := g.loadConfig(); err != nil {
			return "", err
		}
	}
	return startup.Unit(startup.Options{Binary: bin, StateDir: dir, Config: cfgPath, Path: os.Getenv("PATH")})
}
