package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
)

// TestConsoleUsers drives the people of the console through the real
// binary: users added and refused, a user's token reading and typing
// into an agent (the console event naming the user in data.by), a
// read-only user's login link that cannot act, and a removed user's
// token and cookie refused at once.
func TestConsoleUsers(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart+"[web]\nlisten = \"127.0.0.1:0\"\n")
	e.start()
	e.must("run", "w", "--", "cat")
	e.waitState("w-0", herd.StateRunning, 20*time.Second)

	e.must("web", "user", "add", "alice")
	e.must("web", "user", "add", "rob", "--read-only")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"web", "user", "add", "alice"}, "user alice exists"},
		{[]string{"web", "user", "add", "Alice!"}, `user name "Alice!"`},
		{[]string{"web", "user", "remove", "nobody"}, "user nobody not found"},
		{[]string{"web", "token", "--user", "nobody"}, "user nobody not found"},
		{[]string{"web", "token"}, "--user NAME is required"},
		{[]string{"web", "url", "--user", "nobody"}, "user nobody not found"},
	} {
		out, errOut, code := e.herd(c.args...)
		if code == 0 || !strings.Contains(errOut, c.says) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("[herd %s] expected a non-zero exit and one line saying %q … got %d %q %q", strings.Join(c.args, " "), c.says, code, out, errOut)
		}
	}
	var list []api.User
	if err := json.Unmarshal([]byte(e.must("web", "user", "list", "-o", "json")), &list); err != nil || len(list) != 2 ||
		list[0].Name != "alice" || list[0].ReadOnly || list[1].Name != "rob" || !list[1].ReadOnly {
		t.Errorf("[list] expected alice and read-only rob … got %+v %v", list, err)
	}

	tok := strings.TrimSpace(e.must("web", "token", "--user", "alice"))
	link := strings.TrimSpace(e.must("web", "url", "--user", "rob"))
	base, _, ok := strings.Cut(link, "/login")
	if !ok || len(tok) != 64 {
		t.Fatalf("[token and link] expected a token and a login link … got %q %q", tok, link)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(cl *http.Client, method, path string, h map[string]string, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("[%s %s] %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	alice := map[string]string{"Authorization": "Bearer " + tok}
	if got := call(client, "GET", "/api/v1/sessions", alice, ""); got != http.StatusOK {
		t.Fatalf("[alice's token reads] expected 200 … got %d", got)
	}
	if got := call(client, "POST", "/api/v1/sessions/w-0/input", alice, `{"text":"hello from alice"}`); got != http.StatusOK {
		t.Fatalf("[alice's token types] expected 200 … got %d", got)
	}
	e.waitFor("alice's input on the agent's screen", 15*time.Second, func() bool {
		return strings.Contains(e.try("logs", "w-0"), "hello from alice")
	})
	var by []string
	for _, ev := range e.events("--kind", herd.EventConsole) {
		b, _ := ev.Data["by"].(string)
		by = append(by, ev.Reason+" by "+b)
	}
	if len(by) != 1 || by[0] != "input by alice" {
		t.Errorf("[event] expected the input by alice … got %q", by)
	}

	// rob logs in with his link: he sees, and cannot act.
	jar, _ := cookiejar.New(nil)
	rob := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	if got := call(rob, "GET", strings.TrimPrefix(link, base), nil, ""); got != http.StatusOK {
		t.Fatalf("[rob's link page] expected 200 … got %d", got)
	}
	u, _ := url.Parse(link)
	form := url.Values{"t": {u.Query().Get("t")}}.Encode()
	if got := call(rob, "POST", "/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": base}, form); got != http.StatusOK {
		t.Fatalf("[rob's login] expected 200 … got %d", got)
	}
	resp, err := rob.Get(base + "/api/v1/whoami")
	if err != nil {
		t.Fatal(err)
	}
	var who struct{ Scope, CSRF string }
	json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if who.Scope != "read" || who.CSRF == "" {
		t.Fatalf("[rob's whoami] expected the read scope … got %+v", who)
	}
	robPost := map[string]string{"X-Herd-CSRF": who.CSRF, "Origin": base}
	if got := call(rob, "POST", "/api/v1/sessions/w-0/input", robPost, `{"text":"hello from rob"}`); got != http.StatusForbidden {
		t.Errorf("[rob types] expected 403 … got %d", got)
	}
	if got := call(rob, "POST", "/api/v1/sessions/w-0/stop", robPost, ""); got != http.StatusForbidden {
		t.Errorf("[rob stops] expected 403 … got %d", got)
	}

	// Removed: the next request is refused, and adding the names again
	// does not revive what they held.
	e.must("web", "user", "remove", "alice")
	if got := call(client, "GET", "/api/v1/sessions", alice, ""); got != http.StatusUnauthorized {
		t.Errorf("[removed alice's token] expected 401 … got %d", got)
	}
	e.must("web", "user", "remove", "rob")
	e.must("web", "user", "add", "rob")
	if got := call(rob, "GET", "/api/v1/sessions", nil, ""); got != http.StatusUnauthorized {
		t.Errorf("[removed rob's cookie] expected 401 … got %d", got)
	}
	if s, ok := e.session("w-0"); !ok || s.State != herd.StateRunning {
		t.Errorf("[the agent] expected w-0 running, untouched by rob … got %+v", s)
	}
}
