package config

import (
	"net/url"
	"time"
)

// Notify is the [notify] table: tell a person at once that a session
// needs them (waiting, blocked, failed, stalled), before any escalation.
type Notify struct {
	// After is how long a condition must hold before it notifies (a
	// debounce: a permission answered within it notifies nobody).
	After time.Duration
	// Desktop shows a desktop notification through notify-send.
	Desktop bool
	// Ntfy is an ntfy topic URL (https://ntfy.sh/TOPIC); "" for none.
	Ntfy string
	// SlackWebhook is a Slack incoming webhook URL, or a Discord one
	// ending in /slack; "" for none.
	SlackWebhook string
	// Command is an argv that gets the notification JSON on stdin.
	Command []string
	// Webhook is a URL the notification JSON is POSTed to.
	Webhook string
}

// Any reports whether a channel is configured.
func (n Notify) Any() bool {
	return n.Desktop || n.Ntfy != "" || n.SlackWebhook != "" || len(n.Command) > 0 || n.Webhook != ""
}

// Equal reports whether a and b are the same settings.
func (n Notify) Equal(o Notify) bool {
	if n.After != o.After || n.Desktop != o.Desktop || n.Ntfy != o.Ntfy || n.SlackWebhook != o.SlackWebhook ||
		n.Webhook != o.Webhook || len(n.Command) != len(o.Command) {
		return false
	}
	for i := range n.Command {
		if n.Command[i] != o.Command[i] {
			return false
		}
	}
	return true
}

type fileNotify struct {
	After        *string `toml:"after"`
	Desktop      *bool   `toml:"desktop"`
	Ntfy         *string `toml:"ntfy"`
	SlackWebhook *string `toml:"slack_webhook"`
	Command      any     `toml:"command"`
	Webhook      *string `toml:"webhook"`
}

// notify overlays the [notify] keys of f on c.Notify.
func (b *builder) notify(c *Config, f fileNotify) {
	b.nonNegative(&c.Notify.After, f.After, "notify.after")
	set(&c.Notify.Desktop, f.Desktop)
	for _, u := range []struct {
		key string
		dst *string
		src *string
	}{
		{"notify.ntfy", &c.Notify.Ntfy, f.Ntfy},
		{"notify.slack_webhook", &c.Notify.SlackWebhook, f.SlackWebhook},
		{"notify.webhook", &c.Notify.Webhook, f.Webhook},
	} {
		set(u.dst, u.src)
		if *u.dst != "" && !httpURL(*u.dst) {
			b.fail(u.key, "%q is not an http or https URL", *u.dst)
		}
	}
	if f.Command == nil {
		return
	}
	argv, p := argvOf(f.Command, "command")
	if p == nil && len(argv) > 0 {
		if ps := argvProblems(argv, "command"); len(ps) > 0 {
			p = &ps[0]
		}
	}
	if p != nil {
		b.report("", "notify.", *p)
		return
	}
	c.Notify.Command = argv
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
