package attention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"herd"
	"herd/internal/config"
)

// Channel names, as the notified event's data and describe record them.
const (
	ChannelDesktop = "desktop"
	ChannelNtfy    = "ntfy"
	ChannelSlack   = "slack"
	ChannelCommand = "command"
	ChannelWebhook = "webhook"
)

// Note is what a channel sends: the human form and the machine form of
// one firing.
type Note struct {
	// Message is the human form: title, text, action (desktop, ntfy,
	// Slack). Zero for an escalation, which only goes to machine channels.
	Message Message
	// Event is the machine form, the JSON the command reads on stdin and
	// the webhook gets: the escalated event, or the notified event of this
	// channel.
	Event herd.Event
	// Links lead from a notification into the console (ntfy, Slack);
	// zero when the console has no public URL.
	Links Links
}

// Linker gives a notification its links into the console (the web
// console implements it).
type Linker interface {
	// Links returns what a notification of session links to: its inbox
	// item, and one-tap answers to what it asks when there are any.
	Links(ctx context.Context, session string) Links
}

// Links are a notification's links into the console.
type Links struct {
	// Click opens the session's inbox item.
	Click string
	// Actions are one-tap answers, at most three: each URL is a
	// single-use, expiring link whose page asks to confirm.
	Actions []LinkAction
}

// LinkAction is one one-tap answer.
type LinkAction struct {
	Label string
	URL   string
}

// Channel delivers a note one way.
type Channel interface {
	// Name is the channel's name (ChannelDesktop, ...).
	Name() string
	// Send delivers n within ctx's deadline; an error means it did not
	// arrive.
	Send(ctx context.Context, n Note) error
}

var (
	_ Channel = Desktop{}
	_ Channel = Ntfy{}
	_ Channel = Slack{}
	_ Channel = Command{}
	_ Channel = Webhook{}
)

