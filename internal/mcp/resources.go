package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd"
	"herd/internal/api"
)

// Resources: the event log's newest events, and a session's screen.
const (
	eventsURI    = "herd://events"
	screenPrefix = "herd://sessions/"
	screenSuffix = "/screen"
	// recentEvents is how many events the events resource holds.
	recentEvents = 100
)

func (s *Server) addResources() {
	s.srv.AddResource(&sdk.Resource{URI: eventsURI, Name: "events", MIMEType: "application/x-ndjson",
		Description: "herd's event log: the newest 100 events (spawned, crashed, stopped, activity, ...), one JSON object a line, oldest first."}, s.readEvents)
	s.srv.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: screenPrefix + "{name}" + screenSuffix, Name: "screen", MIMEType: "text/plain",
		Description: "A session's screen (tmux) or the tail of its output (exec): the last 200 lines, at most 64 KiB."}, s.readScreen)
}

func (s *Server) readEvents(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	p, err := s.policy(ctx)
	if err != nil {
		return nil, err
	}
	var evs []herd.Event
	q := url.Values{"limit": {fmt.Sprint(recentEvents)}}
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/events", q, nil, &evs); err != nil {
		return nil, daemonErr(err)
	}
	if len(p.Roles) > 0 {
		views, err := s.sessions(ctx)
		if err != nil {
			return nil, err
		}
		role := map[string]string{}
		for _, v := range views {
			role[v.Name] = v.Role
		}
		evs = slices.DeleteFunc(evs, func(e herd.Event) bool { return !slices.Contains(p.Roles, role[e.Session]) })
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range evs {
		enc.Encode(e)
	}
	s.record(ctx, api.MCPCall{Tool: "read_resource", Targets: []string{eventsURI}})
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/x-ndjson", Text: b.String()}}}, nil
}

func (s *Server) readScreen(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	name, ok := strings.CutPrefix(uri, screenPrefix)
	name, ok2 := strings.CutSuffix(name, screenSuffix)
	if !ok || !ok2 || name == "" || strings.Contains(name, "/") {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	_, out, err := s.readOutput(ctx, nil, ReadIn{Session: name, TailLines: 200, MaxBytes: 64 << 10})
	if err != nil {
		return nil, err
	}
	text, _ := out.(map[string]any)["text"].(string)
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
}
