package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"herd"
	"herd/internal/config/tomlpos"
)

// builder overlays a decoded file on Default(), collecting every problem
// with the line of the key it concerns.
type builder struct {
	file    string
	pos     *tomlpos.Positions
	baseDir string
	errs    []*Error
}

// err joins the collected problems in line order.
func (b *builder) err() error {
	slices.SortStableFunc(b.errs, func(x, y *Error) int { return x.Line - y.Line })
	return joinErrors(b.errs)
}

// report records a problem. subject prefixes the message ("" or a role);
// prefix turns the relative keys into paths of the file; fallback keys
// locate it when none of keys is written in the file.
func (b *builder) report(subject, prefix string, p problem, fallback ...string) {
	paths := make([]string, 0, len(p.keys)+len(fallback))
	for _, k := range p.keys {
		paths = append(paths, prefix+k)
	}
	paths = append(paths, fallback...)
	line, key, ok := b.pos.Line(paths...)
	if !ok {
		key = prefix + p.keys[0]
	}
	msg := p.keys[0] + ": " + p.msg
	if subject != "" {
		msg = subject + ": " + msg
	} else {
		msg = prefix + msg
	}
	b.errs = append(b.errs, &Error{File: b.file, Line: line, Key: key, Err: fmt.Errorf("%s", msg)})
}

// fail records a problem with the file-level key path key.
func (b *builder) fail(key, format string, args ...any) {
	b.report("", "", problem{[]string{key}, fmt.Sprintf(format, args...)})
}

// duration parses *src into *dst when the key is present. It returns false
// when the value is present but invalid (already reported).
func (b *builder) duration(dst *time.Duration, src *string, report func(string)) bool {
	if src == nil {
		return true
	}
	d, err := time.ParseDuration(*src)
	if err != nil {
		report(fmt.Sprintf(`invalid duration %q: use Go duration syntax such as "90s" or "5m"`, *src))
		return false
	}
	*dst = d
	return true
}

// positive sets *dst from the duration at key, which must be above zero.
func (b *builder) positive(dst *time.Duration, src *string, key string) {
	var d time.Duration
	if src == nil || !b.duration(&d, src, func(msg string) { b.fail(key, "%s", msg) }) {
		return
	}
	if d <= 0 {
		b.fail(key, "must be positive, got %q", *src)
		return
	}
	*dst = d
}

// nonNegative sets *dst from the duration at key, which must be zero
// ("0" or "0s": keep all) or above.
func (b *builder) nonNegative(dst *time.Duration, src *string, key string) {
	var d time.Duration
	if src == nil || !b.duration(&d, src, func(msg string) { b.fail(key, "%s", msg) }) {
		return
	}
	if d < 0 {
		b.fail(key, "must be 0 (keep all) or positive, got %q", *src)
		return
	}
	*dst = d
}

// set copies *src into *dst when the key is present.
func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// build overlays f on the defaults and validates the result.
func (b *builder) build(f *fileConfig) *Config {
	c := Default()

	if f.Daemon.Host != nil && *f.Daemon.Host != "" {
		c.Daemon.Host = *f.Daemon.Host
	}
	b.store(c, f)
	b.tmuxProbe(c, f)
	b.restartDefaults(c, f)

	b.positive(&c.Watchdog.StallAfter, f.Watchdog.StallAfter, "watchdog.stall_after")
	b.positive(&c.Watchdog.StallRepeat, f.Watchdog.StallRepeat, "watchdog.stall_repeat")
	b.positive(&c.Watchdog.LivenessTimeout, f.Watchdog.LivenessTimeout, "watchdog.liveness_timeout")
	set(&c.Watchdog.StallAutoKill, f.Watchdog.StallAutoKill)

	b.positive(&c.Reaper.Interval, f.Reaper.Interval, "reaper.interval")
	b.positive(&c.Reaper.IdleAfter, f.Reaper.IdleAfter, "reaper.idle_after")
	set(&c.Reaper.Orphans, f.Reaper.Orphans)
	set(&c.Reaper.Archived, f.Reaper.Archived)

	b.positive(&c.Escalation.WaitingAfter, f.Escalation.WaitingAfter, "escalation.waiting_after")
	b.positive(&c.Escalation.UnknownAfter, f.Escalation.UnknownAfter, "escalation.unknown_after")
	b.escalation(c, f)

	set(&c.Metrics.Listen, f.Metrics.Listen)
	if l := c.Metrics.Listen; l != "" {
		if err := checkListen(l); err != nil {
			b.fail("metrics.listen", "%q %v", l, err)
		}
	}

	b.web(c, f.Web)
	b.notify(c, f.Notify)
	b.fleet(c, f.Fleet)
	b.mcp(c, f.MCP)
	b.autoContinue(c, f.AutoCont)
	b.reactions(c, f.Reactions)
	b.prices(c, f.Prices)

	c.Roles = b.roles(f.Role, c.Restart)
	return c
}

