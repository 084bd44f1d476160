package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/mockapi"
	"herd/internal/web"
	webinbox "herd/internal/web/inbox"
)

// refusalRounds is how many free-text replies each agent gets.
const refusalRounds = 20

// refusalAgent is what a round needs to know of one agent.
type refusalAgent struct {
	kind string
	env  string // the variable naming its binary
	// prompt makes the mock call the shell tool (with the command
	// ToolCommands chose).
	prompt string
	// hookOnly: herd does not read this agent's dialog from the screen
	// yet, so its inbox item is the hook's and need not show the command.
	hookOnly bool
}

var refusalAgents = []refusalAgent{
	{kind: herd.AgentClaude, env: "HERD_REAL_CLAUDE", prompt: mockapi.TriggerTool + ": create the marker"},
	{kind: herd.AgentCodex, env: "HERD_REAL_CODEX", prompt: "run the " + mockapi.TriggerTool + " " + mockapi.TriggerEscalate},
	{kind: herd.AgentGemini, env: "HERD_REAL_GEMINI", prompt: "run the " + mockapi.TriggerTool, hookOnly: true},
}

// TestRealFreeTextRefusal proves that a reply in words to a real agent's
// permission dialog, sent through the console's API (POST
// /api/v1/sessions/NAME/answer with "text"), refuses the tool and reaches
// the model with its words, with every core kept busy: for each agent
// (HERD_REAL_CLAUDE, HERD_REAL_CODEX, HERD_REAL_GEMINI; scripts/real-agents.sh
// sets them), 20 rounds of a prompt, the mock's shell call of a command
// that would create a marker file of the round's own, the dialog listed
// by the inbox, and the reply "no, use ls instead (round N)". Each round
// must be answered 200 (a 409 "the dialog did not close" fails it), the
// mock's next request of the conversation must carry the call refused
// and the reply's words, the marker never exist, and the agent be idle at
// its prompt again. It logs the rounds passed and how long the answers
// took (p50, max).
func TestRealFreeTextRefusal(t *testing.T) {
	for _, ag := range refusalAgents {
		t.Run(ag.kind, func(t *testing.T) {
			path := os.Getenv(ag.env)
			if path == "" {
				t.Skip(ag.env + " is not set (scripts/real-agents.sh sets it)")
			}
			a := startRealAgent(t, ag.kind, path)
			inbox := consoleInbox(t, a.base, a.e.dir)
			answer := consoleAnswer(t, a.base, a.e.dir)
			busy(t)
			var took []time.Duration
			passed := 0
			for n := 1; n <= refusalRounds; n++ {
				d, ok := refuseRound(t, a, ag, inbox, answer, n)
				if d > 0 {
					took = append(took, d)
				}
				if ok {
					passed++
				}
			}
			// Each reply reached the model once: none sent again by a
			// second Enter, none left on the input line for a later one.
			time.Sleep(5 * time.Second) // a second submission comes within seconds
			if last, ok := lastOfConversation(a.mock.Records()); ok {
				for n := 1; n <= refusalRounds; n++ {
					if c := holding(last.Users, reply(n)); c > 1 {
						t.Errorf("[round %d] expected the reply sent once, got %d times", n, c)
						passed--
					}
				}
			}
			slices.Sort(took)
			p50, highest := time.Duration(0), time.Duration(0)
			if len(took) > 0 {
				p50, highest = took[len(took)/2], took[len(took)-1]
			}
			t.Logf("%s under load: %d of %d rounds passed; the answer took p50 %s, max %s (%d answered)",
				ag.kind, passed, refusalRounds, p50.Round(time.Millisecond), highest.Round(time.Millisecond), len(took))
			if passed != refusalRounds {
				t.Errorf("[%s] expected %d rounds passed, got %d", ag.kind, refusalRounds, passed)
			}
		})
	}
}

