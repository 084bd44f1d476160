package daemon

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/internal/web"
)

// TestWebPortTaken: a daemon whose console port is taken supervises on
// without a console, and says so; with a free port it serves login links.
func TestWebPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name, listen string
		served       bool
	}{
		{"taken", taken.Addr().String(), false},
		{"free", "127.0.0.1:0", true},
	} {
		cfg := escConfig()
		cfg.Web.Listen = c.listen
		env := escStart(t, escDir(t), cfg, nil)
		var (
			res web.LinkResult
			err error
		)
		// The console starts beside the API, a moment later.
		escWait(t, c.name, 5*time.Second, func() bool {
			err = env.client.Do(context.Background(), http.MethodPost, web.LinkPath, nil, web.LinkRequest{}, &res)
			return err == nil || !c.served
		})
		switch {
		case c.served && (err != nil || !strings.Contains(res.URL, "/login?t=")):
			t.Errorf("[%s] expected a login link … got %+v %v", c.name, res, err)
		case !c.served && (err == nil || !strings.Contains(err.Error(), "not served")):
			t.Errorf("[%s] expected the console not served … got %+v %v", c.name, res, err)
		}
		env.stop()
	}
}
