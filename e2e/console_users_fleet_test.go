package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/web/auth"
)

// TestConsoleUsersFleet: on a fleet sharing PostgreSQL, a user added and
// given a token on one host logs in on another host's console; while the
// store is away, the user verbs say so and every console refuses the
// user's token (503, fail closed) while the machine's own token goes on;
// once it is back the token works again, and a removal on one host ends
// it on the other at once.
func TestConsoleUsersFleet(t *testing.T) {
	t.Parallel()
	pg := startCluster(t)
	dsn := pg.DSN("postgres")
	web := "[web]\nlisten = \"127.0.0.1:0\"\n"
	ha := newFleetEnvWith(t, "ha", dsn, web)
	hb := newFleetEnvWith(t, "hb", dsn, web)
	for _, e := range []*env{ha, hb} {
		e.sb.ExpectErrors(`store unreachable`, `the store is away`)
		e.start()
	}
	base := func(e *env) string {
		t.Helper()
		link := strings.TrimSpace(e.must("web", "url"))
		b, _, ok := strings.Cut(link, "/login")
		if !ok {
			t.Fatalf("[web url] expected a login link … got %q", link)
		}
		return b
	}
	aBase, bBase := base(ha), base(hb)
	ha.must("web", "user", "add", "alice")
	tok := strings.TrimSpace(ha.must("web", "token", "--user", "alice"))
	client := &http.Client{Timeout: 20 * time.Second}
	get := func(base, tok string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("[GET %s] %v", base, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(bBase, tok); got != http.StatusOK {
		t.Fatalf("[alice's token minted on ha, on hb's console] expected 200 … got %d", got)
	}
	if out := hb.must("web", "user", "list"); !strings.Contains(out, "alice") {
		t.Errorf("[hb's list] expected alice … got %q", out)
	}

	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := get(bBase, tok); got != http.StatusServiceUnavailable {
		t.Errorf("[alice's token, store away] expected 503 … got %d", got)
	}
	if _, errOut, code := ha.herd("web", "user", "add", "bob"); code == 0 || !strings.Contains(errOut, "the store is away") {
		t.Errorf("[user add, store away] expected a non-zero exit saying the store is away … got %d %q", code, errOut)
	}
	if _, errOut, code := hb.herd("web", "token", "--user", "alice"); code == 0 || !strings.Contains(errOut, "the store is away") {
		t.Errorf("[web token, store away] expected a non-zero exit saying the store is away … got %d %q", code, errOut)
	}
	raw, err := os.ReadFile(filepath.Join(hb.dir, auth.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	machine := strings.TrimSpace(string(raw))
	if got := get(bBase, machine); got != http.StatusOK {
		t.Errorf("[the machine's token, store away] expected 200 … got %d", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// Each daemon finds the store back on its own: the removal goes
	// through hb once hb has (the full run's one failure: it acted on hb
	// once ha alone had, and hb refused, the store still away for it).
	ha.waitFor("alice's token accepted again", 60*time.Second, func() bool { return get(aBase, tok) == http.StatusOK })
	hb.waitFor("alice's token accepted again on hb", 60*time.Second, func() bool { return get(bBase, tok) == http.StatusOK })
	hb.must("web", "user", "remove", "alice")
	if got := get(aBase, tok); got != http.StatusUnauthorized {
		t.Errorf("[alice removed on hb, her token on ha] expected 401 … got %d", got)
	}
	for _, e := range []*env{ha, hb} {
		if !e.daemonAlive() {
			t.Errorf("[daemon] expected it alive")
		}
	}
}
