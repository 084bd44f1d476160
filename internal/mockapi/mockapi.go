// Package mockapi is a loopback mock of the Anthropic Messages API, the OpenAI Responses API and the Gemini API, for driving the real Claude Code, Codex and Gemini CLI in tests.
package mockapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Triggers are words a prompt contains to choose the mock's answer. The last
// user message of a request is searched for them; a request without one is
// answered with ReplyText.
const (
	// TriggerHang holds the request open (no byte of the response is sent)
	// until Release is called or the client goes away.
	TriggerHang = "herd-hang"
	// TriggerTool answers with a tool_use of Bash (which Claude Code asks
	// permission for), then, once the tool result comes back, with text.
	TriggerTool = "herd-tool"
	// TriggerRateLimit answers 429 rate_limit_error.
	TriggerRateLimit = "herd-429"
	// TriggerOverloaded answers 529 overloaded_error (503 on the
	// Responses API).
	TriggerOverloaded = "herd-529"
	// TriggerEscalate, with TriggerTool, has a Responses API tool call ask
	// to run outside Codex's sandbox, so Codex asks the user first.
	TriggerEscalate = "herd-escalate"
)

// triggers in the order they are looked for.
var triggers = []string{TriggerHang, TriggerRateLimit, TriggerOverloaded, TriggerTool}

// ReplyText is the text of every plain answer.
const ReplyText = "OK from the mock."

// The usage each successful Responses API and Gemini API reply reports:
// distinct figures per API, with cached input, so that a test can tell
// each agent's tokens apart and see cache reads counted. Input includes
// the cached tokens, as both APIs count it.
const (
	OpenAIInputTokens  = 1234
	OpenAICachedTokens = 1024
	OpenAIOutputTokens = 56
	GeminiPromptTokens = 2345
	GeminiCachedTokens = 2048
	GeminiOutputTokens = 67
)

// ToolMarker is the file ToolCommand creates in the agent's directory.
// Its name holds no trigger: agents (Gemini CLI) send the directory
// listing with every prompt.
const ToolMarker = "tool-ran"

// ToolCommand is the shell command TriggerTool asks to run, unless
// ToolCommands chose others.
const ToolCommand = "touch " + ToolMarker

// RateLimitMessage is the error message of a TriggerRateLimit answer (the
// API's own wording; it names no reset time).
const RateLimitMessage = "This request would exceed your account's rate limit. Please try again later."

// maxBody bounds a request body the mock reads.
const maxBody = 32 << 20

// Record is one request the mock answered (or is answering).
type Record struct {
	Path    string
	Model   string
	Stream  bool
	Trigger string    // the trigger found, or ""
	Status  int       // the HTTP status sent; 0 while hung
	Tool    bool      // the answer is a tool call
	Time    time.Time // when the answer (or the hang) began
	// Users holds the text of each user message (Messages and Responses
	// API) or user turn (Gemini API) of a request, oldest first (each
	// clipped to its last 200 bytes): what the agent sent of its
	// conversation.
	Users []string
	// Tools names the tools a request offered (none: an agent's side
	// request, a title or a topic).
	Tools []string
	// ToolName and ToolID are the tool a tool call answer called, and
	// the id of its call ("" where the API has none: the Gemini API).
	ToolName, ToolID string
	// Results holds the tool results the request carried back after its
	// last user message.
	Results []ToolResult
	// AllResults holds every tool result of the request's conversation,
	// oldest first: a refused call's result, which an agent sends with the
	// person's next words (after them, for the Responses API), is in it.
	AllResults []ToolResult
}

// Server is the mock. The zero value is not usable; call New.
type Server struct {
	log *slog.Logger

	mu      sync.Mutex // guards the fields below
	records []Record
	hung    int           // requests held open right now
	release chan struct{} // closed by Release; replaced after
	resetAt time.Time     // the reset time named by rate-limit answers
	seq     int
	script  *script // set by Script
	// commands are the shell commands of TriggerTool's calls, one per
	// call in order, the last one repeated (ToolCommands); none:
	// ToolCommand.
	commands []string
}

// New returns a mock that logs to log (nil: discard).
func New(log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{log: log, release: make(chan struct{}), resetAt: time.Now().Add(time.Hour).Truncate(time.Hour)}
}

