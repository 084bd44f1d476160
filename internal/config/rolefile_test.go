package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herd"
)

func TestLoadRoles(t *testing.T) {
	role := "[[role]]\nname = \"w\"\ncommand = [\"sleep\", \"1\"]\n"
	tests := []struct {
		name    string
		file    string
		wantErr string
		inherit []string // of role w; nil: none
	}{
		{"roles only: every restart key from the daemon", role, "", RestartKeys},
		{"the role's own keys are its own", role + "restart = { policy = \"never\", max_restarts = 2 }\n", "", []string{"initial_backoff", "max_backoff", "reset_after"}},
		{"dotted keys too", "[[role]]\nname = \"w\"\ncommand = [\"sleep\"]\nrestart.policy = \"never\"\n", "", []string{"initial_backoff", "max_backoff", "max_restarts", "reset_after"}},
		{"a [restart] table: complete over the built-in defaults", "[restart]\nmax_restarts = 1\n" + role, "", nil},
		{"[watchdog] refused", "[watchdog]\nstall_after = \"1m\"\n" + role, "[watchdog] configures the daemon, not roles: put it in the daemon's config file and run 'herd reload'", nil},
		{"several refused at once", "[probe]\ninterval = \"1s\"\n[reaper]\norphans = false\n" + role, "[probe], [reaper] configure the daemon", nil},
		{"an error is still named with its line", role + "replicas = -1\n", "f.toml:4", nil},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "f.toml")
		if err := os.WriteFile(p, []byte(tt.file), 0o600); err != nil {
			t.Fatal(err)
		}
		rf, err := LoadRoles(p)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("[%s] expected an error with %q … got %v", tt.name, tt.wantErr, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("[%s] expected no error … got %v", tt.name, err)
			continue
		}
		if got := rf.Inherit["w"]; !slices.Equal(got, sorted(tt.inherit)) {
			t.Errorf("[%s] expected inherit %v … got %v", tt.name, sorted(tt.inherit), got)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestInherit(t *testing.T) {
	d := herd.RestartPolicy{Policy: herd.PolicyOnFailure, InitialBackoff: time.Second, MaxBackoff: time.Minute, ResetAfter: time.Hour, MaxRestarts: 9}
	r := herd.Role{Name: "w", Restart: herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: 5 * time.Second, MaxRestarts: 0}}
	got, err := Inherit(r, []string{"initial_backoff", "max_restarts"}, d)
	if err != nil {
		t.Fatal(err)
	}
	want := herd.RestartPolicy{Policy: herd.PolicyNever, InitialBackoff: time.Second, MaxRestarts: 9}
	if got.Restart != want {
		t.Errorf("expected %+v … got %+v", want, got.Restart)
	}
	if _, err := Inherit(r, []string{"bogus"}, d); err == nil {
		t.Errorf("expected an unknown key refused")
	}
}

func TestChangedSections(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want []string // name, + when live
	}{
		{"nothing", func(c *Config) {}, nil},
		{"roles are not a section", func(c *Config) { c.Roles = []herd.Role{{Name: "x"}} }, nil},
		{"watchdog", func(c *Config) { c.Watchdog.StallAfter = time.Minute }, []string{"watchdog+"}},
		{"escalation command", func(c *Config) { c.Escalation.Command = []string{"notify"} }, []string{"escalation+"}},
		{"restart and reaper", func(c *Config) { c.Restart.MaxRestarts = 1; c.Reaper.Orphans = false }, []string{"restart+", "reaper+"}},
		{"probe needs a restart", func(c *Config) { c.Probe.Interval = time.Minute }, []string{"probe"}},
		{"reactions", func(c *Config) { c.Reactions.CheckFailed.EscalateAfter = time.Hour }, []string{"reactions+"}},
		{"store, tmux, metrics, daemon", func(c *Config) {
			c.Store.EventMaxRows = 1
			c.Tmux.Socket = "x"
			c.Metrics.Listen = "127.0.0.1:1"
			c.Daemon.Host = "h"
		}, []string{"daemon", "store", "tmux", "metrics"}},
	}
	for _, tt := range tests {
		next := Default()
		tt.edit(next)
		var got []string
		for _, s := range Changed(Default(), next) {
			n := s.Name
			if s.Live {
				n += "+"
			} else if s.Why == "" {
				t.Errorf("[%s] section %s needs a restart and does not say why", tt.name, s.Name)
			}
			got = append(got, n)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("[%s] expected %v … got %v", tt.name, tt.want, got)
		}
	}
}
