package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"herd"
)

// TestTaskClient: each method asks its route with its query and body,
// escapes the id into the path and decodes the reply; an error reply is
// a *StatusError with the daemon's message.
func TestTaskClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "herd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		asked []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/tasks":
			if r.Method == http.MethodPost {
				io.WriteString(w, `{"id":"t-3","state":"queued"}`)
				return
			}
			io.WriteString(w, `[{"id":"t-1"},{"id":"t-2"}]`)
		case "/v1/tasks/t-3":
			io.WriteString(w, `{"id":"t-3","events":[{"id":1,"kind":"task_queued"}]}`)
		case "/v1/tasks/t-3/diff":
			io.WriteString(w, `{"task":"t-3","diff":"+x\n","truncated":true}`)
		case "/v1/tasks/t-3/comment":
			io.WriteString(w, `{"id":"t-3","state":"changes"}`)
		default:
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":"task t-3 is landed"}`)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c, ctx := NewClient(sock), context.Background()

	task, err := c.AddTask(ctx, AddTaskRequest{Role: "w", Prompt: "p"})
	if err != nil || task.ID != "t-3" {
		t.Errorf("[add] expected t-3 … got %+v %v", task, err)
	}
	list, err := c.Tasks(ctx, []string{"review", "queued"}, "w")
	if err != nil || len(list) != 2 {
		t.Errorf("[list] expected 2 tasks … got %+v %v", list, err)
	}
	det, err := c.Task(ctx, "t-3")
	if err != nil || det.ID != "t-3" || len(det.Events) != 1 || det.Events[0].Kind != herd.EventTaskQueued {
		t.Errorf("[task] expected t-3 and its event … got %+v %v", det, err)
	}
	diff, err := c.TaskDiff(ctx, "t-3")
	if err != nil || diff.Diff != "+x\n" || !diff.Truncated {
		t.Errorf("[diff] expected the diff … got %+v %v", diff, err)
	}
	task, err = c.TaskVerb(ctx, TaskComment, "t-3", "use a mutex")
	if err != nil || task.State != herd.TaskChanges {
		t.Errorf("[comment] expected changes … got %+v %v", task, err)
	}
	_, err = c.TaskVerb(ctx, TaskApprove, "t-3/../x", "")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusConflict || se.Message != "task t-3 is landed" {
		t.Errorf("[error] expected a 409 with the message … got %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		`POST /v1/tasks {"role":"w","prompt":"p"}`,
		"GET /v1/tasks?role=w&state=review%2Cqueued ",
		"GET /v1/tasks/t-3 ",
		"GET /v1/tasks/t-3/diff ",
		`POST /v1/tasks/t-3/comment {"text":"use a mutex"}`,
		"POST /v1/tasks/t-3%2F..%2Fx/approve {}",
	}
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("expected the requests … (-want +got):\n%s", diff)
	}
}
