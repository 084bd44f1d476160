package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

// allErrors flattens a joined error into its *Error leaves.
func allErrors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*Error); ok {
			out = append(out, ce)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}

var lineRE = regexp.MustCompile(`^herd\.toml:\d+: `)

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		key  string // canonical key path in Error.Key ("" for syntax errors)
		text string // must appear in the message
		line int
	}{
		{"unknown key", "[probe]\ninterval = \"1s\"\nintervall = \"2s\"\n",
			"probe.intervall", "probe.intervall: unknown key", 3},
		{"unknown table", "\n[daemonn]\nhost = \"x\"\n",
			"daemonn", "daemonn: unknown key", 2},
		{"unknown key in inline restart", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n[[role]]\nname = \"v\"\ncommand = [\"a\"]\nrestart = { polcy = \"never\" }\n",
			"role[1].restart.polcy", "role[1].restart.polcy: unknown key", 7},
		{"unknown key in role table", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n[role.restart]\npolcy = \"never\"\n",
			"role[0].restart.polcy", "unknown key", 5},
		{"bad duration", "[probe]\n\ninterval = \"1x\"\n",
			"probe.interval", `probe.interval: invalid duration "1x"`, 3},
		{"duration without unit", "[reaper]\nidle_after = \"48\"\n",
			"reaper.idle_after", `reaper.idle_after: invalid duration "48"`, 2},
		{"negative duration", "[watchdog]\nstall_after = \"-5m\"\n",
			"watchdog.stall_after", `watchdog.stall_after: must be positive`, 2},
		{"negative event retention", "[store]\nevent_retention = \"-1h\"\n",
			"store.event_retention", `store.event_retention: must be 0 (keep all) or positive, got "-1h"`, 2},
		{"bad event retention", "[store]\n\nevent_retention = \"30 days\"\n",
			"store.event_retention", `store.event_retention: invalid duration "30 days"`, 3},
		{"event retention integer with no unit", "[store]\nevent_retention = 30\n",
			"store.event_retention", `store.event_retention: 30 has no unit: write a duration such as "720h", or 0 to keep all`, 2},
		{"event retention of another type", "[store]\nevent_retention = true\n",
			"store.event_retention", `store.event_retention: got true, want a duration`, 2},
		{"negative event max rows", "[store]\nevent_max_rows = -5\n",
			"store.event_max_rows", `store.event_max_rows: must be 0 (keep all) or more, got -5`, 2},
		{"event max rows not an integer", "[store]\nevent_max_rows = \"many\"\n",
			"store.event_max_rows", `store.event_max_rows: got a TOML string, want an integer`, 2},
		{"mass death fraction 0", "[probe]\nmass_death_fraction = 0.0\n",
			"probe.mass_death_fraction", `probe.mass_death_fraction: must be above 0 and at most 1, got 0`, 2},
		{"mass death fraction above 1", "[probe]\nmass_death_fraction = 1.5\n",
			"probe.mass_death_fraction", `probe.mass_death_fraction: must be above 0 and at most 1, got 1.5`, 2},
		{"mass death fraction negative", "[probe]\nmass_death_fraction = -0.5\n",
			"probe.mass_death_fraction", `must be above 0 and at most 1`, 2},
		{"mass death fraction nan", "[probe]\nmass_death_fraction = nan\n",
			"probe.mass_death_fraction", `must be above 0 and at most 1, got NaN`, 2},
		{"bad role duration", "[[role]]\nname = \"worker\"\ncommand = [\"a\"]\nrestart = { initial_backoff = \"soon\" }\n",
			"role[0].restart.initial_backoff", `role "worker": restart.initial_backoff: invalid duration "soon"`, 4},
		{"bad default policy", "[restart]\npolicy = \"sometimes\"\n",
			"restart.policy", `restart.policy: "sometimes" is not one of always, on-failure, never`, 2},
		{"bad role policy", "[probe]\ninterval = \"2s\"\n\n[[role]]\nname = \"ok\"\ncommand = [\"a\"]\n[[role]]\nname = \"worker\"\ncommand = [\"a\"]\n\n\nrestart = { policy = \"sometimes\" }\n",
			"role[1].restart.policy", `role "worker": restart.policy: "sometimes" is not one of always, on-failure, never`, 12},
		{"bad runtime", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nruntime = \"docker\"\n",
			"role[0].runtime", `role "w": runtime: "docker" is not one of tmux, exec`, 4},
		{"bad agent", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nagent = \"aider\"\n",
			"role[0].agent", `role "w": agent: "aider" is not one of claude, codex, gemini, generic`, 4},
		{"duplicate role", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n[[role]]\ncommand = [\"a\"]\nname = \"w\"\n",
			"role[1].name", `role "w": name: duplicate of role[0] on line 2`, 6},
		{"bad role name", "[[role]]\nname = \"Worker_1\"\ncommand = [\"a\"]\n",
			"role[0].name", `role[0]: name: "Worker_1" must match`, 2},
		{"long role name", "[[role]]\nname = \"" + strings.Repeat("a", 42) + "\"\ncommand = [\"a\"]\n",
			"role[0].name", `name: "aaaa`, 2},
		{"missing name", "[[role]]\ncommand = [\"a\"]\n",
			"role[0]", `role[0]: name: missing`, 1},
		{"missing command", "\n[[role]]\nname = \"w\"\n",
			"role[0]", `role "w": command: missing`, 2},
		{"empty command", "[[role]]\nname = \"w\"\ncommand = []\n",
			"role[0].command", `role "w": command: must be a non-empty array`, 3},
		{"empty argv0", "[[role]]\nname = \"w\"\ncommand = [\"\", \"x\"]\n",
			"role[0].command", `role "w": command: must be a non-empty array`, 3},
		{"string command", "[[role]]\nname = \"w\"\ncommand = \"claude --resume\"\n",
			"role[0].command", `role "w": command: "claude --resume" is a string; write an argv array, e.g. command = ["claude", "--resume"]`, 3},
		{"non-string argv", "[[role]]\nname = \"w\"\ncommand = [\n  \"a\",\n  7,\n]\n",
			"role[0].command[1]", `role "w": command[1]: got 7, want a string`, 5},
		{"negative replicas", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nreplicas = -1\n",
			"role[0].replicas", `role "w": replicas: must be 0 or more, got -1`, 4},
		{"replicas over the limit", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nreplicas = 2000000000\n",
			"role[0].replicas", `role "w": replicas: must be at most 1000, got 2000000000`, 4},
		{"negative default max_restarts", "[restart]\nmax_restarts = -2\n",
			"restart.max_restarts", `restart.max_restarts: must be 0 (unlimited) or more, got -2`, 2},
		{"negative role max_restarts", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n[role.restart]\nmax_restarts = -1\n",
			"role[0].restart.max_restarts", `role "w": restart.max_restarts: must be 0`, 5},
		{"zero concurrency", "[probe]\nconcurrency = 0\n",
			"probe.concurrency", `probe.concurrency: must be 1 or more, got 0`, 2},
		{"max below initial", "[restart]\ninitial_backoff = \"1m\"\nmax_backoff = \"30s\"\n",
			"restart.max_backoff", `restart.max_backoff: "30s" is less than initial_backoff "1m0s"`, 3},
		{"role initial above default max", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nrestart = { initial_backoff = \"10m\" }\n",
			"role[0].restart.initial_backoff", `role "w": restart.max_backoff: "5m0s" is less than initial_backoff "10m0s"`, 4},
		{"postgres without dsn", "[store]\ndriver = \"postgres\"\n",
			"store.driver", `store.dsn: required when driver is "postgres"`, 2},
		{"postgres with empty dsn", "[store]\ndriver = \"postgres\"\ndsn = \"\"\n",
			"store.dsn", `store.dsn: required when driver is "postgres"`, 3},
		{"bad dsn", "[store]\ndriver = \"postgres\"\ndsn = \"postgres://herd:s3cret@db:notaport/herd\"\n",
			"store.dsn", `store.dsn: not a PostgreSQL connection string`, 3},
		{"bad dsn keyword", "[store]\ndriver = \"postgres\"\ndsn = \"host=db sslmode=sometimes\"\n",
			"store.dsn", `store.dsn: not a PostgreSQL connection string`, 3},
		{"dsn with sqlite", "[store]\ndsn = \"postgres://herd@db/herd\"\n",
			"store.dsn", `store.dsn: only used when driver is "postgres"`, 2},
		{"bad driver", "[store]\ndriver = \"mysql\"\n",
			"store.driver", `store.driver: "mysql" is not one of sqlite, postgres`, 2},
		{"bad env key", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nenv = { \"1X\" = \"v\" }\n",
			"role[0].env.1X", `role "w": env.1X: "1X" is not a valid environment variable name`, 4},
		{"reserved env key", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\n[role.env]\nHERD_SESSION = \"v\"\n",
			"role[0].env.HERD_SESSION", `env.HERD_SESSION: HERD_SESSION is set by herd`, 5},
		{"tilde user", "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nworkdir = \"~bob/src\"\n",
			"role[0].workdir", `role "w": workdir: "~bob/src": only "~" and "~/..." are expanded`, 4},
		{"agent process path", "[[role]]\nname = \"w\"\ncommand = [\"sh\"]\nagent_process = \"/usr/bin/claude\"\n",
			"role[0].agent_process", `agent_process: "/usr/bin/claude" must be a process name`, 4},
		{"escalation string command", "[escalation]\ncommand = \"notify-send\"\n",
			"escalation.command", `escalation.command: "notify-send" is a string`, 2},
		{"bad webhook", "[escalation]\nwebhook = \"example.com/hook\"\n",
			"escalation.webhook", `escalation.webhook: "example.com/hook" is not an http or https URL`, 2},
		{"fleet host timeout negative", "[fleet]\nhost_timeout = \"-30s\"\n",
			"fleet.host_timeout", `fleet.host_timeout: must be positive, got "-30s"`, 2},
		{"fleet host timeout too short", "[fleet]\n\nhost_timeout = \"1s\"\n",
			"fleet.host_timeout", `fleet.host_timeout: must be at least 3s`, 3},
		{"fleet host timeout bad", "[fleet]\nhost_timeout = \"half a minute\"\n",
			"fleet.host_timeout", `fleet.host_timeout: invalid duration "half a minute"`, 2},
		{"fleet lease zero", "[fleet]\nlease = \"0s\"\n",
			"fleet.lease", `fleet.lease: must be positive, got "0s"`, 2},
		{"fleet lease too short", "[fleet]\nlease = \"500ms\"\n",
			"fleet.lease", `fleet.lease: must be at least 1s`, 2},
		{"fleet lease bad", "[fleet]\nlease = \"forever\"\n",
			"fleet.lease", `fleet.lease: invalid duration "forever"`, 2},
		{"fleet ssh string", "[fleet]\nssh = \"ssh -t\"\n",
			"fleet.ssh", `fleet.ssh: "ssh -t" is a string; write an argv array, e.g. ssh = ["ssh", "-t"]`, 2},
		{"fleet ssh empty", "[fleet]\nssh = []\n",
			"fleet.ssh", `fleet.ssh: must be a non-empty array of strings`, 2},
		{"fleet ssh not strings", "[fleet]\nssh = [\"ssh\", 22]\n",
			"fleet.ssh[1]", `fleet.ssh[1]: got 22, want a string`, 2},
		{"fleet unknown key", "[fleet]\nhosts_timeout = \"30s\"\n",
			"fleet.hosts_timeout", `fleet.hosts_timeout: unknown key`, 2},
		{"metrics listen without port", "[metrics]\nlisten = \"127.0.0.1\"\n",
			"metrics.listen", `metrics.listen: "127.0.0.1" is not host:port`, 2},
		{"metrics listen bad port", "[metrics]\nlisten = \"127.0.0.1:http\"\n",
			"metrics.listen", `metrics.listen: "127.0.0.1:http" has no valid port`, 2},
		{"socket path", "[tmux]\nsocket = \"/tmp/sock\"\n",
			"tmux.socket", `tmux.socket: "/tmp/sock" must be a socket name`, 2},
		{"empty binary", "[tmux]\nbinary = \"\"\n",
			"tmux.binary", `tmux.binary: must not be empty`, 2},
		{"type mismatch", "[probe]\ninterval = 5\n",
			"probe.interval", `probe.interval: got a TOML integer, want a string`, 2},
		{"type mismatch in role", "[[role]]\nname = \"w\"\n[[role]]\nname = \"v\"\nreplicas = \"2\"\n",
			"role[1].replicas", `role[1].replicas: got a TOML string, want an integer`, 5},
		{"syntax error", "[probe]\ninterval = \"1s\n",
			"", `basic strings cannot have new lines`, 2},
		{"unclosed table", "\n\n[probe\n",
			"", `expected ']'`, 3},
		{"redefined table", "[probe]\n[probe]\n",
			"probe", `already exists`, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), "herd.toml", "/base")
			if err == nil {
				t.Fatalf("[%s] expected an error, got none", tc.name)
			}
			if cfg != nil {
				t.Errorf("[%s] expected nil config with an error, got %+v", tc.name, cfg)
			}
			for _, l := range strings.Split(err.Error(), "\n") {
				if !lineRE.MatchString(l) {
					t.Errorf("[%s] expected every message to start with file:line, got %q", tc.name, l)
				}
			}
			var match *Error
			for _, e := range allErrors(err) {
				if strings.Contains(e.Error(), tc.text) {
					match = e
					break
				}
			}
			if match == nil {
				t.Fatalf("[%s] expected a message containing %q, got:\n%v", tc.name, tc.text, err)
			}
			if match.Line != tc.line || match.Key != tc.key {
				t.Errorf("[%s] expected line %d key %q, got line %d key %q (%v)",
					tc.name, tc.line, tc.key, match.Line, match.Key, match)
			}
		})
	}
}

