// Package sim is a simulated coding agent that runs, crashes, stalls and waits for input on demand.
package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// Limits on flag values, so a typo cannot fork-bomb or flood.
const (
	maxChildren    = 64
	maxAllocMB     = 4096
	maxStderrLines = 100000
	dialTimeout    = 5 * time.Second
	// childSleep is how long a child lives at most; it dies with the sim anyway.
	childSleep = "86400"
)

// options are the sim's flags.
type options struct {
	interval      time.Duration
	exitAfter     time.Duration
	exitCode      int
	signal        string
	signalAfter   time.Duration
	silentAfter   time.Duration
	burnCPU       bool
	tcp           string
	children      int
	allocMB       int
	hooks         string
	herd          string
	quiet         bool
	waitInput     bool
	work          bool
	workPerBranch bool
	stderrLines   int
	sessionID     string
	resetIn       time.Duration

	// Derived by validate.
	exit   bool // --exit-after or --exit-code given
	silent bool // --silent-after given
	sig    syscall.Signal
	script []hookStep
}

// Command returns the hidden `sim` command: a stand-in for a real agent
// process that prints Claude-style stream-json and, on demand, exits,
// crashes by signal, stalls, burns CPU, holds a TCP connection, keeps
// children, plays hook events or waits for input. It uses the real clock.
func Command() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:          "sim",
		Short:        "Run a simulated coding agent (for demos and tests)",
		Hidden:       true,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			o.exit = f.Changed("exit-after") || f.Changed("exit-code")
			o.silent = f.Changed("silent-after")
			if err := o.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return run(ctx, o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.interval, "interval", time.Second, "print one stream-json line (and play one hook) per interval")
	f.DurationVar(&o.exitAfter, "exit-after", 0, "exit after this long (with --exit-code)")
	f.IntVar(&o.exitCode, "exit-code", 0, "exit code for --exit-after")
	f.StringVar(&o.signal, "signal", "", "kill itself with this signal (SEGV, KILL, ABRT, TERM, ...) after --signal-after")
	f.DurationVar(&o.signalAfter, "signal-after", 0, "delay before --signal")
	f.DurationVar(&o.silentAfter, "silent-after", 0, "stop printing and playing hooks after this long, but stay alive (a stall)")
	f.BoolVar(&o.burnCPU, "burn-cpu", false, "spin a CPU core while silent")
	f.StringVar(&o.tcp, "tcp", "", "open and hold a TCP connection to this address")
	f.IntVar(&o.children, "children", 0, "spawn this many child processes and keep them")
	f.IntVar(&o.allocMB, "alloc-mb", 0, "allocate and touch this many MiB, 8 MiB per interval, and hold them")
	f.StringVar(&o.hooks, "hooks", "", "comma-separated hook events to play, one per interval (EVENT or EVENT:TOOL; Notification:TYPE)")
	f.StringVar(&o.herd, "herd", "", "herd binary that receives the hooks (default: this executable)")
	f.BoolVar(&o.quiet, "quiet", false, "print no stream-json")
	f.BoolVar(&o.waitInput, "wait-input", false, "print a prompt and block reading stdin")
	f.BoolVar(&o.workPerBranch, "work-per-branch", false, "with --work: append to work/<branch>.md instead of WORK.md (branches that never conflict)")
	f.BoolVar(&o.work, "work", false, "with --wait-input: each prompt is a turn (UserPromptSubmit hook, the prompt appended to WORK.md and committed in the working directory, Stop hook)")
	f.IntVar(&o.stderrLines, "stderr-lines", 0, "write this many lines to stderr at start")
	f.StringVar(&o.sessionID, "session-id", "", "agent session id to report (default: random)")
	f.DurationVar(&o.resetIn, "reset-in", 0, "a StopFailure:rate_limit hook, and the result of a failed run (--exit-code), name a rate limit resetting this far ahead (default: none named)")
	return cmd
}

func (o *options) validate() error {
	switch {
	case o.interval <= 0:
		return errors.New("sim: --interval must be positive")
	case o.exitAfter < 0 || o.signalAfter < 0 || o.silentAfter < 0:
		return errors.New("sim: durations must not be negative")
	case o.exitCode < 0 || o.exitCode > 255:
		return fmt.Errorf("sim: --exit-code %d out of range 0-255", o.exitCode)
	case o.children < 0 || o.children > maxChildren:
		return fmt.Errorf("sim: --children %d out of range 0-%d", o.children, maxChildren)
	case o.allocMB < 0 || o.allocMB > maxAllocMB:
		return fmt.Errorf("sim: --alloc-mb %d out of range 0-%d", o.allocMB, maxAllocMB)
	case o.stderrLines < 0 || o.stderrLines > maxStderrLines:
		return fmt.Errorf("sim: --stderr-lines %d out of range 0-%d", o.stderrLines, maxStderrLines)
	}
	if o.signal != "" {
		sig, err := parseSignal(o.signal)
		if err != nil {
			return err
		}
		o.sig = sig
	}
	script, err := parseScript(o.hooks)
	if err != nil {
		return err
	}
	o.script = script
	if o.work && !o.waitInput {
		return errors.New("sim: --work needs --wait-input")
	}
	if (len(script) > 0 || o.work) && o.herd == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("sim: find own executable for --hooks: %w", err)
		}
		o.herd = exe
	}
	if o.sessionID == "" {
		o.sessionID = newSessionID()
	}
	return nil
}