// Listen opens a loopback listener on a free port.
func Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mockapi: %w", err)
	}
	return ln, nil
}

// Run serves on ln until ctx is done. It refuses a listener that is not on
// a loopback address.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		return fmt.Errorf("mockapi: refusing non-loopback listener %s", ln.Addr())
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.Release()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Records returns a copy of every request seen, in arrival order.
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Hung is the number of requests held open by TriggerHang right now.
func (s *Server) Hung() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hung
}

// Release lets every request held open by TriggerHang go on: it is
// answered with 500 api_error (the turn fails, as a dropped upstream would).
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// request holds the fields of a Messages API request the mock looks at.
type request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Content   json.RawMessage `json:"content"`     // tool_result
	ToolUseID string          `json:"tool_use_id"` // tool_result
	IsError   bool            `json:"is_error"`    // tool_result
}

// lastUser returns the text of the last user message and whether it
// carries a tool result.
func (r request) lastUser() (text string, toolResult bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s, false
		}
		var bs []block
		if json.Unmarshal(m.Content, &bs) != nil {
			return "", false
		}
		var b strings.Builder
		for _, x := range bs {
			switch x.Type {
			case "text":
				b.WriteString(x.Text)
				b.WriteByte('\n')
			case "tool_result":
				toolResult = true
			}
		}
		return b.String(), toolResult
	}
	return "", false
}

// turns counts the user messages that carry no tool result: the prompts
// typed into the conversation.
func (r request) turns() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			n++
			continue
		}
		var bs []block
		if json.Unmarshal(m.Content, &bs) != nil {
			continue
		}
		if !slices.ContainsFunc(bs, func(x block) bool { return x.Type == "tool_result" }) {
			n++
		}
	}
	return n
}

// users returns the text of every user message, oldest first, each
// clipped to its last 200 bytes.
func (r request) users() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) != nil {
			var bs []block
			json.Unmarshal(m.Content, &bs)
			var b strings.Builder
			for _, x := range bs {
				if x.Type == "text" {
					b.WriteString(x.Text)
					b.WriteByte('\n')
				}
			}
			s = b.String()
		}
		out = append(out, clipUser(s))
	}
	return out
}

// clipUser keeps the last 200 bytes of a user message: the typed text
// comes after the agent's reminders.
func clipUser(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

// firstUserHas reports whether a user message of the conversation
// contains word.
func (r request) firstUserHas(word string) bool {
	for _, m := range r.Messages {
		if m.Role == "user" && strings.Contains(string(m.Content), word) {
			return true
		}
	}
	return false
}

func (r request) hasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// ServeHTTP answers POST /v1/messages, /v1/messages/count_tokens and
// /v1/responses; every other path is 404 with an API error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	s.log.Debug("mockapi", "method", r.Method, "path", path)
	switch {
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		s.record(Record{Path: path, Status: http.StatusOK})
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 42})
		return
	case r.Method == http.MethodPost && path == "/v1/messages":
	case r.Method == http.MethodPost && (path == "/v1/responses" || path == "/responses"):
		s.serveResponses(w, r)
		return
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/") && strings.HasSuffix(path, ":streamGenerateContent"):
		s.serveGemini(w, r, true)
		return
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/") && strings.HasSuffix(path, ":generateContent"):
		s.serveGemini(w, r, false)
		return
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/") && strings.HasSuffix(path, ":countTokens"):
		s.record(Record{Path: path, Status: http.StatusOK})
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": 42})
		return
	default:
		s.record(Record{Path: path, Status: http.StatusNotFound})
		writeError(w, http.StatusNotFound, "not_found_error", "mockapi: no such endpoint")
		return
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		s.record(Record{Path: path, Status: http.StatusBadRequest})
		writeError(w, http.StatusBadRequest, "invalid_request_error", "mockapi: "+err.Error())
		return
	}
	text, toolResult := req.lastUser()
	rec := Record{Path: path, Model: req.Model, Stream: req.Stream, Users: req.users(), Results: req.lastResults(), AllResults: req.allResults()}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	for _, t := range triggers {
		if strings.Contains(text, t) {
			rec.Trigger = t
			break
		}
	}
	// The tool's result comes back in a later request whose last user
	// message is the result alone: the trigger is in the first message.
	if rec.Trigger == "" && toolResult && req.firstUserHas(TriggerTool) {
		rec.Trigger = TriggerTool
	}
	s.log.Debug("mockapi request", "model", req.Model, "stream", req.Stream, "trigger", rec.Trigger, "tool_result", toolResult)
	if s.scripted(w, req, rec) {
		return
	}
	switch rec.Trigger {
	case TriggerHang:
		if !req.hasTool("Bash") { // a side request (title, topic): answer it
			break
		}
		s.hang(r.Context(), rec)
		rec.Status = http.StatusInternalServerError
		s.record(rec)
		writeError(w, http.StatusInternalServerError, "api_error", "mockapi: released")
		return
	case TriggerRateLimit:
		rec.Status = http.StatusTooManyRequests
		s.record(rec)
		s.mu.Lock()
		reset := s.resetAt
		s.mu.Unlock()
		w.Header().Set("retry-after", "3600")
		w.Header().Set("anthropic-ratelimit-unified-status", "rejected")
		w.Header().Set("anthropic-ratelimit-unified-reset", fmt.Sprint(reset.Unix()))
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", RateLimitMessage)
		return
	case TriggerOverloaded:
		rec.Status = 529
		s.record(rec)
		writeError(w, 529, "overloaded_error", "Overloaded")
		return
	case TriggerTool:
		if req.hasTool("Bash") && !toolResult {
			rec.Status, rec.Tool = http.StatusOK, true
			cmd := s.nextToolCommand()
			call := ToolCall{Name: "Bash", Input: map[string]any{"command": cmd, "description": describe(cmd)}, id: s.nextID("toolu")}
			rec.ToolName, rec.ToolID = call.Name, call.id
			s.record(rec)
			s.answer(w, req, &call)
			return
		}
	}
	rec.Status = http.StatusOK
	s.record(rec)
	s.answer(w, req, nil)
}