// store overlays and checks [store].
func (b *builder) store(c *Config, f *fileConfig) {
	set(&c.Store.Driver, f.Store.Driver)
	set(&c.Store.DSN, f.Store.DSN)
	switch c.Store.Driver {
	case DriverSQLite:
		if c.Store.DSN != "" {
			b.report("", "store.", problem{[]string{"dsn", "driver"}, `only used when driver is "postgres"`})
		}
	case DriverPostgres:
		if c.Store.DSN == "" {
			b.report("", "store.", problem{[]string{"dsn", "driver"}, `required when driver is "postgres"`})
		} else if _, err := pgconn.ParseConfig(c.Store.DSN); err != nil {
			// pgconn's message repeats the DSN with its password masked.
			b.fail("store.dsn", "not a PostgreSQL connection string (a postgres:// URL or key=value pairs): %v", err)
		}
	default:
		b.fail("store.driver", "%s", notOneOf(c.Store.Driver, []string{DriverSQLite, DriverPostgres}))
	}
	switch v := f.Store.EventRetention.(type) {
	case nil:
	case string:
		b.nonNegative(&c.Store.EventRetention, &v, "store.event_retention")
	case int64:
		if v != 0 {
			b.fail("store.event_retention", `%d has no unit: write a duration such as "720h", or 0 to keep all`, v)
		} else {
			c.Store.EventRetention = 0
		}
	default:
		b.fail("store.event_retention", `got %v, want a duration such as "720h", or 0 to keep all`, v)
	}
	set(&c.Store.EventMaxRows, f.Store.EventMaxRows)
	if c.Store.EventMaxRows < 0 {
		b.fail("store.event_max_rows", "must be 0 (keep all) or more, got %d", c.Store.EventMaxRows)
	}
}

// tmuxProbe overlays and checks [tmux] and [probe].
func (b *builder) tmuxProbe(c *Config, f *fileConfig) {
	set(&c.Tmux.Socket, f.Tmux.Socket)
	set(&c.Tmux.Binary, f.Tmux.Binary)
	if strings.ContainsAny(c.Tmux.Socket, "/\x00") {
		b.fail("tmux.socket", "%q must be a socket name (tmux -L), not a path", c.Tmux.Socket)
	}
	if c.Tmux.Binary == "" {
		b.fail("tmux.binary", "must not be empty")
	}

	b.positive(&c.Probe.Interval, f.Probe.Interval, "probe.interval")
	b.positive(&c.Probe.Timeout, f.Probe.Timeout, "probe.timeout")
	set(&c.Probe.Concurrency, f.Probe.Concurrency)
	if c.Probe.Concurrency < 1 {
		b.fail("probe.concurrency", "must be 1 or more, got %d", c.Probe.Concurrency)
	}
	set(&c.Probe.MassDeathFraction, f.Probe.MassDeathFraction)
	if f := c.Probe.MassDeathFraction; !(f > 0 && f <= 1) { // also NaN
		b.fail("probe.mass_death_fraction", "must be above 0 and at most 1, got %v", f)
	}
}

// restartDefaults overlays [restart] and reports the problems of the keys
// the file sets.
func (b *builder) restartDefaults(c *Config, f *fileConfig) {
	var restartSet map[string]bool
	c.Restart, restartSet = b.restart(c.Restart, f.Restart, func(p problem) { b.report("", "restart.", p) })
	for _, p := range restartProblems(c.Restart) {
		if anySet(restartSet, p.keys) {
			b.report("", "restart.", p)
		}
	}
}

// escalation overlays and checks [escalation] command and webhook.
func (b *builder) escalation(c *Config, f *fileConfig) {
	if f.Escalation.Command != nil {
		argv, p := argvOf(f.Escalation.Command, "command")
		if p == nil && len(argv) > 0 {
			ps := argvProblems(argv, "command")
			if len(ps) > 0 {
				p = &ps[0]
			}
		}
		if p != nil {
			b.report("", "escalation.", *p)
		}
		c.Escalation.Command = argv
	}
	set(&c.Escalation.Webhook, f.Escalation.Webhook)
	if w := c.Escalation.Webhook; w != "" {
		if u, err := url.Parse(w); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			b.fail("escalation.webhook", "%q is not an http or https URL", w)
		}
	}
}

