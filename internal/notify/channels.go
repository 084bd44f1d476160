package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/escalation"
)

// Channel names, as the notified event's data records them.
const (
	ChannelDesktop = "desktop"
	ChannelNtfy    = "ntfy"
	ChannelSlack   = "slack"
	ChannelCommand = "command"
	ChannelWebhook = "webhook"
)

// Timeout bounds one delivery attempt on any channel.
const Timeout = 10 * time.Second

// Channel delivers a message one way.
type Channel interface {
	// Name is the channel's name (ChannelDesktop, ...).
	Name() string
	// Send delivers m; an error means try again later.
	Send(ctx context.Context, m Message) error
}

// Channels returns the channels [notify] configures, in a fixed order.
func Channels(c config.Notify, client *http.Client) []Channel {
	var out []Channel
	if c.Desktop {
		out = append(out, Desktop{})
	}
	if c.Ntfy != "" {
		out = append(out, Ntfy{URL: c.Ntfy, Client: client})
	}
	if c.SlackWebhook != "" {
		out = append(out, Slack{URL: c.SlackWebhook, Client: client})
	}
	if len(c.Command) > 0 {
		out = append(out, Command{Argv: c.Command})
	}
	if c.Webhook != "" {
		out = append(out, Webhook{URL: c.Webhook, Client: client})
	}
	return out
}

// Desktop shows the message with notify-send (libnotify), found in PATH.
type Desktop struct {
	// Binary is the program run; "notify-send" when empty.
	Binary string
}

// Name implements Channel.
func (Desktop) Name() string { return ChannelDesktop }

// Send implements Channel: notify-send --app-name=herd --urgency=U -- TITLE TEXT.
func (d Desktop) Send(ctx context.Context, m Message) error {
	bin := d.Binary
	if bin == "" {
		bin = "notify-send"
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	urgency := "normal"
	if m.Priority() >= 4 {
		urgency = "critical"
	}
	cmd := exec.CommandContext(ctx, bin, "--app-name=herd", "--urgency="+urgency, "--", m.Title, m.Text())
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%s: %w: %s", bin, err, clip(msg, 512))
		}
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}

// Ntfy publishes the message to an ntfy topic URL: the text as the body,
// with Title, Priority and Tags headers.
type Ntfy struct {
	URL    string
	Client *http.Client
}

// Name implements Channel.
func (Ntfy) Name() string { return ChannelNtfy }

// Send implements Channel.
func (n Ntfy) Send(ctx context.Context, m Message) error {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Title", m.Title)
	h.Set("Priority", strconv.Itoa(m.Priority()))
	h.Set("Tags", "herd,"+string(m.Need))
	return post(ctx, n.Client, n.URL, h, []byte(m.Text()))
}

// Slack posts {"text": ...} to an incoming webhook: Slack's, or
// Discord's with "/slack" appended to its URL (Discord's Slack-compatible
// endpoint).
type Slack struct {
	URL    string
	Client *http.Client
}

// Name implements Channel.
func (Slack) Name() string { return ChannelSlack }

// Send implements Channel.
func (s Slack) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(map[string]string{"text": "*" + m.Title + "*\n" + m.Body + "\nRun: `" + m.Action + "`"})
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return post(ctx, s.Client, s.URL, h, body)
}

// Command runs an argv with the notification's event JSON on stdin; a
// non-zero exit is a failure, tried again.
type Command struct {
	Argv []string
}

// Name implements Channel.
func (Command) Name() string { return ChannelCommand }

// Send implements Channel.
func (c Command) Send(ctx context.Context, m Message) error {
	payload, err := json.Marshal(Event(m, ChannelCommand))
	if err != nil {
		return err
	}
	n := escalation.Notifier{Command: c.Argv, CommandTimeout: Timeout}
	_, err = n.Run(ctx, payload)
	return err
}

// Webhook POSTs the notification's event JSON.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Name implements Channel.
func (Webhook) Name() string { return ChannelWebhook }

// Send implements Channel.
func (w Webhook) Send(ctx context.Context, m Message) error {
	payload, err := json.Marshal(Event(m, ChannelWebhook))
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return post(ctx, w.Client, w.URL, h, payload)
}

// Event is the notification as an event of the log (kind notified), the
// JSON the command and the webhook get.
func Event(m Message, channel string) herd.Event {
	data := map[string]any{
		"channel": channel, "need": string(m.Need), "title": m.Title,
		"action": m.Action, "role": m.Role, "since": m.Since.Format(time.RFC3339Nano),
	}
	if m.Reason != "" {
		data["cause"] = m.Reason
	}
	if m.ResetAt != nil {
		data["reset_at"] = m.ResetAt.Format(time.RFC3339)
	}
	return herd.Event{
		Time: time.Now().UTC(), Host: m.Host, Session: m.Session, Incarnation: m.Incarnation,
		Kind: herd.EventNotified, Reason: string(m.Need), Message: m.Title + ": " + m.Body + " Run: " + m.Action, Data: data,
	}
}

// post sends body to url; only a 2xx answer is a success.
func post(ctx context.Context, client *http.Client, url string, h http.Header, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	return escalation.PostHTTP(ctx, client, url, h, body)
}
