// Package daemon wires herd's supervisor together: the state writer, the
// runtimes, the prober, the slots, the watchdog, the escalator, the reaper
// and the API, each a component with its own loop.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/attention"
	"herd/internal/autocontinue"
	"herd/internal/budget"
	"herd/internal/cgroup"
	"herd/internal/commands"
	"herd/internal/config"
	"herd/internal/guard"
	"herd/internal/hosts"
	"herd/internal/loop"
	"herd/internal/metrics"
	"herd/internal/peer"
	"herd/internal/placement"
	"herd/internal/prober"
	"herd/internal/proc"
	"herd/internal/reaper"
	"herd/internal/reconcile"
	"herd/internal/resources"
	"herd/internal/roles"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/runtime/tmux"
	"herd/internal/sdnotify"
	"herd/internal/server"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/journal"
	"herd/internal/tasks"
	"herd/internal/usage"
	"herd/internal/users"
	"herd/internal/verbs"
	"herd/internal/watchdog"
	"herd/internal/web"
	webauth "herd/internal/web/auth"
	"herd/internal/worktree"
	"herd/internal/worktrees"
)

// Options configure a Daemon.
type Options struct {
	StateDir string
	Config   *config.Config
	Store    store.Store
	Logger   *slog.Logger
	Version  string
	// Proc is the /proc to read; proc.Real() when zero.
	Proc proc.FS
	// StopGrace is how long the stop path waits after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// CaptureCommand is the argv of the process that writes exec agents'
	// output to their files, capped as it is written (herd's own
	// `capture`); empty: the agents write their files themselves, capped
	// after the fact.
	CaptureCommand []string
	// EnterCommand is the argv prefix that runs a command inside a cgroup
	// (herd's own `cgexec`), so tmux agents start inside theirs; empty:
	// tmux agents are contained by their marker.
	EnterCommand []string
	// Load reads the config file again for a reload (herd reload,
	// SIGHUP): the config and the path read ("" for the defaults). Nil
	// refuses reloads.
	Load func() (*config.Config, string, error)
	// Spending is what the budgets read of a role's spend; nil: the
	// file HERD_SPEND_FILE names, else the daemon's usage ledger.
	Spending budget.Spending
}

// Daemon supervises this host's sessions.
type Daemon struct {
	log    *slog.Logger
	cfg    *config.Config
	proc   proc.FS
	host   string
	bootID string

	status *status.Manager
	// journal holds this host's changes while a shared store is away;
	// nil on a store only this daemon opens.
	journal   *journal.Journal
	contain   *cgroup.Containment
	tmux      *tmux.Runtime
	exec      *execrt.Runtime
	prober    *prober.Prober
	slots     *slots.Slots
	roles     *roles.Roles
	worktrees *worktrees.Worktrees
	watchdog  *watchdog.Watchdog
	attention *attention.Tracker
	continuer *autocontinue.Continuer
	tasks     *tasks.Manager
	wt        *worktree.Manager
	// holds are the accounts rate limited until their reset; budgets the
	// roles' daily budgets. Both hold launches back (slots' gates).
	holds     *accounts.Holds
	budgets   *budget.Budgets
	reaper    *reaper.Reaper
	server    *server.Server
	verbs     *verbs.Verbs
	heartbeat *hosts.Heartbeat
	// lease is this host's lease; nil on a store that cannot hold a fleet
	// (SQLite: one daemon, nobody to take its slots).
	lease *hosts.Lease
	// stopGrace is the stop path's grace (Options.StopGrace).
	stopGrace time.Duration
	placement *placement.Leader
	commands  *commands.Runner
	// exits reports how agents under launchers end (the kernel's proc
	// connector); nil where the kernel refuses it to the daemon.
	exits *proc.Exits
	// metrics is nil unless [metrics] listen is set.
	metrics *metrics.Metrics
	// web is the console; nil unless [web] listen is set.
	web *web.Server
	// resources samples the agents' CPU and memory for the console's
	// charts; nil without a console.
	resources *resources.Sampler
	// usage is the usage ledger.
	usage *usage.Ledger

	// live is the configuration in force; a reload swaps it.
	live *config.Live
	load func() (*config.Config, string, error)
	// reloadMu serializes reloads.
	reloadMu sync.Mutex
}