// restart overlays the keys of f that are present on base, reporting
// unparsable durations. It returns which keys were written.
func (b *builder) restart(base herd.RestartPolicy, f fileRestart, report func(problem)) (herd.RestartPolicy, map[string]bool) {
	written := map[string]bool{}
	str := func(key string, dst *time.Duration, src *string) {
		if src == nil {
			return
		}
		written[key] = true
		b.duration(dst, src, func(msg string) { report(problem{[]string{key}, msg}) })
	}
	if f.Policy != nil {
		written["policy"] = true
		base.Policy = *f.Policy
	}
	str("initial_backoff", &base.InitialBackoff, f.InitialBackoff)
	str("max_backoff", &base.MaxBackoff, f.MaxBackoff)
	str("reset_after", &base.ResetAfter, f.ResetAfter)
	if f.MaxRestarts != nil {
		written["max_restarts"] = true
		base.MaxRestarts = *f.MaxRestarts
	}
	return base, written
}

// anySet reports whether any of keys was written.
func anySet(written map[string]bool, keys []string) bool {
	for _, k := range keys {
		if written[k] {
			return true
		}
	}
	return false
}

// roles resolves and validates the [[role]] entries.
func (b *builder) roles(fr []fileRole, defaults herd.RestartPolicy) []herd.Role {
	var roles []herd.Role
	seen := map[string]int{} // name -> index of first role with it
	for i, f := range fr {
		prefix := fmt.Sprintf("role[%d].", i)
		header := fmt.Sprintf("role[%d]", i)
		var r herd.Role
		if f.Name != nil {
			r.Name = *f.Name
		}
		subject := roleSubject(r.Name, i)
		report := func(p problem) { b.report(subject, prefix, p, header) }

		if f.Name == nil {
			report(problem{[]string{"name"}, "missing"})
		} else if first, dup := seen[r.Name]; dup && herd.ValidRoleName(r.Name) {
			line, _, _ := b.pos.Line(fmt.Sprintf("role[%d].name", first))
			report(problem{[]string{"name"}, fmt.Sprintf("duplicate of role[%d] on line %d", first, line)})
		} else {
			seen[r.Name] = i
		}

		r.Replicas = 1
		set(&r.Replicas, f.Replicas)
		cmdOK := true
		if f.Command == nil {
			report(problem{[]string{"command"}, `missing; give an argv array, e.g. command = ["claude"]`})
			cmdOK = false
		} else if argv, p := argvOf(f.Command, "command"); p != nil {
			report(*p)
			cmdOK = false
		} else {
			r.Command = argv
		}

		wd := ""
		set(&wd, f.Workdir)
		dir, err := ExpandWorkdir(wd, b.baseDir)
		if err != nil {
			report(problem{[]string{"workdir"}, err.Error()})
		}
		r.Workdir = dir
		if len(f.Env) > 0 {
			r.Env = f.Env
		}
		set(&r.Runtime, f.Runtime)
		set(&r.Agent, f.Agent)
		set(&r.AgentProcess, f.AgentProcess)
		setupOK, includeOK, memOK := b.roleContainment(&r, f, report)
		hostsOK := rolePlacement(&r, f, report)
		roleControl(&r, f, report)
		roleSpend(&r, f)
		checkOK := b.roleTasks(&r, f, report)

		var written map[string]bool
		r.Restart, written = b.restart(defaults, f.Restart, func(p problem) {
			p.keys[0] = "restart." + p.keys[0]
			report(p)
		})
		r = resolveKinds(r)
		if !written["policy"] {
			r.Restart.Policy = inheritedPolicy(r, r.Restart.Policy)
		}

		for _, p := range roleProblems(r) {
			switch {
			case strings.HasPrefix(p.keys[0], "restart."):
				// A value inherited from [restart] is reported there.
				rel := make([]string, len(p.keys))
				for j, k := range p.keys {
					rel[j] = strings.TrimPrefix(k, "restart.")
				}
				if !anySet(written, rel) {
					continue
				}
			case p.keys[0] == "name" && f.Name == nil:
				continue // already reported
			case p.keys[0] == "command" && !cmdOK:
				continue // already reported
			case p.keys[0] == "workdir" && err != nil:
				continue
			case strings.HasPrefix(p.keys[0], "worktree_setup") && !setupOK,
				strings.HasPrefix(p.keys[0], "worktree_include") && !includeOK,
				p.keys[0] == "memory_max" && !memOK,
				(strings.HasPrefix(p.keys[0], "check") || p.keys[0] == "scale_down_after") && !checkOK,
				strings.HasPrefix(p.keys[0], "hosts") && !hostsOK:
				continue // already reported
			}
			report(p)
		}
		roles = append(roles, r)
	}
	return roles
}