// refuseRound runs round n: it returns how long the answer took (0: no
// answer sent) and whether the round passed; what failed is reported.
func refuseRound(t *testing.T, a *realAgent, ag refusalAgent, inbox func() []webinbox.Item, answer consoleAnswerFunc, n int) (time.Duration, bool) {
	t.Helper()
	marker := fmt.Sprintf("refused-%02d", n)
	command := "touch " + marker
	words := reply(n)
	prompt := fmt.Sprintf("%s (round %d)", ag.prompt, n)
	a.mock.ToolCommands(command)
	before := len(a.mock.Records())
	a.submit(prompt)
	var item webinbox.Item
	a.e.waitFor(fmt.Sprintf("round %d: the permission in the inbox", n), 90*time.Second, func() bool {
		for _, it := range inbox() {
			if it.Session == a.name && it.Kind == webinbox.KindPermission && (ag.hookOnly || strings.Contains(it.Text, command)) {
				item = it
				return true
			}
		}
		return false
	})
	start := time.Now()
	code, body := answer(a.name, web.AnswerRequest{Text: words, Since: item.Since})
	took := time.Since(start)
	if code != http.StatusOK {
		t.Errorf("[round %d] expected the answer 200, got %d %s; screen:\n%s", n, code, body, a.e.capture(a.name))
		// The round failed; the next starts from the prompt all the same:
		// the turn the words may have started ends, and a dialog still
		// listed after a while is refused at the pane.
		a.e.waitFor(fmt.Sprintf("round %d: %s idle", n, a.name), 90*time.Second, func() bool {
			if v, _ := a.e.session(a.name); v.Activity == herd.ActivityIdle {
				return true
			}
			if time.Since(start) > 15*time.Second && slices.ContainsFunc(inbox(), func(it webinbox.Item) bool {
				return it.Session == a.name && it.Kind == webinbox.KindPermission
			}) {
				a.e.keys(a.name, "Escape")
				time.Sleep(2 * time.Second) // let the agent take the Esc before the next look
			}
			return false
		})
		if _, err := os.Stat(filepath.Join(a.proj, marker)); !os.IsNotExist(err) {
			t.Errorf("[round %d] expected no %s: the refused command ran (%v)", n, marker, err)
		}
		return took, false
	}
	ok := true
	// The call of this round, and the conversation's next request (side
	// requests, a title or a topic, offer no tools).
	var call, next int
	a.e.waitFor(fmt.Sprintf("round %d: the next request after the refused call", n), 60*time.Second, func() bool {
		call, next = -1, -1
		recs := a.mock.Records()
		for i := before; i < len(recs); i++ {
			r := recs[i]
			switch {
			case call < 0 && r.Tool:
				call = i
			case call >= 0 && r.Status == http.StatusOK && len(r.Tools) > 0:
				next = i
				return true
			}
		}
		return false
	})
	rec := a.mock.Records()[next]
	if why := refusal(ag.kind, a.mock.Records()[call], rec, words); why != "" {
		t.Errorf("[round %d] expected the call refused with %q at the API, %s: %+v", n, words, why, rec)
		ok = false
	}
	a.e.waitFor(fmt.Sprintf("round %d: %s idle, its inbox empty", n, a.name), 90*time.Second, func() bool {
		v, _ := a.e.session(a.name)
		return v.Activity == herd.ActivityIdle && !slices.ContainsFunc(inbox(), func(it webinbox.Item) bool { return it.Session == a.name })
	})
	if _, err := os.Stat(filepath.Join(a.proj, marker)); !os.IsNotExist(err) {
		t.Errorf("[round %d] expected no %s: the refused command ran (%v)", n, marker, err)
		ok = false
	}
	t.Logf("round %d: answered %d in %s; the API got %s", n, code, took.Round(time.Millisecond), sent(rec))
	return took, ok
}

// reply is round n's answer in words.
func reply(n int) string { return fmt.Sprintf("no, use ls instead (round %d)", n) }

// lastOfConversation is the last request of the agent's conversation
// (side requests offer no tools).
func lastOfConversation(recs []mockapi.Record) (mockapi.Record, bool) {
	for i := len(recs) - 1; i >= 0; i-- {
		if len(recs[i].Tools) > 0 {
			return recs[i], true
		}
	}
	return mockapi.Record{}, false
}

