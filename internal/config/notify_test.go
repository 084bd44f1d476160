package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseNotify(t *testing.T) {
	doc := `[notify]
after = "2s"
desktop = true
ntfy = "https://ntfy.sh/herd-alerts"
slack_webhook = "https://hooks.slack.com/services/T/B/X"
command = ["notify.sh", "--all"]
webhook = "http://127.0.0.1:9000/herd"
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	want := Notify{
		After: 2 * time.Second, Desktop: true, Ntfy: "https://ntfy.sh/herd-alerts",
		SlackWebhook: "https://hooks.slack.com/services/T/B/X", Command: []string{"notify.sh", "--all"},
		Webhook: "http://127.0.0.1:9000/herd",
	}
	if d := cmp.Diff(want, cfg.Notify); d != "" {
		t.Errorf("notify (-want +got):\n%s", d)
	}
	if !cfg.Notify.Any() {
		t.Error("expected Any() with channels set")
	}
	def := Default().Notify
	if def.After != 0 || def.Any() {
		t.Errorf("expected defaults after 0s and no channel, got %+v", def)
	}
}

func TestParseNotifyErrors(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"bad after", "[notify]\nafter = \"soon\"\n", `herd.toml:2: notify.after: invalid duration "soon"`},
		{"negative after", "[notify]\nafter = \"-1s\"\n", `herd.toml:2: notify.after: must be 0`},
		{"ntfy not a url", "[notify]\n\nntfy = \"herd-topic\"\n", `herd.toml:3: notify.ntfy: "herd-topic" is not an http or https URL`},
		{"slack scheme", "[notify]\nslack_webhook = \"ftp://x/y\"\n", `herd.toml:2: notify.slack_webhook: "ftp://x/y" is not an http or https URL`},
		{"webhook", "[notify]\nwebhook = \"nohost\"\n", `herd.toml:2: notify.webhook: "nohost" is not an http or https URL`},
		{"command string", "[notify]\ncommand = \"notify.sh -x\"\n", `herd.toml:2: notify.command: "notify.sh -x" is a string; write an argv array`},
		{"desktop type", "[notify]\ndesktop = \"yes\"\n", `herd.toml:2: notify.desktop: got a TOML string, want a boolean`},
		{"unknown key", "[notify]\nemail = \"me@example.com\"\n", `herd.toml:2: notify.email: unknown key`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc), "herd.toml", "/base")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("[%s] expected an error containing %q, got %v", c.name, c.want, err)
		}
	}
}

func TestParseResumeAndContinueKeys(t *testing.T) {
	doc := `[[role]]
name = "a"
command = ["claude"]
workdir = "/srv"
[[role]]
name = "b"
command = ["claude"]
workdir = "/srv"
resume_on_crash = false
auto_continue = false
`
	cfg, err := Parse([]byte(doc), "herd.toml", "/base")
	if err != nil {
		t.Fatalf("expected no error, got %v", err)
	}
	a, b := cfg.Roles[0], cfg.Roles[1]
	if !a.ResumesOnCrash() || !a.ContinuesAfterReset() {
		t.Errorf("[defaults] expected resume_on_crash and auto_continue true, got %v %v", a.ResumesOnCrash(), a.ContinuesAfterReset())
	}
	if b.ResumesOnCrash() || b.ContinuesAfterReset() {
		t.Errorf("[set false] expected both false, got %v %v", b.ResumesOnCrash(), b.ContinuesAfterReset())
	}
}