// New returns a daemon; Run starts it.
func New(o Options) (*Daemon, error) {
	if o.Config == nil || o.Store == nil {
		return nil, errors.New("daemon: config and store are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Proc.Root == "" {
		o.Proc = proc.Real()
	}
	if o.StopGrace == 0 {
		o.StopGrace = 5 * time.Second
	}
	boot, err := proc.BootID()
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	cfg, log := o.Config, o.Logger
	host := cfg.Daemon.Host
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("daemon: hostname: %w", err)
		}
	}
	d := &Daemon{log: log, cfg: cfg, proc: o.Proc, host: host, bootID: boot, live: config.NewLive(cfg), load: o.Load, stopGrace: o.StopGrace}
	if _, fleet := o.Store.(store.Locker); fleet {
		d.lease = hosts.NewLease(cfg.Fleet.Lease)
	}
	if err := d.newCore(o); err != nil {
		return nil, err
	}
	d.newComponents(o)
	if err := d.newFrontDoors(o); err != nil {
		return nil, err
	}
	return d, nil
}

// newCore builds the writer of session state, the metrics, the runtimes
// and the containment every component below is given.
func (d *Daemon) newCore(o Options) error {
	cfg, log, boot := d.cfg, d.log, d.bootID
	// Every write of the daemon goes through the status manager's store,
	// which applies it to the live set (a write around it costs the next
	// reader a read of the store).
	d.status = status.New(o.Store, d.host, cfg.Restart, log)
	if _, shared := o.Store.(store.CommitResolver); shared {
		// A shared store (PostgreSQL) can be away: this host's changes
		// go to a local journal meanwhile, written to it once it is back.
		j, err := journal.Open(context.Background(), filepath.Join(o.StateDir, JournalFile), d.host)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		d.journal = j
		d.status.SetJournal(j)
	}
	if cfg.Metrics.Listen != "" {
		d.metrics = metrics.New(d.metricsSnapshot)
		d.status.Metrics = d.metrics
		d.metrics.CountLiveReads(d.status.LiveReads)
	}
	// The hot-path calls (listings, launches, kills) go over one
	// control-mode connection once a server runs; Run closes it.
	d.tmux = tmux.New(&tmux.Client{Binary: cfg.Tmux.Binary, Socket: cfg.Tmux.Socket, Timeout: cfg.Probe.Timeout, Control: true})
	d.exec = &execrt.Runtime{LogDir: filepath.Join(o.StateDir, "logs"), CaptureCommand: o.CaptureCommand}
	d.contain = cgroup.New(log, containOptions(), boot)
	d.status.OOMKilled = d.contain.OOMKilled
	return nil
}

var _ server.Tasks = (*tasks.Manager)(nil)

// taskDemand is the task queue's demand for the reconciler (the tasks
// component is built after slots, before either runs).
func (d *Daemon) taskDemand() reconcile.Demand {
	if d.tasks == nil {
		return reconcile.Demand{}
	}
	return d.tasks.Demand()
}

// JournalFile is the file, in the state dir, of the journal that holds
// this host's changes while a shared store is away.
const JournalFile = "store-journal.db"