func TestParseReportsAllProblemsInLineOrder(t *testing.T) {
	doc := `[[role]]
name = "w"
command = "claude"
restart = { policy = "sometimes", polcy = "x" }
[probe]
interval = "soon"
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if cfg != nil {
		t.Fatalf("expected nil config, got %+v", cfg)
	}
	var got []string
	for _, e := range allErrors(err) {
		got = append(got, e.Key)
	}
	want := []string{"role[0].command", "role[0].restart.polcy", "role[0].restart.policy", "probe.interval"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expected problems in line order (-want +got):\n%s", diff)
	}
}

const fullDoc = `# every key, none at its default
[daemon]
host = "box-1"

[store]
driver = "postgres"
dsn = "postgres://herd@db/herd"
event_retention = "0"
event_max_rows = 5000

[tmux]
socket = ""
binary = "/opt/tmux"

[probe]
interval = "500ms"
timeout = "3s"
concurrency = 4
mass_death_fraction = 0.8

[restart]
policy = "on-failure"
initial_backoff = "5s"
max_backoff = "2m"
reset_after = "15m"
max_restarts = 7

[watchdog]
stall_after = "90s"
stall_repeat = "1m"
liveness_timeout = "20m"
stall_auto_kill = true

[reaper]
interval = "1h"
idle_after = "24h"
orphans = false
archived = false

[escalation]
waiting_after = "10m"
unknown_after = "2m"
command = ["notify-send", "herd"]
webhook = "https://hooks.example.com/herd"

[metrics]
listen = "127.0.0.1:9464"

[fleet]
host_timeout = "45s"
lease = "15s"
ssh = ["ssh", "-o", "BatchMode=yes"]

[[role]]
name = "worker"
replicas = 2
command = ["claude", "--model", "opus"]
workdir = "/srv/app"
env = { LANG = "C.UTF-8", DEBUG = "1" }
runtime = "exec"
agent = "claude"
agent_process = "node"
restart = { policy = "never", initial_backoff = "1s", max_backoff = "1m", reset_after = "5m", max_restarts = 0 }

[[role]]
name = "reviewer"
command = ["/usr/local/bin/codex"]
workdir = "review"
`

func TestParseFullFile(t *testing.T) {
	cfg, err := Parse([]byte(fullDoc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	want := &Config{
		Daemon:  Daemon{Host: "box-1"},
		Store:   Store{Driver: DriverPostgres, DSN: "postgres://herd@db/herd", EventRetention: 0, EventMaxRows: 5000},
		Tmux:    Tmux{Socket: "", Binary: "/opt/tmux"},
		Probe:   Probe{Interval: 500 * time.Millisecond, Timeout: 3 * time.Second, Concurrency: 4, MassDeathFraction: 0.8},
		Restart: herd.RestartPolicy{Policy: herd.PolicyOnFailure, InitialBackoff: 5 * time.Second, MaxBackoff: 2 * time.Minute, ResetAfter: 15 * time.Minute, MaxRestarts: 7},
		Watchdog: Watchdog{StallAfter: 90 * time.Second, StallRepeat: time.Minute,
			LivenessTimeout: 20 * time.Minute, StallAutoKill: true},
		Reaper: Reaper{Interval: time.Hour, IdleAfter: 24 * time.Hour},
		Escalation: Escalation{WaitingAfter: 10 * time.Minute, UnknownAfter: 2 * time.Minute,
			Command: []string{"notify-send", "herd"}, Webhook: "https://hooks.example.com/herd"},
		Metrics:      Metrics{Listen: "127.0.0.1:9464"},
		Web:          Web{Listen: "127.0.0.1:7780"},
		Fleet:        Fleet{HostTimeout: 45 * time.Second, Lease: 15 * time.Second, SSH: []string{"ssh", "-o", "BatchMode=yes"}},
		AutoContinue: DefaultAutoContinue,
		Reactions:    defaultReactions(),
		Roles: []herd.Role{
			{
				Name: "worker", Replicas: 2, Command: []string{"claude", "--model", "opus"},
				Workdir: "/srv/app", Env: map[string]string{"LANG": "C.UTF-8", "DEBUG": "1"},
				Runtime: herd.RuntimeExec, Agent: herd.AgentClaude, AgentProcess: "node",
				Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second,
					MaxBackoff: time.Minute, ResetAfter: 5 * time.Minute, MaxRestarts: 0},
			},
			{
				Name: "reviewer", Replicas: 1, Command: []string{"/usr/local/bin/codex"},
				Workdir: "/base/review", Runtime: herd.RuntimeTmux, Agent: herd.AgentCodex,
				Restart: herd.RestartPolicy{Policy: herd.PolicyOnFailure, InitialBackoff: 5 * time.Second,
					MaxBackoff: 2 * time.Minute, ResetAfter: 15 * time.Minute, MaxRestarts: 7},
			},
		},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("[full file] expected config (-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname: %v", err)
	}
	want := &Config{
		Daemon:  Daemon{Host: host},
		Store:   Store{Driver: "sqlite", EventRetention: 720 * time.Hour, EventMaxRows: 1_000_000},
		Tmux:    Tmux{Socket: "herd", Binary: "tmux"},
		Probe:   Probe{Interval: time.Second, Timeout: 2 * time.Second, Concurrency: 8, MassDeathFraction: 0.5},
		Restart: herd.RestartPolicy{Policy: "always", InitialBackoff: 10 * time.Second, MaxBackoff: 5 * time.Minute, ResetAfter: 10 * time.Minute, MaxRestarts: 5},
		Watchdog: Watchdog{StallAfter: 5 * time.Minute, StallRepeat: 3 * time.Minute,
			LivenessTimeout: 10 * time.Minute, StallAutoKill: false},
		Reaper:       Reaper{Interval: 30 * time.Minute, IdleAfter: 48 * time.Hour, Orphans: true, Archived: true},
		Escalation:   Escalation{WaitingAfter: 30 * time.Minute, UnknownAfter: 5 * time.Minute},
		Web:          Web{Listen: "127.0.0.1:7780"},
		Fleet:        Fleet{HostTimeout: 30 * time.Second, Lease: 20 * time.Second, SSH: []string{"ssh", "-t"}},
		AutoContinue: AutoContinue{Spacing: 10 * time.Second, Jitter: 2 * time.Second},
		Reactions:    defaultReactions(),
	}
	if diff := cmp.Diff(want, Default()); diff != "" {
		t.Errorf("[Default] expected (-want +got):\n%s", diff)
	}
	for _, doc := range []string{"", "# nothing\n", "[daemon]\nhost = \"\"\n[probe]\n"} {
		cfg, err := Parse([]byte(doc), "herd.toml", "/base")
		if err != nil {
			t.Fatalf("[%q] expected no error, got %v", doc, err)
		}
		if diff := cmp.Diff(want, cfg); diff != "" {
			t.Errorf("[%q] expected the defaults (-want +got):\n%s", doc, diff)
		}
	}
}

func TestRestartPartialOverride(t *testing.T) {
	doc := `[restart]
initial_backoff = "20s"

[[role]]
name = "a"
command = ["a"]
restart = { policy = "on-failure", max_restarts = 0 }

[[role]]
name = "b"
command = ["b"]
[role.restart]
max_backoff = "1h"

[[role]]
name = "c"
command = ["c"]
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	base := herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: 20 * time.Second,
		MaxBackoff: 5 * time.Minute, ResetAfter: 10 * time.Minute, MaxRestarts: 5}
	a, b := base, base
	a.Policy, a.MaxRestarts = herd.PolicyOnFailure, 0
	b.MaxBackoff = time.Hour
	want := []herd.RestartPolicy{a, b, base}
	var got []herd.RestartPolicy
	for _, r := range cfg.Roles {
		got = append(got, r.Restart)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expected merged restart policies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(base, cfg.Restart); diff != "" {
		t.Errorf("expected [restart] (-want +got):\n%s", diff)
	}
}

