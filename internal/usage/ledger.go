package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/store"
)

// Sources of usage rows.
const (
	// SourceTranscript is the agent's own transcript or rollout file.
	SourceTranscript = "transcript"
	// SourceStream is the agent's JSON output (exec runtime). Where an
	// incarnation has both, the stream's figures count and the
	// transcript's are left out: they are the same turns.
	SourceStream = "stream"
)

// DefaultInterval is how often the ledger looks at the files.
const DefaultInterval = 5 * time.Second

// Counter is what the ledger reports each addition to (the Prometheus
// counters); implemented by *metrics.Metrics.
type Counter interface {
	Usage(role, model string, input, output, cacheRead, cacheWrite int64, costUSD float64)
}

// Options configure a Ledger.
type Options struct {
	Store store.Store
	// Host is this daemon's host: the ledger reads the files of its own
	// incarnations only.
	Host string
	Log  *slog.Logger
	// Prices returns the price table in force (it follows reloads); nil
	// is the embedded defaults.
	Prices func() Prices
	// Interval between looks; 0 is DefaultInterval.
	Interval time.Duration
	// Stdout returns the file an exec incarnation's stdout is captured
	// in; nil reads no output.
	Stdout func(session, incarnation string) string
	// AccountOf names the account a role's agents bill to; nil is
	// "default" for every role.
	AccountOf func(role string) string
	// Home is the agents' home directory when their role's env does not
	// say; "" is the daemon's.
	Home string
	// Counter, when set, is told of every addition.
	Counter Counter
	// HookTranscript returns the transcript path the agent's hooks
	// reported for an incarnation (Claude, Codex and Gemini CLI hooks
	// carry transcript_path), "" when none did; nil looks for the file
	// by the agent's session id only.
	HookTranscript func(incarnation string) string
}

// Ledger reads the usage the agents of this host record and adds it to
// the store, one transaction per file read (its rows and its cursor
// together: a daemon killed between two reads neither loses nor
// recounts). Queries read the store, so they see every host's usage.
type Ledger struct {
	o Options

	mu sync.Mutex // guards the fields below
	// cursors are the cursors of the files read, as last written, by path.
	cursors map[string]store.UsageCursor
	// found are the transcript paths found, by incarnation.
	found map[string]string
	// last are the incarnations read in the last round, by id: one that
	// ended is read once more, for its last lines.
	last map[string]target
	// done are the ended incarnations read that last time.
	done map[string]bool
	// totals caches SessionTotals.
	totals   map[string]Totals
	totalsAt time.Time
}

// New returns a ledger; Run it.
func New(o Options) *Ledger {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	return &Ledger{o: o, cursors: map[string]store.UsageCursor{}, found: map[string]string{}, last: map[string]target{}, done: map[string]bool{}}
}