// newComponents builds the supervising components: the prober, the slots,
// roles and worktrees, placement, the watchdog, attention, auto-continue
// and the reaper.
func (d *Daemon) newComponents(o Options) {
	cfg, log, boot, host := d.cfg, d.log, d.bootID, d.host
	po := prober.Options{
		Status: d.status, Proc: o.Proc, BootID: boot, Tmux: d.tmux,
		Interval: cfg.Probe.Interval, Concurrency: cfg.Probe.Concurrency, MassDeathFraction: cfg.Probe.MassDeathFraction, Log: log,
	}
	// An agent under a launcher is not the daemon's child: the kernel
	// tells how it ended (needs CAP_NET_ADMIN), else the zombie it leaves
	// when seen, else its launcher's word.
	if x, err := proc.OpenExits(); err != nil {
		log.Info("exit statuses of agents under launchers are read from /proc only", "err", err)
	} else {
		d.exits, po.Exits = x, x
	}
	d.prober = prober.New(po)
	wt := &worktree.Manager{}
	d.wt = wt
	d.newSpend(o)
	d.slots = slots.New(slots.Options{
		Status: d.status, Prober: d.prober, Proc: o.Proc, BootID: boot,
		Runtimes: map[string]runtime.Runtime{herd.RuntimeTmux: d.tmux, herd.RuntimeExec: d.exec},
		Socket:   SocketPath(o.StateDir), Grace: o.StopGrace, Interval: cfg.Probe.Interval,
		Log: log, Contain: d.contain, EnterCommand: o.EnterCommand, Worktrees: wt,
		HostTimeout: cfg.Fleet.HostTimeout, MCPCommand: mcpCommand(), Lease: d.slotsLease(),
		Gates: []slots.Gate{d.holds, d.budgets}, Demand: d.taskDemand,
	})
	d.worktrees = worktrees.New(worktrees.Options{Status: d.status, Manager: wt, Log: log})
	d.roles = roles.New(roles.Options{
		Status: d.status, Slots: d.slots, Worktrees: d.worktrees, Defaults: cfg.Restart,
		HostTimeout: cfg.Fleet.HostTimeout, Log: log,
	})
	d.placement = d.newPlacement(o.Store)
	d.watchdog = watchdog.New(watchdog.Options{
		Status: d.status, Prober: d.prober, Slots: d.slots, Tmux: d.tmux, Exec: d.exec,
		Config: cfg, Live: d.live, Proc: o.Proc, BootID: boot, StateDir: o.StateDir, Contain: d.contain, Log: log,
	})
	d.attention = attention.New(attention.Options{
		Store: d.status.Store(), Host: host, Config: cfg, Log: log, Metrics: d.metrics, Live: d.status,
	})
	d.continuer = autocontinue.New(autocontinue.Options{
		Status: d.status, Log: log, Tick: min(time.Second, cfg.Probe.Interval), Idle: continueIdle, Timeout: 4 * cfg.Probe.Timeout,
		Runtimes: map[string]autocontinue.Injector{herd.RuntimeTmux: d.tmux},
		Holds:    d.holds, Stagger: func() config.AutoContinue { return d.live.Load().AutoContinue },
	})
	d.reaper = reaper.New(reaper.Options{Status: d.status, Slots: d.slots, Worktrees: d.worktrees, Tmux: d.tmux, Exec: d.exec, Config: cfg, Live: d.live, Log: log})
	d.usage = d.newLedger()
}

// newFrontDoors builds the verbs and every door into them: the API
// server, the console, the commands from other hosts; then the heartbeat.
func (d *Daemon) newFrontDoors(o Options) error {
	cfg, log, boot, host := d.cfg, d.log, d.bootID, d.host
	fleet := &verbs.Fleet{Store: d.status.Store(), Host: host, HostTimeout: cfg.Fleet.HostTimeout}
	d.verbs = verbs.New(verbs.Options{
		Host: host, Sessions: d.slots, Roles: d.roles, Kicker: d.slots, Reaper: d.reaper, Tmux: d.tmux,
		Reader: fleet, Forward: fleet, HostTimeout: cfg.Fleet.HostTimeout, CallTimeout: cfg.Probe.Timeout, Log: log,
	})
	d.tasks = tasks.New(tasks.Options{
		Status: d.status, Slots: d.slots, Inject: d.verbs, Worktrees: d.wt, Contain: d.contain,
		Dir: filepath.Join(o.StateDir, "tasks"), Reactions: func() config.Reactions { return d.live.Load().Reactions }, Reconcile: d.slots.Kick, Log: log,
		Notify: func(ctx context.Context, t herd.Task, reason, msg string) {
			d.attention.Announce(ctx, attention.TaskMessage(t.ID, t.Title, t.Role, t.Session, host, reason, msg, time.Now()))
		},
	})
	// The console's people are the store's: on a shared store, the
	// fleet's.
	people := users.New(d.status.Store())
	d.server = server.New(server.Options{
		Status: d.status, Roles: d.roles, Worktrees: d.worktrees, Prober: d.prober, Watchdog: d.watchdog, Attention: d.attention,
		Tmux: d.tmux, Exec: d.exec, Config: cfg, Live: d.live, Version: o.Version, BootID: boot,
		Reload: d.Reload, Verbs: d.verbs, Usage: d.usage, Tasks: d.tasks, Users: people, Log: log,
		Peers: &peer.Finder{FS: o.Proc, BootID: boot, Subtree: d.contain.Subtree(), Lookup: d.liveIncarnation},
	})
	if cfg.Web.Listen != "" {
		tok, err := webauth.LoadToken(o.StateDir)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		key, err := webauth.LoadAnswerKey(o.StateDir)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		d.resources = resources.New(resources.Options{Live: d.status, Proc: o.Proc, BootID: boot, Log: log})
		d.web = web.New(web.Options{
			Config: cfg.Web, Host: host, Backend: web.APIBackend{API: d.server.Handler()}, Verbs: d.verbs,
			Events: web.StoreRecorder{Store: d.status.Store()}, Token: tok, Log: log, Local: d.status.Subscribe,
			Resources: d.resources, AnswerKey: key, Answers: web.StoreAnswers{Store: d.status.Store()}, Users: people,
		})
		d.attention.Links = d.web
		d.verbs.Answerer = d.web
	}
	d.commands = commands.NewRunner(d.status.Store(), host, d.verbs.Execute, commands.PollEvery, log)
	var err error
	if d.heartbeat, err = d.newHeartbeat(o.Version); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}

