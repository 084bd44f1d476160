package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAutostartConfig: a daemon started for a command runs with the
// config the state dir's daemon last ran with; a command naming another,
// or a recorded config that is gone, is refused with how to start it.
func TestAutostartConfig(t *testing.T) {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.toml")
	other := filepath.Join(dir, "other.toml")
	for _, p := range []string{fleet, other} {
		if err := os.WriteFile(p, []byte("[probe]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HERD_CONFIG", "")
	for _, c := range []struct {
		name     string
		recorded *string // nil: no daemon ran here yet
		flag     string
		env      string
		want     string // the config started with
		refused  string // a part of the refusal
	}{
		{name: "first start: the command's own", flag: other, want: other},
		{name: "first start, no config", want: ""},
		{name: "no config named: the recorded one", recorded: &fleet, want: fleet},
		{name: "the same one named", recorded: &fleet, flag: fleet, want: fleet},
		{name: "the same one through HERD_CONFIG", recorded: &fleet, env: fleet, want: fleet},
		{name: "another named", recorded: &fleet, flag: other, refused: "used " + fleet + ", not " + other},
		{name: "another through HERD_CONFIG", recorded: &fleet, env: other, refused: "herd daemon --state-dir"},
		{name: "the defaults recorded, a config named", recorded: new(string), flag: other, refused: "no config file (the defaults)"},
		{name: "the defaults recorded, none named", recorded: new(string), want: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			if c.recorded != nil {
				if err := recordConfig(state, *c.recorded, "herd"); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("HERD_CONFIG", c.env)
			g := &globals{config: c.flag}
			got, err := g.autostartConfig(state)
			switch {
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Errorf("expected a refusal with %q … got %q, %v", c.refused, got, err)
			case c.refused == "" && (err != nil || got != c.want):
				t.Errorf("expected %q … got %q, %v", c.want, got, err)
			}
		})
	}
	// The recorded config is gone: refused, naming it.
	state := t.TempDir()
	gone := filepath.Join(dir, "gone.toml")
	if err := recordConfig(state, gone, "herd"); err != nil {
		t.Fatal(err)
	}
	if _, err := (&globals{}).autostartConfig(state); err == nil || !strings.Contains(err.Error(), gone+", is gone") {
		t.Errorf("[gone] expected a refusal naming %s … got %v", gone, err)
	}
}

// TestConfigRecord: the record holds the config, its hash and the tmux
// socket; a state dir's older record (a bare path) still reads; a damaged
// one reads as none.
func TestConfigRecord(t *testing.T) {
	state := t.TempDir()
	cfg := filepath.Join(state, "herd.toml")
	if err := os.WriteFile(cfg, []byte("[probe]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := recordConfig(state, cfg, "fleet"); err != nil {
		t.Fatal(err)
	}
	got, ok := recordedConfig(state)
	if !ok || got.Config != cfg || got.TmuxSocket == nil || *got.TmuxSocket != "fleet" || got.SHA256 != fileHash(cfg) || len(got.SHA256) != 64 {
		t.Errorf("[json] expected %s, its hash and socket fleet, got %+v, %v", cfg, got, ok)
	}
	// The user's default server is recorded too (told apart from none).
	if err := recordConfig(state, "", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := recordedConfig(state); got.TmuxSocket == nil || *got.TmuxSocket != "" {
		t.Errorf("[default server] expected the socket recorded as \"\", got %+v", got)
	}
	for _, c := range []struct {
		content string
		want    ranWith
		ok      bool
	}{
		{"/etc/herd.toml\n", ranWith{Config: "/etc/herd.toml"}, true},
		{"\n", ranWith{}, true},
		{"{not json", ranWith{}, false},
	} {
		if err := os.WriteFile(filepath.Join(state, configRecord), []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, ok := recordedConfig(state); got.Config != c.want.Config || got.TmuxSocket != nil || ok != c.ok {
			t.Errorf("[%q] expected %+v, %v, got %+v, %v", c.content, c.want, c.ok, got, ok)
		}
	}
}