// roleTasks decodes a role's task keys into r; it reports values that
// cannot be decoded and returns whether check and check_timeout did.
func (b *builder) roleTasks(r *herd.Role, f fileRole, report func(problem)) bool {
	set(&r.Tasks, f.Tasks)
	set(&r.Merge, f.Merge)
	set(&r.KeepBranch, f.KeepBranch)
	set(&r.MaxReplicas, f.MaxReplicas)
	ok := true
	if !b.duration(&r.ScaleDownAfter, f.ScaleDownAfter, func(msg string) { report(problem{[]string{"scale_down_after"}, msg}) }) {
		ok = false
	}
	if f.Check != nil {
		argv, p := argvOf(f.Check, "check")
		if p != nil {
			report(*p)
			ok = false
		}
		r.Check = argv
	}
	if !b.duration(&r.CheckTimeout, f.CheckTimeout, func(msg string) { report(problem{[]string{"check_timeout"}, msg}) }) {
		ok = false
	}
	return ok
}

// roleContainment decodes a role's worktree and resource keys into r. It
// reports values that cannot be decoded and returns, per key that can
// fail, whether it decoded.
func (b *builder) roleContainment(r *herd.Role, f fileRole, report func(problem)) (setupOK, includeOK, memOK bool) {
	set(&r.Worktree, f.Worktree)
	set(&r.WorktreeBase, f.WorktreeBase)
	set(&r.PidsMax, f.PidsMax)
	set(&r.RestartOnUpdate, f.RestartOnUpdate)
	if f.ResumeOnCrash != nil {
		r.ResumeOnCrash = herd.Bool(*f.ResumeOnCrash)
	}
	if f.AutoContinue != nil {
		r.AutoContinue = herd.Bool(*f.AutoContinue)
	}
	setupOK, includeOK, memOK = true, true, true
	if f.WorktreeSetup != nil {
		argv, p := argvOf(f.WorktreeSetup, "worktree_setup")
		if p != nil {
			report(*p)
			setupOK = false
		}
		r.WorktreeSetup = argv
	}
	if f.WorktreeInclude != nil {
		globs, p := stringsOf(f.WorktreeInclude, "worktree_include")
		if p != nil {
			report(*p)
			includeOK = false
		}
		r.WorktreeInclude = globs
	}
	if f.MemoryMax != nil && *f.MemoryMax != "" {
		n, err := ParseSize(*f.MemoryMax)
		if err != nil {
			report(problem{[]string{"memory_max"}, err.Error()})
			memOK = false
		}
		r.MemoryMax = n
	}
	return setupOK, includeOK, memOK
}

// stringsOf converts a decoded array of strings; a lone string is refused
// with a hint to write an array.
func stringsOf(v any, key string) ([]string, *problem) {
	switch v := v.(type) {
	case string:
		return nil, &problem{[]string{key}, fmt.Sprintf("%q is a string; write an array, e.g. %s = [%q]", v, key, v)}
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, &problem{[]string{fmt.Sprintf("%s[%d]", key, i), key}, fmt.Sprintf("got %v, want a string", e)}
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, &problem{[]string{key}, fmt.Sprintf("got %v, want an array of strings", v)}
}

// argvOf converts a decoded command value to argv. A string is refused with
// a hint to write an array.
func argvOf(v any, key string) ([]string, *problem) {
	switch v := v.(type) {
	case string:
		hint := make([]string, 0, 2)
		for _, w := range strings.Fields(v) {
			hint = append(hint, strconv.Quote(w))
		}
		if len(hint) == 0 {
			hint = append(hint, `"claude"`)
		}
		return nil, &problem{[]string{key}, fmt.Sprintf("%q is a string; write an argv array, e.g. %s = [%s]",
			v, key, strings.Join(hint, ", "))}
	case []any:
		if len(v) == 0 {
			return nil, nil
		}
		argv := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, &problem{[]string{fmt.Sprintf("%s[%d]", key, i), key}, fmt.Sprintf("got %v, want a string", e)}
			}
			argv[i] = s
		}
		return argv, nil
	}
	return nil, &problem{[]string{key}, fmt.Sprintf(`got %v, want an argv array of strings, e.g. ["claude"]`, v)}
}

// checkListen accepts host:port with a numeric port (1-65535); the host
// may be empty (every interface) or an IP or a name.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not host:port, e.g. 127.0.0.1:9464")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("has no valid port, e.g. 127.0.0.1:9464")
	}
	return nil
}