// continueIdle is auto-continue's backstop period while no session is
// blocked (a session becoming blocked kicks it).
const continueIdle = 30 * time.Second

// Run supervises until ctx is done, serving the API on ln. Agents keep
// running after Run returns; takedowns under way are finished first.
func (d *Daemon) Run(ctx context.Context, ln net.Listener) error {
	d.log.Info("daemon starting", "host", d.host, "boot_id", d.bootID, "socket", ln.Addr().String())
	d.repointHooks(ln.Addr().String())
	if err := d.slots.SweepAfterReboot(ctx); err != nil && ctx.Err() == nil {
		d.log.Error("reboot sweep", "err", err)
	}
	handler := d.server.Handler()
	if d.web != nil {
		// herd web url asks for its login links over the socket.
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.Handle("POST "+web.LinkPath, d.server.PersonOnly(guard.ActionWebLink, d.web.LinkHandler()))
		handler = mux
	}
	srv := server.HTTPServer(handler)
	g := loop.Group{Log: d.log}
	// The API and the loops on their own clocks (attention, watchdog,
	// reaper) start first: a hung runtime during adoption must not hold
	// them back.
	g.Go("api", func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			d.log.Error("api server", "err", err)
		}
	})
	g.Go("outage", func() { d.status.RunOutage(ctx) })
	g.Go("heartbeat", func() { d.runHeartbeat(ctx) })
	g.Go("fence", func() { d.runFence(ctx) })
	g.Go("notifications", func() { d.listen(ctx, d.status.Store()) })
	if d.exits != nil {
		g.Go("exits", func() {
			if err := d.exits.Run(ctx); err != nil {
				d.log.Error("exit reports stopped; agents under launchers are told by /proc only", "err", err)
			}
		})
	}
	g.Go("watchdog", func() { d.watchdog.Run(ctx) })
	g.Go("reaper", func() { d.reaper.Run(ctx) })
	g.Go("attention", func() { d.attention.Run(ctx) })
	g.Go("auto-continue", func() { d.continuer.Run(ctx) })
	g.Go("tasks", func() { d.tasks.Run(ctx) })
	g.Go("budget", func() { d.budgets.Run(ctx) })
	g.Go("usage", func() { d.usage.Run(ctx) })
	if d.metrics != nil {
		mln, err := net.Listen("tcp", d.cfg.Metrics.Listen)
		if err != nil {
			d.log.Error("metrics: not served", "listen", d.cfg.Metrics.Listen, "err", err)
		} else {
			d.log.Info("metrics served", "addr", mln.Addr().String())
			g.Go("metrics", func() { d.metrics.Run(ctx, mln) })
		}
	}
	if d.web != nil {
		// A console that cannot listen (its port taken) is logged; the
		// daemon supervises on without it.
		wln, err := net.Listen("tcp", d.cfg.Web.Listen)
		if err != nil {
			d.log.Warn("web: console not served", "listen", d.cfg.Web.Listen, "err", err)
		} else {
			d.log.Info("web: console served", "addr", wln.Addr().String(), "tls", d.cfg.Web.TLS())
			g.Go("resources", func() { d.resources.Run(ctx) })
			g.Go("web", func() {
				if err := d.web.Run(ctx, wln); err != nil {
					d.log.Error("web: console", "err", err)
				}
			})
		}
	}
	g.Go("retention", func() {
		d.status.RunRetention(ctx, store.Retention{MaxAge: d.cfg.Store.EventRetention, MaxRows: d.cfg.Store.EventMaxRows})
	})
	if err := d.slots.ResumeAfterReboot(ctx); err != nil && ctx.Err() == nil {
		d.log.Error("resume after reboot", "err", err)
	}
	// Adoption: the first probe round runs before the reconciler, so
	// re-adopted agents are verified before anything is launched.
	d.prober.Once(ctx)
	d.slots.RemoveStaleCgroups(ctx)
	g.Go("reconcile", func() { d.slots.Run(ctx) })
	g.Go("placement", func() { d.placement.Run(ctx) })
	// Commands from other hosts run once this host's agents are adopted.
	g.Go("commands", func() { d.commands.Run(ctx) })
	g.Go("probe", func() { d.prober.Run(ctx) })
	notify := sdnotify.FromEnv()
	if err := notify.Notify(sdnotify.Ready); err != nil {
		d.log.Warn("systemd: readiness not sent", "err", err)
	}
	if every, ok := sdnotify.WatchdogInterval(); ok {
		g.Go("systemd watchdog", func() { d.pingWatchdog(ctx, notify, every) })
	}

	<-ctx.Done()
	d.log.Info("daemon stopping; agents keep running")
	notify.Notify(sdnotify.Stopping)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	g.Wait()
	d.slots.Close()
	d.prober.Close()
	// The control connection's session goes, so a server left with no
	// agent exits as it would have without it.
	closeCtx, cancelClose := context.WithTimeout(context.Background(), d.cfg.Probe.Timeout)
	defer cancelClose()
	if err := d.tmux.Close(closeCtx); err != nil {
		d.log.Warn("tmux control connection", "err", err)
	}
	if d.journal != nil {
		// Entries not yet written stay in the file for the next start.
		if err := d.journal.Close(); err != nil {
			d.log.Warn("store journal", "err", err)
		}
	}
	return nil
}