// hang blocks until Release or the client leaves.
func (s *Server) hang(ctx context.Context, rec Record) {
	s.mu.Lock()
	s.hung++
	rel := s.release
	rec.Time = time.Now()
	s.records = append(s.records, rec)
	s.mu.Unlock()
	select {
	case <-rel:
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.hung--
	s.mu.Unlock()
}

func (s *Server) record(r Record) {
	r.Time = time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, r)
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s_mock%06d", prefix, s.seq)
}

// ToolCommands sets the shell commands TriggerTool's calls run, in every
// API: the first call runs cmds[0], the next cmds[1], and so on, the last
// one repeated. Without it each call runs ToolCommand.
func (s *Server) ToolCommands(cmds ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = slices.Clone(cmds)
}

// describe is the description a shell call gives of cmd.
func describe(cmd string) string {
	if cmd == ToolCommand {
		return "Create a marker file"
	}
	return "Run the command asked for"
}

// nextToolCommand is the command of the next TriggerTool call.
func (s *Server) nextToolCommand() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch len(s.commands) {
	case 0:
		return ToolCommand
	case 1:
		return s.commands[0]
	}
	c := s.commands[0]
	s.commands = s.commands[1:]
	return c
}

// answer writes a message: text, or a tool_use of call when it is set;
// streamed as server-sent events when the request asked for it.
func (s *Server) answer(w http.ResponseWriter, req request, call *ToolCall) {
	tool := call != nil
	model := req.Model
	if model == "" {
		model = "claude-mock"
	}
	msgID := s.nextID("msg")
	var content map[string]any
	stop := "end_turn"
	var input string
	if tool {
		stop = "tool_use"
		in, _ := json.Marshal(call.Input)
		input = string(in)
		id := call.id
		if id == "" {
			id = s.nextID("toolu")
		}
		content = map[string]any{"type": "tool_use", "id": id, "name": call.Name, "input": map[string]any{}}
	} else {
		content = map[string]any{"type": "text", "text": ""}
	}
	usage := map[string]int{"input_tokens": 42, "output_tokens": 7}
	if !req.Stream {
		full := map[string]any{}
		for k, v := range content {
			full[k] = v
		}
		if tool {
			var in map[string]any
			_ = json.Unmarshal([]byte(input), &in)
			full["input"] = in
		} else {
			full["text"] = ReplyText
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": []any{full}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 42, "output_tokens": 1},
	}})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": content})
	if tool {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": input}})
	} else {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": ReplyText}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 7}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}
