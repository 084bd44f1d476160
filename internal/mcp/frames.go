package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/internal/api"
)

// maxFrame bounds one line of the client's input: a longer one is
// answered as too large and skipped.
const maxFrame = 4 << 20

// JSON-RPC's error codes for what is not a request at all.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// StdioTransport is the SDK's stdio transport behind a guard on its input:
// a line that is not a JSON-RPC message (garbage, invalid UTF-8, a wrong
// version tag, an empty batch, a line past maxFrame) is answered with the
// spec's error (-32700 or -32600) and an mcp_call event, and the server
// keeps serving; the SDK alone would end the session on it.
func (s *Server) StdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	w := &lockedWriter{w: out}
	g := &frameGuard{in: newReader(in), out: w, bad: func(why string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.record(ctx, api.MCPCall{Tool: "-", Error: "malformed message: " + why})
	}}
	return &sdk.IOTransport{Reader: io.NopCloser(g), Writer: nopWriteCloser{w}}
}

// Stdio is StdioTransport on the process's own stdin and stdout.
func (s *Server) Stdio() sdk.Transport { return s.StdioTransport(os.Stdin, os.Stdout) }

// newReader buffers a client's input for the guard.
func newReader(in io.Reader) *bufio.Reader { return bufio.NewReaderSize(in, 64<<10) }

// lockedWriter writes whole messages, one at a time: the SDK's replies
// and the guard's errors share the client's stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// frameGuard passes the client's valid lines on, whole, and answers the
// others itself.
type frameGuard struct {
	in      *bufio.Reader
	out     io.Writer
	bad     func(why string)
	pending []byte
}

func (g *frameGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			if code, id, why := checkFrame(line); code != 0 {
				g.refuse(code, id, why)
			} else {
				g.pending = line
			}
		}
		if err != nil && len(g.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// readLine reads one line, newline included; one past maxFrame is
// dropped to its end and answered as too large.
func (g *frameGuard) readLine() ([]byte, error) {
	var line []byte
	over := false
	for {
		chunk, err := g.in.ReadSlice('\n')
		if !over && len(line)+len(chunk) > maxFrame {
			over, line = true, nil
		}
		if !over {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if over {
			g.refuse(codeInvalidRequest, nil, fmt.Sprintf("a message over %d bytes", maxFrame))
			return nil, err
		}
		return line, err
	}
}

// refuse answers a line that is not a message.
func (g *frameGuard) refuse(code int, id json.RawMessage, why string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	msg := "parse error"
	if code == codeInvalidRequest {
		msg = "invalid request"
	}
	reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg + ": " + why}})
	g.out.Write(append(reply, '\n'))
	if g.bad != nil {
		g.bad(why)
	}
}

// checkFrame says why line is not a JSON-RPC message (or a batch of
// them), with the spec's code and the request's id when one can be read;
// code 0 when it is one.
func checkFrame(line []byte) (code int, id json.RawMessage, why string) {
	line = bytes.TrimSpace(line)
	switch {
	case !utf8.Valid(line):
		return codeParseError, nil, "not UTF-8"
	case !json.Valid(line):
		return codeParseError, nil, "not JSON"
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil || len(batch) == 0 {
			return codeInvalidRequest, nil, "an empty or malformed batch"
		}
		for _, m := range batch {
			if code, _, why := checkFrame(m); code != 0 {
				return codeInvalidRequest, nil, "in a batch: " + why
			}
		}
		return 0, nil, ""
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		var obj struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &obj) == nil && len(obj.ID) > 0 && (obj.ID[0] == '"' || obj.ID[0] == '-' || (obj.ID[0] >= '0' && obj.ID[0] <= '9')) {
			id = obj.ID
		}
		return codeInvalidRequest, id, err.Error()
	}
	return 0, nil, ""
}