// agent is the running simulation; its fields are owned by run's goroutine.
type agent struct {
	o        *options
	out, err io.Writer
	stream   streamer
	children []*exec.Cmd
	// held is the memory --alloc-mb grows, touched so it is resident.
	held     [][]byte
	conn     net.Conn
	burning  atomic.Bool
	silent   bool
	hookNext int
}

func run(ctx context.Context, o *options, in io.Reader, out, errw io.Writer) error {
	// Die by the default action on SIGTERM/SIGINT/SIGHUP even when the
	// parent command asked to be notified of them: that is how an agent dies.
	signal.Reset(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// Like a real agent, die by the signal when someone sends SEGV, ABRT or
	// BUS (`kill -SEGV`): the Go runtime would otherwise catch it and exit 2.
	// No core files from simulated crashes.
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGABRT, syscall.SIGBUS} {
		setDefaultAction(sig)
	}
	cwd, _ := os.Getwd()
	a := &agent{o: o, out: out, err: errw, stream: streamer{sessionID: o.sessionID, cwd: cwd}}
	defer a.cleanup()

	for i := range o.stderrLines {
		fmt.Fprintf(errw, "sim: diagnostic line %d of %d\n", i+1, o.stderrLines)
	}
	if o.tcp != "" {
		conn, err := net.DialTimeout("tcp", o.tcp, dialTimeout)
		if err != nil {
			return fmt.Errorf("sim: dial %s: %w", o.tcp, err)
		}
		a.conn = conn
	}
	if err := a.spawnChildren(); err != nil {
		return err
	}

	var (
		inputC <-chan string
		// pending is the prompt of a --work turn, started once the
		// input is quiet (quietC).
		pending []string
		quietC  <-chan time.Time
	)
	if o.waitInput {
		inputC = readLines(in)
	}
	exitC, signalC, silentC := after(o.exit, o.exitAfter), after(o.sig != 0, o.signalAfter), after(o.silent, o.silentAfter)
	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()

	a.step(ctx)
	if o.waitInput {
		a.prompt()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			a.grow()
			a.step(ctx)
		case <-silentC:
			a.silent = true
			if o.burnCPU {
				a.burning.Store(true)
				go a.burn()
			}
		case <-signalC:
			// No cleanup: a crashing agent leaves its children to the
			// parent-death signal and its sockets to the kernel.
			raise(o.sig)
			signalC = nil // the signal does not kill by default: go on
		case <-exitC:
			if !o.quiet && !a.silent {
				a.emit(a.stream.result(o.exitCode, o.resetIn))
			}
			a.cleanup()
			os.Exit(o.exitCode)
		case line, ok := <-inputC:
			if !ok {
				inputC = nil // stdin closed: keep waiting, like a stuck prompt
				continue
			}
			if a.silent {
				continue
			}
			if o.work {
				pending = append(pending, line)
				quietC = time.After(workQuiet)
				continue
			}
			a.emit(a.stream.text("You said: " + line))
			a.prompt()
		case <-quietC:
			quietC = nil
			a.turn(ctx, strings.Join(pending, "\n"))
			pending = nil
		}
	}
}

// after fires after d when set, else never.
func after(set bool, d time.Duration) <-chan time.Time {
	if !set {
		return nil
	}
	return time.After(d)
}

// step is one interval: a stream-json line and the next scripted hook.
func (a *agent) step(ctx context.Context) {
	if a.silent {
		return
	}
	// While waiting for input only the first (init) line is printed.
	if !a.o.quiet && (!a.o.waitInput || a.stream.n == 0) {
		a.emit(a.stream.next())
	}
	if a.hookNext < len(a.o.script) {
		st := a.o.script[a.hookNext]
		a.hookNext++
		if err := playHook(ctx, a.o.herd, st, a.o.sessionID, a.stream.cwd, a.o.resetIn); err != nil {
			fmt.Fprintln(a.err, err)
		}
	}
}

func (a *agent) prompt() {
	fmt.Fprintln(a.out, "> waiting for your input")
}

// emit writes one line in a single write, so each line reaches a pipe whole.
func (a *agent) emit(b []byte) {
	_, _ = a.out.Write(append(b, '\n'))
}

// burnSink keeps the spinning loop from being optimised away.
var burnSink atomic.Uint64

// burn spins a CPU core until cleanup.
func (a *agent) burn() {
	x := uint64(1)
	for a.burning.Load() {
		for range 1 << 16 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	burnSink.Store(x)
}

// spawnChildren starts the --children processes. They die with the sim
// even when it is killed (parent-death signal).
func (a *agent) spawnChildren() error {
	if a.o.children == 0 {
		return nil
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("sim: --children: %w", err)
	}
	for range a.o.children {
		c := exec.Command(sleep, childSleep)
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return fmt.Errorf("sim: start child: %w", err)
		}
		a.children = append(a.children, c)
	}
	return nil
}

// cleanup kills the children, closes the connection and stops burning.
// It is safe to call more than once.
func (a *agent) cleanup() {
	a.burning.Store(false)
	for _, c := range a.children {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	a.children = nil
	if a.conn != nil {
		_ = a.conn.Close()
		a.conn = nil
	}
}

// readLines delivers stdin lines until EOF, then closes the channel.
func readLines(in io.Reader) <-chan string {
	c := make(chan string)
	go func() {
		defer close(c)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			c <- sc.Text()
		}
	}()
	return c
}

// grow allocates the next 8 MiB of --alloc-mb and writes every page of it,
// so the memory is resident (an agent growing toward a memory limit).
func (a *agent) grow() {
	const step = 8 << 20
	if len(a.held)*step >= a.o.allocMB<<20 {
		return
	}
	b := make([]byte, step)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	a.held = append(a.held, b)
}
