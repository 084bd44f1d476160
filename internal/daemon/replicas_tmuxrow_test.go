package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"herd/internal/config"
	"herd/internal/store"
)

// TestReplicasOverTheLimitRefused: regression — replicas had no upper
// bound: scale (or apply, or run --replicas) to 2000000000 was accepted and
// the reconcile plan spun at full CPU. Both are refused with a 400 naming
// the limit, and nothing is written.
func TestReplicasOverTheLimitRefused(t *testing.T) {
	d := newTestDaemon(t)
	seed(t, d, "inc-1") // role "w", 1 replica
	h := d.server.Handler()
	post := func(path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		return rec
	}
	replicas := func() int {
		r, err := d.status.Role(context.Background(), "w")
		if err != nil {
			t.Fatal(err)
		}
		return r.Replicas
	}

	rec := post("/v1/roles/w/scale", `{"replicas": 2000000000}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "at most 1000") {
		t.Errorf("expected 400 naming the limit … got %d %s", rec.Code, rec.Body)
	}
	if n := replicas(); n != 1 {
		t.Errorf("expected replicas unchanged (1) … got %d", n)
	}

	rec = post("/v1/roles", `[{"name": "v", "replicas": 2000000000, "command": ["x"], "workdir": "/tmp"}]`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "replicas: must be at most 1000, got 2000000000") {
		t.Errorf("expected apply refused with 400 naming key and limit … got %d %s", rec.Code, rec.Body)
	}
	d.status.Store().View(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Role("v"); err == nil {
			t.Errorf("expected role v not written")
		}
		return nil
	})

	rec = post("/v1/roles/w/scale", `{"replicas": 1000}`)
	if rec.Code != http.StatusOK {
		t.Errorf("expected the limit itself accepted … got %d %s", rec.Code, rec.Body)
	}
	if n := replicas(); n != config.MaxReplicas {
		t.Errorf("expected replicas %d … got %d", config.MaxReplicas, n)
	}
}
