package escalation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Notifier tells a person about an escalation: it runs a command with the
// event JSON on stdin and/or POSTs the event JSON to a webhook. Each call
// is bounded by its timeout.
type Notifier struct {
	// Command is the notifier argv; empty for none.
	Command []string
	// Webhook is the URL to POST to; empty for none.
	Webhook string
	// CommandTimeout bounds one command run; CommandTimeout when zero.
	CommandTimeout time.Duration
	// WebhookTimeout bounds one request; WebhookTimeout when zero.
	WebhookTimeout time.Duration
	// Client makes webhook requests; http.DefaultClient when nil.
	Client *http.Client
}

// Channels says which notifiers n has.
func (n *Notifier) Channels() Channels {
	if n == nil {
		return Channels{}
	}
	return Channels{Command: len(n.Command) > 0, Webhook: n.Webhook != ""}
}

// Deliver runs one delivery round of the escalation ep for payload (the
// event JSON): the channels still pending for ep, command first.
func (n *Notifier) Deliver(ctx context.Context, ep Episode, payload []byte) Round {
	var r Round
	cmd, hook := n.Channels().Pending(ep)
	if cmd {
		r.CommandRan = true
		r.CommandExit, r.CommandErr = n.Run(ctx, payload)
	}
	if hook {
		r.WebhookTried = true
		r.WebhookErr = n.Post(ctx, payload)
	}
	return r
}

// stderrLimit bounds how much of the command's stderr an error carries.
const stderrLimit = 2048

// Run runs the notifier command with payload on stdin. It returns the exit
// status (-1 when the command could not start or was killed) and an error
// unless the command exited 0. A command still running after the timeout
// is killed together with its whole process group.
func (n *Notifier) Run(ctx context.Context, payload []byte) (exit int, err error) {
	if len(n.Command) == 0 {
		return -1, errors.New("notifier: no command")
	}
	timeout := n.CommandTimeout
	if timeout <= 0 {
		timeout = CommandTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Command[0], n.Command[1:]...)
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
			return -1, fmt.Errorf("notifier: %s: timed out after %s; process group killed%s", n.Command[0], timeout, stderr.suffix())
		}
		return -1, fmt.Errorf("notifier: %s: %w%s", n.Command[0], ctx.Err(), stderr.suffix())
	}
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return 0, nil // exited 0; a leftover child kept stderr open
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), fmt.Errorf("notifier: %s: %w%s", n.Command[0], err, stderr.suffix())
		}
		return -1, fmt.Errorf("notifier: %s: %w", n.Command[0], err)
	}
	return 0, nil
}

// Post sends payload to the webhook; only a 2xx answer is a success.
func (n *Notifier) Post(ctx context.Context, payload []byte) error {
	if n.Webhook == "" {
		return errors.New("notifier: no webhook")
	}
	timeout := n.WebhookTimeout
	if timeout <= 0 {
		timeout = WebhookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if err := PostHTTP(ctx, n.Client, n.Webhook, h, payload); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
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