func TestWorkdirExpansion(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	doc := `[[role]]
name = "home"
command = ["a"]
workdir = "~"
[[role]]
name = "under-home"
command = ["a"]
workdir = "~/src/app"
[[role]]
name = "relative"
command = ["a"]
workdir = "sub/../dir"
[[role]]
name = "empty"
command = ["a"]
[[role]]
name = "absolute"
command = ["a"]
workdir = "/srv//x/"
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	want := []string{home, filepath.Join(home, "src/app"), "/base/dir", "/base", "/srv/x"}
	var got []string
	for _, r := range cfg.Roles {
		got = append(got, r.Workdir)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expected workdirs (-want +got):\n%s", diff)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "herd.toml")
	doc := "[[role]]\nname = \"w\"\ncommand = [\"a\"]\nworkdir = \"proj\"\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	if got, want := cfg.Roles[0].Workdir, filepath.Join(dir, "proj"); got != want {
		t.Errorf("[relative workdir] expected %q, got %q", want, got)
	}

	if err := os.WriteFile(path, []byte("[probe]\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2: probe.bogus") {
		t.Errorf("[bad file] expected %q-prefixed error, got %v", path+":2: probe.bogus", err)
	}

	_, err = Load(filepath.Join(dir, "missing.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("[missing file] expected ErrNotExist, got %v", err)
	}
}

func TestInheritedRestartProblemReportedOnce(t *testing.T) {
	doc := `[restart]
policy = "sometimes"
[[role]]
name = "a"
command = ["a"]
[[role]]
name = "b"
command = ["b"]
restart = { policy = "nope" }
`
	_, err := Parse([]byte(doc), "herd.toml", "/base")
	var got []string
	for _, e := range allErrors(err) {
		got = append(got, e.Error())
	}
	want := []string{
		`herd.toml:2: restart.policy: "sometimes" is not one of always, on-failure, never`,
		`herd.toml:9: role "b": restart.policy: "nope" is not one of always, on-failure, never`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expected each bad value reported once, where written (-want +got):\n%s", diff)
	}
}

// FuzzParse checks that no input makes Parse panic, and that a rejected
// document never yields a config.
func FuzzParse(f *testing.F) {
	f.Add([]byte(fullDoc))
	f.Add([]byte("[[role]]\nname = \"w\"\ncommand = \"x\"\nrestart = { polcy = 1 }\n"))
	f.Add([]byte("[[role.x]]\n[[role]]\n[role.restart]\na.b.c = [[1], {x = 2}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "herd.toml", "/base")
		if (cfg == nil) == (err == nil) {
			t.Fatalf("expected exactly one of config and error, got %v and %v", cfg, err)
		}
	})
}

func TestParseRefusesHugeFile(t *testing.T) {
	doc := strings.Repeat("# padding\n", MaxFileSize/10+1)
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if cfg != nil || err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("[huge file] expected a size error, got %v, %v", cfg, err)
	}
}

func TestEventRetentionZero(t *testing.T) {
	for _, doc := range []string{"[store]\nevent_retention = 0\n", "[store]\nevent_retention = \"0\"\n", "[store]\nevent_retention = \"0s\"\n"} {
		cfg, err := Parse([]byte(doc), "herd.toml", "/base")
		if err != nil || cfg.Store.EventRetention != 0 {
			t.Errorf("[%q] expected retention 0 (keep all) … got %v", doc, err)
		}
	}
	cfg, err := Parse([]byte("[store]\nevent_retention = \"48h\"\n"), "herd.toml", "/base")
	if err != nil || cfg.Store.EventRetention != 48*time.Hour {
		t.Errorf("[48h] expected 48h … got %v", err)
	}
}

// TestBadDSNHidesPassword: an invalid DSN is quoted back without its password.
func TestBadDSNHidesPassword(t *testing.T) {
	doc := "[store]\ndriver = \"postgres\"\ndsn = \"postgres://herd:s3cret@db:notaport/herd\"\n"
	_, err := Parse([]byte(doc), "herd.toml", "/base")
	if err == nil {
		t.Fatal("expected an error, got none")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("[message] expected the password masked, got %q", err)
	}
}

func TestPrices(t *testing.T) {
	cfg, err := Parse([]byte(`
[prices."claude-opus-4-8"]
input = 5
output = 25.5
[prices.my-model]
cache_read = 0.1
`), "herd.toml", "/")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prices["claude-opus-4-8"]
	if p.Input == nil || *p.Input != 5 || p.Output == nil || *p.Output != 25.5 || p.CacheRead != nil || p.CacheWrite != nil {
		t.Errorf("expected input 5, output 25.5 and the rest unset, got %+v", p)
	}
	if m := cfg.Prices["my-model"]; m.CacheRead == nil || *m.CacheRead != 0.1 || m.Input != nil {
		t.Errorf("expected cache_read 0.1 alone, got %+v", m)
	}
	for _, tc := range []struct{ doc, want string }{
		{"[prices.m]\ninput = -1\n", "herd.toml:2: prices.m.input"},
		{"[prices.m]\ninput = \"cheap\"\n", "prices.m.input"},
		{"[prices.m]\nprompt = 1\n", "prices.m.prompt: unknown key"},
		{"[prices]\nm = 1\n", "prices.m"},
	} {
		_, err := Parse([]byte(tc.doc), "herd.toml", "/")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("[%q] expected an error naming %q, got %v", tc.doc, tc.want, err)
		}
	}
}
