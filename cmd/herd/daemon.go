package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/daemon"
	"herd/internal/store"
	"herd/internal/store/backend"

	"github.com/spf13/cobra"
)

func newDaemonCmd(g *globals) *cobra.Command {
	var debug bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the supervisor in the foreground until SIGINT/SIGTERM",
		Long: `Run the supervisor in the foreground. It listens on <state-dir>/herd.sock
(mode 0600), keeps every role's replicas running, and restarts crashes with
backoff. Stopping the daemon never stops the agents: a restarted daemon
re-adopts them after verifying their identity (pid, start time, boot id).
Roles declared in the config file are applied at start. SIGHUP (or
'herd reload') reads the config file again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			cfg, path, err := g.loadConfig()
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ln, release, err := daemon.Listen(dir)
			if err != nil {
				return err
			}
			defer release()
			st, err := backend.Open(cmd.Context(), cfg.Store, dir)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := sameTmuxSocket(cmd.Context(), dir, cfg, st); err != nil {
				return err
			}
			if err := recordConfig(dir, path, cfg.Tmux.Socket); err != nil {
				return err
			}
			d, err := daemon.New(daemon.Options{StateDir: dir, Config: cfg, Store: st, Logger: log, Version: version,
				CaptureCommand: daemon.CaptureCommand(), EnterCommand: daemon.EnterCommand(), Load: g.loadConfig})
			if err != nil {
				return err
			}
			if len(cfg.Roles) > 0 {
				if err := d.ApplyRoles(cmd.Context(), cfg.Roles); err != nil {
					return err
				}
				log.Info("roles applied from config", "file", path, "roles", len(cfg.Roles))
			}
			stopHUP := reloadOnHUP(cmd.Context(), d, log)
			defer stopHUP()
			start := time.Now()
			err = d.Run(cmd.Context(), ln)
			log.Info("daemon stopped", "uptime", time.Since(start).Round(time.Second))
			return err
		},
	}
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	return cmd
}

// reloadOnHUP reloads the daemon's config on each SIGHUP until ctx ends
// or stop is called.
func reloadOnHUP(ctx context.Context, d *daemon.Daemon, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				res, err := d.Reload(ctx)
				if err != nil {
					log.Error("SIGHUP: config not reloaded", "err", err)
					continue
				}
				log.Info("SIGHUP: " + res.Message)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// sameTmuxSocket refuses a daemon whose config names another tmux socket
// than the one this state dir's live tmux agents run on (as the daemon
// that launched them recorded it): it would read them unknown forever,
// and launch their slots a second time beside them.
func sameTmuxSocket(ctx context.Context, dir string, cfg *config.Config, st store.Store) error {
	ran, ok := recordedConfig(dir)
	if !ok || ran.TmuxSocket == nil || *ran.TmuxSocket == cfg.Tmux.Socket {
		return nil
	}
	host := cfg.Daemon.Host
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return fmt.Errorf("daemon: hostname: %w", err)
		}
	}
	var live []string
	err := st.View(ctx, func(tx store.Tx) error {
		ss, err := tx.SessionsOnHost(host)
		for _, s := range ss {
			if s.RuntimeKind == herd.RuntimeTmux && s.State.Live() {
				live = append(live, s.Name)
			}
		}
		return err
	})
	if err != nil || len(live) == 0 {
		return err
	}
	with := "no config file (the defaults)"
	if ran.Config != "" {
		with = ran.Config
	}
	return fmt.Errorf("daemon: %d tmux agent(s) of %s (%s) run on tmux socket %q, recorded by the daemon that ran with %s; "+
		"this config names socket %q, where they cannot be seen (read unknown, their slots launched again). "+
		"Start the daemon with the config it ran with, or set [tmux] socket = %q, or stop those agents first",
		len(live), dir, strings.Join(first(live, 3), ", "), *ran.TmuxSocket, with, cfg.Tmux.Socket, *ran.TmuxSocket)
}

// first is at most n of names, "…" after them when there are more.
func first(names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	return append(slices.Clip(names[:n]), "…")
}
