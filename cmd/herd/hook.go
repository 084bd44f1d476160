package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
	"herd/internal/spool"

	"github.com/spf13/cobra"
)

// Time budget of `herd hook`: it must never hold the agent up.
const (
	hookReadWait    = 200 * time.Millisecond // for the payload on stdin
	hookPostTimeout = 500 * time.Millisecond // for the daemon's answer
)

func newHookCmd(g *globals) *cobra.Command {
	var agent string
	cmd := &cobra.Command{
		Use:   "hook [--agent KIND] [EVENT] [NOTIFY-JSON]",
		Short: "Agent hook entry point: record activity from the hook JSON on stdin",
		Long: `Read an agent hook payload (Claude Code hook JSON) on stdin and record the
agent's activity with the herd daemon of its session (HERD_SESSION,
HERD_INCARNATION and HERD_SOCKET are set in every agent herd launches).
EVENT is used when the payload names none. When the daemon does not answer,
the report is spooled under <state-dir>/activity/ for the daemon to ingest.
It always exits 0 within about a second and prints nothing on stdout;
outside herd (no HERD_SESSION) it does nothing. 'herd hooks install' wires it
into an agent's settings. --agent says which agent's hook it is (claude,
codex, gemini); Codex's notify program passes its JSON as the last argument
(herd hook --agent codex notify '{...}').`,
		Args: cobra.ArbitraryArgs,
		// A hook must never fail the agent, not even on a flag it does not know.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(cmd *cobra.Command, args []string) error {
			event := ""
			if len(args) > 0 {
				event = args[0]
			}
			stdin := cmd.InOrStdin()
			if event == "notify" && len(args) > 1 {
				stdin = strings.NewReader(args[len(args)-1])
			}
			runHook(cmd.Context(), g, agent, event, stdin, cmd.ErrOrStderr())
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the agent the hook is installed for: claude, codex or gemini")
	return cmd
}

// runHook does the work of `herd hook`; problems are one line on stderr.
func runHook(ctx context.Context, g *globals, agent, event string, stdin io.Reader, stderr io.Writer) {
	session := os.Getenv(herd.EnvSession)
	if session == "" {
		return // not an agent herd launched
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "herd hook: "+format+"\n", a...) }
	if ctx == nil {
		ctx = context.Background()
	}
	data := readPayload(stdin, hookReadWait, agents.MaxPayload+1)
	if len(data) == 0 {
		data = []byte("{}")
	}
	// Read as the daemon will (it uses the session's role's agent kind,
	// this one when the role names none): what is dropped is said here.
	kind := agent
	if kind == "" {
		kind = herd.AgentClaude
	}
	var sig agents.Signal
	var err error
	if kind == herd.AgentCodex && event == "notify" {
		sig, err = agents.ParseCodexNotify(data)
	} else {
		sig, err = agents.ParseHook(kind, data, event, time.Now())
	}
	if err != nil {
		logf("%v; ignored", err)
		return
	}
	for _, n := range sig.Notes { // what was dropped; the daemon drops it too
		logf("%s", n)
	}
	if event == "" {
		event = sig.Event
	}
	rep := api.ActivityReport{
		Session: session, Incarnation: os.Getenv(herd.EnvIncarnation),
		Event: event, Payload: data, At: time.Now().UTC(), Agent: agent,
	}
	socket := os.Getenv(herd.EnvSocket)
	stateDir := ""
	if socket != "" {
		stateDir = filepath.Dir(socket)
	} else {
		if stateDir, err = g.dir(); err != nil {
			logf("%v", err)
			return
		}
		socket = api.SocketPath(stateDir)
	}
	postCtx, cancel := context.WithTimeout(ctx, hookPostTimeout)
	defer cancel()
	err = api.NewClient(socket).Do(postCtx, http.MethodPost, "/v1/activity", nil, rep, nil)
	if err == nil {
		return
	}
	var se *api.StatusError
	if errors.As(err, &se) && se.Code/100 == 4 {
		logf("daemon refused the report: %v", err)
		return
	}
	if err := spool.Append(spool.Dir(stateDir), rep); err != nil {
		logf("daemon unreachable and %v", err)
	}
}

// readPayload reads stdin up to limit bytes, giving up after wait: an agent
// that leaves stdin open must not hold the hook. It returns what it read.
func readPayload(r io.Reader, wait time.Duration, limit int64) []byte {
	var (
		mu   sync.Mutex
		buf  []byte
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		lr := io.LimitReader(r, limit)
		chunk := make([]byte, 32<<10)
		for {
			n, err := lr.Read(chunk)
			mu.Lock()
			buf = append(buf, chunk[:n]...)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]byte(nil), buf...)
}