// ApplyRoles validates and upserts roles (see roles.ApplyRoles): the roles
// of the daemon's own config file at start.
func (d *Daemon) ApplyRoles(ctx context.Context, rs []herd.Role) error {
	return d.roles.ApplyRoles(ctx, rs)
}

// CaptureCommand is this binary's capture process argv, for Options; nil
// when the binary cannot be found (exec output is then capped after the
// fact).
func CaptureCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "capture"}
}

// mcpCommand is the argv of herd's MCP server: this binary's `mcp`.
func mcpCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "mcp"}
}

// containOptions are the cgroup options of the environment:
// HERD_CONTAINMENT=marker contains by marker even where cgroups could be
// made (to compare the two, or where another manager owns the cgroups).
func containOptions() cgroup.Options {
	if v := os.Getenv("HERD_CONTAINMENT"); v == string(cgroup.ModeMarker) {
		return cgroup.Options{Off: "HERD_CONTAINMENT=marker"}
	}
	return cgroup.Options{}
}

// EnterCommand is this binary's cgexec argv, for Options; nil when the
// binary cannot be found (tmux agents are then contained by their marker).
func EnterCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "cgexec"}
}

// pingWatchdog tells systemd the supervisor is alive, every half of its
// watchdog interval, only while probe rounds keep ending: a wedged prober
// stops the pings and systemd restarts the daemon (the agents live on).
func (d *Daemon) pingWatchdog(ctx context.Context, n *sdnotify.Notifier, every time.Duration) {
	loop.Loop{Name: "systemd watchdog", Log: d.log, Every: every / 2}.Run(ctx, func(context.Context) time.Duration {
		if time.Since(d.prober.LastRound()) < every {
			n.Notify(sdnotify.Watchdog)
		}
		return 0
	})
}

// metricsSnapshot is the sessions gauge's view of this host's sessions.
func (d *Daemon) metricsSnapshot() []metrics.Session {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all, _, err := d.status.Live(ctx)
	if err != nil {
		d.log.Warn("metrics: read sessions", "err", err)
		return nil
	}
	out := make([]metrics.Session, len(all))
	for i, s := range all {
		out[i] = metrics.Session{Role: s.Role, State: string(s.State), Activity: string(s.Activity)}
	}
	return out
}
