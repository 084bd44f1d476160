package main

import (
	"net/http"
	"testing"

	"herd/internal/api"
)

func TestExplainPath(t *testing.T) {
	notFound := &api.StatusError{Code: http.StatusNotFound, Message: `session "nosuch-0": sqlite: session "nosuch-0": not found`}
	for _, tc := range []struct {
		path string
		err  error
		want string
	}{
		{sessionPath("nosuch-0", ""), notFound, "session nosuch-0 not found"},
		{sessionPath("nosuch-0", "/logs"), notFound, "session nosuch-0 not found"},
		{rolePath("gone", "/scale"), notFound, "role gone not found"},
		{"/v1/events", notFound, notFound.Message},
		{sessionPath("w-0", "/stop"), &api.StatusError{Code: http.StatusConflict, Message: "busy"}, "busy"},
	} {
		got := explainPath(tc.err, &globals{}, tc.path)
		if got == nil || got.Error() != tc.want {
			t.Errorf("[%s] expected %q, got %v", tc.path, tc.want, got)
		}
	}
	if err := explainPath(nil, &globals{}, "/v1/sessions"); err != nil {
		t.Errorf("[nil] expected nil, got %v", err)
	}
}