// Run reads the files every interval until ctx is done.
func (l *Ledger) Run(ctx context.Context) error {
	t := time.NewTicker(l.o.Interval)
	defer t.Stop()
	for {
		l.safeOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// safeOnce is Once with a panic logged instead of ending the daemon.
func (l *Ledger) safeOnce(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			l.o.Log.Error("usage: panic in a round", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if err := l.Once(ctx); err != nil && ctx.Err() == nil {
		l.o.Log.Warn("usage: round failed", "err", err)
	}
}

// target is one incarnation whose files are read.
type target struct {
	inc   herd.Incarnation
	role  string
	agent string
	env   map[string]string
}

// file is one file of a target.
type file struct {
	path   string
	format Format
	source string
}

// Once reads what every incarnation of this host added to its files
// since the last round.
func (l *Ledger) Once(ctx context.Context) error {
	targets, err := l.targets(ctx)
	if err != nil {
		return err
	}
	// A file read by two incarnations (a conversation resumed before the
	// old one was recorded ended) counts to the newest.
	byPath := map[string]struct {
		t target
		f file
	}{}
	for _, t := range targets {
		for _, f := range l.files(t) {
			if cur, ok := byPath[f.path]; !ok || t.inc.StartedAt.After(cur.t.inc.StartedAt) {
				byPath[f.path] = struct {
					t target
					f file
				}{t, f}
			}
		}
	}
	var errs []error
	for _, tf := range byPath {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := l.read(ctx, tf.t, tf.f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// targets lists this host's open incarnations, and those of the last
// round that ended since (read a last time).
func (l *Ledger) targets(ctx context.Context) ([]target, error) {
	var (
		open     []herd.Incarnation
		sessions []herd.Session
		roles    []herd.Role
		ended    []herd.Incarnation
	)
	l.mu.Lock()
	last, done := l.last, l.done
	l.mu.Unlock()
	err := l.o.Store.View(ctx, func(tx store.Tx) (err error) {
		if open, err = tx.OpenIncarnationsOnHost(l.o.Host); err != nil {
			return err
		}
		if sessions, err = tx.SessionsOnHost(l.o.Host); err != nil {
			return err
		}
		if roles, err = tx.Roles(); err != nil {
			return err
		}
		ended = ended[:0]
		isOpen := make(map[string]bool, len(open))
		for _, inc := range open {
			isOpen[inc.ID] = true
		}
		var gone []string
		for id := range last {
			if !isOpen[id] {
				gone = append(gone, id)
			}
		}
		// A session's last incarnation that ended before a round saw it
		// open (a short run, or one that ended while no daemon ran) is
		// read once too.
		for _, s := range sessions {
			if id := s.Incarnation; id != "" && !done[id] && !isOpen[id] && last[id].inc.ID == "" {
				gone = append(gone, id)
			}
		}
		for _, id := range gone {
			if inc, err := tx.Incarnation(id); err == nil && inc.Host == l.o.Host {
				ended = append(ended, inc)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("usage: list incarnations: %w", err)
	}
	roleOf := map[string]string{}
	for _, s := range sessions {
		roleOf[s.Name] = s.Role
	}
	byRole := map[string]herd.Role{}
	for _, r := range roles {
		byRole[r.Name] = r
	}
	next := make(map[string]target, len(open))
	var out []target
	for i, inc := range append(open, ended...) {
		t, ok := last[inc.ID]
		if !ok {
			role := roleOf[inc.Session]
			r := byRole[role]
			t = target{role: role, agent: r.Agent, env: r.Env}
		}
		t.inc = inc
		out = append(out, t)
		if i < len(open) {
			next[inc.ID] = t
		}
	}
	// Done are kept while they are their session's last incarnation.
	nextDone := map[string]bool{}
	for _, inc := range ended {
		nextDone[inc.ID] = true
	}
	for _, s := range sessions {
		if done[s.Incarnation] {
			nextDone[s.Incarnation] = true
		}
	}
	l.mu.Lock()
	l.last, l.done = next, nextDone
	for id := range l.found {
		if _, ok := next[id]; !ok {
			delete(l.found, id)
		}
	}
	l.mu.Unlock()
	return out, nil
}

// configDirEnv names, per agent kind, the variable that moves its
// configuration directory away from $HOME.
var configDirEnv = map[string]string{
	herd.AgentClaude: "CLAUDE_CONFIG_DIR",
	herd.AgentCodex:  "CODEX_HOME",
	herd.AgentGemini: "GEMINI_CLI_HOME",
}

// cursor returns the cursor of path: the one kept in memory, else the
// store's (a daemon restarted reads on where the last one stopped).
func (l *Ledger) cursor(ctx context.Context, path string) (store.UsageCursor, error) {
	l.mu.Lock()
	c, ok := l.cursors[path]
	l.mu.Unlock()
	if ok {
		return c, nil
	}
	err := l.o.Store.View(ctx, func(tx store.Tx) (err error) {
		c, err = tx.UsageCursor(l.o.Host, path)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.UsageCursor{Host: l.o.Host, Path: path}, nil
	}
	return c, err
}

// read adds what f gained since its cursor: a stat when it did not grow.
func (l *Ledger) read(ctx context.Context, t target, f file) error {
	fi, err := os.Stat(f.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // not written yet, or gone
		}
		return fmt.Errorf("usage: %s: %w", f.path, err)
	}
	cur, err := l.cursor(ctx, f.path)
	if err != nil {
		return fmt.Errorf("usage: cursor of %s: %w", f.path, err)
	}
	ident := fileIdent(fi)
	if cur.Ident == ident && cur.Offset == fi.Size() {
		return nil
	}
	var st State
	if cur.State != "" {
		if err := json.Unmarshal([]byte(cur.State), &st); err != nil {
			l.o.Log.Warn("usage: cursor state unreadable, starting afresh", "path", f.path, "err", err)
			st = State{}
		}
	}
	if st.Model == "" {
		st.Model = ArgvModel(t.inc.Argv)
	}
	off := cur.Offset
	if cur.Ident != "" && (cur.Ident != ident || fi.Size() < cur.Offset) {
		// Replaced or cut short: read from the start; the state kept
		// (messages counted, totals seen) keeps what was counted from
		// being counted again.
		l.o.Log.Info("usage: file replaced or shrunk, read again from its start", "path", f.path, "offset", cur.Offset, "size", fi.Size())
		off = 0
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	defer fh.Close()
	prices := Prices(DefaultPrices)
	if l.o.Prices != nil {
		prices = l.o.Prices()
	}
	for range 4 { // at most 4 chunks a round per file: a huge backlog does not hold the others up
		c, err := readLines(fh, off, fi.Size())
		if err != nil {
			return fmt.Errorf("usage: read %s: %w", f.path, err)
		}
		if c.skipped {
			l.o.Log.Warn("usage: line too long, skipped", "path", f.path, "offset", off, "max", maxChunk)
		}
		if c.next == off && cur.Ident == ident && off == cur.Offset {
			return nil // nothing whole yet
		}
		rows := map[rowKey]Totals{}
		for _, line := range c.lines {
			if !Relevant(f.format, line) {
				continue
			}
			recs, err := ParseLine(f.format, line, &st)
			if err != nil {
				l.o.Log.Warn("usage: line skipped", "path", f.path, "err", err, "line", clip(line, 120))
				continue
			}
			for _, r := range recs {
				at := r.At
				if at.IsZero() {
					at = time.Now()
				}
				k := rowKey{model: r.Model, hour: at.UTC().Truncate(time.Hour)}
				rows[k] = rows[k].Add(Totals{Tokens: r.Tokens, CostUSD: prices.Cost(r)})
			}
		}
		state, _ := json.Marshal(st)
		next := store.UsageCursor{Host: l.o.Host, Path: f.path, Incarnation: t.inc.ID, Offset: c.next, Ident: ident,
			State: string(state), UpdatedAt: time.Now()}
		if err := l.commit(ctx, t, f, rows, next); err != nil {
			return err
		}
		cur, off = next, c.next
		if off >= fi.Size() {
			return nil
		}
	}
	return nil
}

// rowKey is one row of a file's additions: model and hour.
type rowKey struct {
	model string
	hour  time.Time
}

// commit writes a read's rows and its cursor in one transaction.
func (l *Ledger) commit(ctx context.Context, t target, f file, rows map[rowKey]Totals, c store.UsageCursor) error {
	err := l.o.Store.Update(ctx, func(tx store.Tx) error {
		for k, v := range rows {
			err := tx.AddUsage(store.UsageRow{
				Incarnation: t.inc.ID, Source: f.source, Model: k.model, Hour: k.hour,
				Session: t.inc.Session, Role: t.role, Host: l.o.Host,
				InputTokens: v.Input, OutputTokens: v.Output, CacheReadTokens: v.CacheRead, CacheWriteTokens: v.CacheWrite,
				CostUSD: v.CostUSD,
			})
			if err != nil {
				return err
			}
		}
		return tx.PutUsageCursor(c)
	})
	if err != nil {
		return fmt.Errorf("usage: record %s: %w", f.path, err)
	}
	l.mu.Lock()
	l.cursors[f.path] = c
	if len(rows) > 0 {
		l.totals = nil // SessionTotals reads again
	}
	l.mu.Unlock()
	if l.o.Counter != nil {
		for k, v := range rows {
			l.o.Counter.Usage(t.role, k.model, v.Input, v.Output, v.CacheRead, v.CacheWrite, v.CostUSD)
		}
	}
	return nil
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ArgvModel returns the model a command line names (--model M, -m M,
// --model=M), "" when none.
func ArgvModel(argv []string) string {
	for i, a := range argv {
		if a == "--" {
			break
		}
		if (a == "--model" || a == "-m") && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--model="); ok {
			return v
		}
	}
	return ""
}