// NotifyChannels returns the channels [notify] configures, in a fixed
// order.
func NotifyChannels(c config.Notify, client *http.Client) []Channel {
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

// EscalationChannels returns the channels [escalation] configures: its
// command (run once per escalation) and webhook (retried until it answers
// 2xx).
func EscalationChannels(c config.Escalation, client *http.Client) []Channel {
	var out []Channel
	if len(c.Command) > 0 {
		out = append(out, Command{Argv: c.Command, Once: true})
	}
	if c.Webhook != "" {
		out = append(out, Webhook{URL: c.Webhook, Client: client})
	}
	return out
}

// once reports whether ch is tried once, success or not.
func once(ch Channel) bool {
	c, ok := ch.(Command)
	return ok && c.Once
}

// Desktop shows the message with notify-send (libnotify), found in PATH.
type Desktop struct {
	// Binary is the program run; "notify-send" when empty.
	Binary string
}

// Name implements Channel.
func (Desktop) Name() string { return ChannelDesktop }

// Send implements Channel: notify-send --app-name=herd --urgency=U -- TITLE TEXT.
func (d Desktop) Send(ctx context.Context, n Note) error {
	bin := d.Binary
	if bin == "" {
		bin = "notify-send"
	}
	m := n.Message
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
func (c Ntfy) Send(ctx context.Context, n Note) error {
	m := n.Message
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Title", m.Title)
	h.Set("Priority", strconv.Itoa(m.Priority()))
	h.Set("Tags", "herd,"+string(m.Need))
	if n.Links.Click != "" {
		h.Set("Click", n.Links.Click)
	}
	if a := ntfyActions(n.Links.Actions); a != "" {
		h.Set("Actions", a)
	}
	return PostHTTP(ctx, c.Client, c.URL, h, []byte(m.Text()))
}

// ntfyMaxActions is how many actions ntfy shows on a notification.
const ntfyMaxActions = 3

// ntfyActions is the Actions header of one-tap answers: "view" actions
// (the link opens the console's confirmation page in the browser; nothing
// is answered from the notification itself).
func ntfyActions(as []LinkAction) string {
	clean := strings.NewReplacer(",", " ", ";", " ", "\"", "'", "\r", " ", "\n", " ")
	var parts []string
	for _, a := range as[:min(len(as), ntfyMaxActions)] {
		label := strings.TrimSpace(clean.Replace(a.Label))
		if label == "" || strings.ContainsAny(a.URL, ",; \r\n") {
			continue
		}
		parts = append(parts, "view, "+clip(label, 40)+", "+a.URL+", clear=true")
	}
	return strings.Join(parts, "; ")
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
func (s Slack) Send(ctx context.Context, n Note) error {
	m := n.Message
	text := "*" + m.Title + "*\n" + m.Body + "\nRun: `" + m.Action + "`"
	msg := map[string]any{"text": text}
	if n.Links.Click != "" {
		// A button to the inbox item (Slack's Block Kit; the text stays
		// the notification's fallback).
		msg["blocks"] = []any{
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": text}},
			map[string]any{"type": "actions", "elements": []any{map[string]any{
				"type": "button", "text": map[string]any{"type": "plain_text", "text": "Open in the console"}, "url": n.Links.Click}}},
		}
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return PostHTTP(ctx, s.Client, s.URL, h, body)
}

// Command runs an argv with the note's event JSON on stdin; a non-zero
// exit is a failure. When ctx ends first, the command is killed with its
// whole process group.
type Command struct {
	Argv []string
	// Once: the command runs once per firing, success or not
	// ([escalation] command); otherwise a failure is tried again.
	Once bool
}

// Name implements Channel.
func (Command) Name() string { return ChannelCommand }

// Send implements Channel.
func (c Command) Send(ctx context.Context, n Note) error {
	payload, err := json.Marshal(n.Event)
	if err != nil {
		return err
	}
	_, err = RunCommand(ctx, c.Argv, payload)
	return err
}

// Webhook POSTs the note's event JSON; only a 2xx answer is a success.
type Webhook struct {
	URL    string
	Client *http.Client
}

// Name implements Channel.
func (Webhook) Name() string { return ChannelWebhook }

// Send implements Channel.
func (w Webhook) Send(ctx context.Context, n Note) error {
	payload, err := json.Marshal(n.Event)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if err := PostHTTP(ctx, w.Client, w.URL, h, payload); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// stderrLimit bounds how much of the command's stderr an error carries.
const stderrLimit = 2048

// RunCommand runs argv with payload on stdin. It returns the exit status
// (-1 when the command could not start or was killed) and an error unless
// the command exited 0. A command still running when ctx ends is killed
// together with its whole process group.
func RunCommand(ctx context.Context, argv []string, payload []byte) (exit int, err error) {
	if len(argv) == 0 {
		return -1, errors.New("command: none configured")
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(payload)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The group id is the command's pid (Setpgid): its children go too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild that escaped the group may hold stderr open; do not
	// wait for it past this.
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if ctx.Err() != nil && cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return -1, fmt.Errorf("command: %s: timed out after %s; process group killed%s", argv[0],
				time.Since(began).Round(time.Millisecond), stderr.suffix())
		}
		return -1, fmt.Errorf("command: %s: %w%s", argv[0], ctx.Err(), stderr.suffix())
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return 0, nil // exited 0; a leftover child kept stderr open
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), fmt.Errorf("command: %s: %w%s", argv[0], err, stderr.suffix())
		}
		return -1, fmt.Errorf("command: %s: %w", argv[0], err)
	}
	return 0, nil
}

// PostHTTP POSTs body to url with headers h (and herd's User-Agent) through
// client (http.DefaultClient when nil); only a 2xx answer is a success, and
// the error of another names the status and the start of the answer.
func PostHTTP(ctx context.Context, client *http.Client, url string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h.Clone()
	req.Header.Set("User-Agent", "herd")
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := strings.TrimSpace(string(answer))
		if msg != "" {
			msg = ": " + msg
		}
		return errors.New(resp.Status + msg)
	}
	return nil
}

// limitedBuffer keeps the first stderrLimit bytes written to it.
type limitedBuffer struct {
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := stderrLimit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// suffix renders the captured stderr for an error message.
func (b *limitedBuffer) suffix() string {
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return ""
	}
	return ": stderr: " + s
}

// NotifiedEvent is a notification as an event of the log (kind notified)
// on channel: the JSON the command and the webhook of [notify] get.
func NotifiedEvent(m Message, channel string) herd.Event {
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