// holding is how many of users hold s.
func holding(users []string, s string) int {
	n := 0
	for _, u := range users {
		if strings.Contains(u, s) {
			n++
		}
	}
	return n
}

// refusal says what is wrong with next, the conversation's request
// after call, as the refusal of call with words ("" when it is one): the
// words must end the last user message, and the call's result be the
// agent's refusal (Gemini CLI: the call gone).
func refusal(kind string, call, next mockapi.Record, words string) string {
	last := ""
	if len(next.Users) > 0 {
		last = next.Users[len(next.Users)-1]
	}
	if !strings.Contains(last, words) {
		return fmt.Sprintf("the reply is not in the last user message (%q)", last)
	}
	if kind == herd.AgentGemini {
		// Gemini CLI refuses a call in one of two ways: it drops the
		// call from the conversation (no function response, the words
		// the last user turn), or it keeps it with the response
		// {"error":"[Operation Cancelled] Reason: Operation cancelled by
		// user"} before the words.
		added := next.AllResults[min(len(call.AllResults), len(next.AllResults)):]
		switch {
		case len(added) == 0:
			return ""
		case len(added) == 1 && strings.Contains(added[0].Text, "[Operation Cancelled]") && strings.Contains(added[0].Text, "cancelled by user"):
			return ""
		}
		return fmt.Sprintf("expected the call dropped or its response cancelled by the user, got the results %+v", added)
	}
	i := slices.IndexFunc(next.AllResults, func(r mockapi.ToolResult) bool { return r.ToolUseID == call.ToolID })
	if i < 0 {
		return fmt.Sprintf("no result of the call %s", call.ToolID)
	}
	res := next.AllResults[i]
	switch kind {
	case herd.AgentClaude:
		// One user message: the call's tool_result, an error ("The user
		// doesn't want to proceed with this tool use. The tool use was
		// rejected ..."), "[Request interrupted by user for tool use]"
		// and the reply.
		if !res.IsError || !strings.Contains(res.Text, "rejected") || !slices.Contains(next.Results, res) {
			return fmt.Sprintf("the call's result is no refusal sent with the reply: %+v", res)
		}
	case herd.AgentCodex:
		// The call's function_call_output ("Wall time: 2.4 seconds\naborted
		// by user"), a user message "<turn_aborted>…</turn_aborted>", then
		// the reply.
		if !strings.Contains(res.Text, "aborted by user") {
			return fmt.Sprintf("the call's output is no refusal: %+v", res)
		}
	}
	return ""
}

// sent is what r carried back: its last tool result and user message.
func sent(r mockapi.Record) string {
	res := "no tool result"
	if len(r.AllResults) > 0 {
		res = fmt.Sprintf("the result %+v", r.AllResults[len(r.AllResults)-1])
	}
	user := ""
	if len(r.Users) > 0 {
		user = r.Users[len(r.Users)-1]
	}
	return fmt.Sprintf("%s and the user message %q", res, user)
}

// busy keeps every core busy with a shell loop until the test ends.
func busy(t *testing.T) {
	t.Helper()
	var cmds []*exec.Cmd
	for range runtime.NumCPU() {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGKILL)
			_ = c.Wait()
		}
	})
	t.Logf("under load: %d busy loops (sh -c 'while :; do :; done'), one per core", len(cmds))
}

// consoleAnswerFunc posts an answer to session name's need; it returns
// the status and the body.
type consoleAnswerFunc func(name string, req web.AnswerRequest) (int, string)

// consoleAnswer returns a poster of answers through the console's API,
// authenticated with the state dir's token, as a script would.
func consoleAnswer(t *testing.T, base, stateDir string) consoleAnswerFunc {
	t.Helper()
	tok := consoleToken(t, stateDir)
	client := &http.Client{Timeout: 30 * time.Second}
	return func(name string, in web.AnswerRequest) (int, string) {
		t.Helper()
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/sessions/"+name+"/answer", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("[answer] %v", err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(out))
	}
}
