package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Format is the kind of file a parser reads.
type Format string

// Formats.
const (
	// ClaudeTranscript is Claude Code's transcript JSONL
	// (~/.claude/projects/<dir>/<session>.jsonl): assistant lines carry
	// message.usage and message.model; one message may span several lines
	// sharing message.id, and is counted once.
	ClaudeTranscript Format = "claude-transcript"
	// CodexRollout is Codex's rollout JSONL (~/.codex/sessions/...):
	// token_count events carry the session's running total, turn_context
	// lines the model.
	CodexRollout Format = "codex-rollout"
	// Stream is an agent's stdout in its JSON stream mode: Claude Code's
	// stream-json `result` (usage, modelUsage, total_cost_usd), Codex's
	// `exec --json` `turn.completed`, Gemini CLI's stream-json `result`
	// stats. Each is the process's running total.
	Stream Format = "stream"
	// GeminiChat is Gemini CLI's chat file (0.61:
	// ~/.gemini/tmp/<project>/chats/session-*.jsonl): a metadata line,
	// then each message as a line; a message is appended again whole
	// when it changes (its tokens arrive, a tool call is added), so a
	// "gemini" message's tokens are counted once by its id.
	GeminiChat Format = "gemini-chat"
)

// maxRecent bounds the Claude message ids a State remembers.
const maxRecent = 32

// maxGeminiIDs bounds the Gemini chat message ids a State remembers:
// enough for a whole long conversation, so that a chat file Gemini CLI
// rewrote (read again from its start) recounts none of it.
const maxGeminiIDs = 4096

// State is what a parser remembers of one file between lines, kept with
// the file's offset so that a restart neither loses nor recounts:
// Claude's messages already counted, and the running totals the other
// formats report.
type State struct {
	// Model is the model in use as last said by the file (an init line,
	// a turn_context), or the one the command line named.
	Model string `json:"model,omitempty"`
	// Recent are the Claude messages counted lately, newest last.
	Recent []Counted `json:"recent,omitempty"`
	// Seen are the running totals reported so far, per model ("" for a
	// total over every model).
	Seen map[string]Tokens `json:"seen,omitempty"`
	// SeenCost are the running costs reported so far, per model.
	SeenCost map[string]float64 `json:"seen_cost,omitempty"`
	// Messages are the Gemini chat messages counted, oldest first, at
	// most maxGeminiIDs.
	Messages []string `json:"messages,omitempty"`
}

// Counted is one Claude message and the tokens counted of it.
type Counted struct {
	ID     string `json:"id"`
	Tokens Tokens `json:"tokens"`
}

// ErrGarbled is wrapped by the error of a line that is not JSON.
var ErrGarbled = errors.New("not a JSON object")

// ParseLine reads one line of a file of format f, updates st, and returns
// the usage it adds (none for most lines). A line that is not JSON is an
// error wrapping ErrGarbled; st is then unchanged.
func ParseLine(f Format, line []byte, st *State) ([]Record, error) {
	var l rawLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrGarbled, err)
	}
	at := parseTime(l.Timestamp)
	switch f {
	case ClaudeTranscript:
		return claudeMessage(l, at, st), nil
	case CodexRollout:
		return codexRollout(l, at, st), nil
	case Stream:
		return streamLine(l, at, st), nil
	case GeminiChat:
		return geminiMessage(l, at, st), nil
	}
	return nil, fmt.Errorf("usage: unknown format %q", f)
}

// rawLine is the union of the fields read from every format.
type rawLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	Timestamp string `json:"timestamp"`
	Model     string `json:"model"`
	// Claude.
	Message *struct {
		ID    string       `json:"id"`
		Model string       `json:"model"`
		Usage *claudeUsage `json:"usage"`
	} `json:"message"`
	Usage      *rawUsage                   `json:"usage"`
	ModelUsage map[string]claudeModelUsage `json:"modelUsage"`
	TotalCost  *float64                    `json:"total_cost_usd"`
	Stats      *geminiStats                `json:"stats"`
	Payload    *codexPayload               `json:"payload"`
	// Gemini chat.
	ID     string            `json:"id"`
	Tokens *geminiChatTokens `json:"tokens"`
}

type claudeUsage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheRead  int64 `json:"cache_read_input_tokens"`
	CacheWrite int64 `json:"cache_creation_input_tokens"`
}

func (u claudeUsage) tokens() Tokens { return Tokens(u).counted() }

// rawUsage is a `usage` object: Claude's (stream-json result) or
// OpenAI's (Codex), whose input_tokens include the cached ones.
type rawUsage struct {
	claudeUsage
	Cached      int64 `json:"cached_input_tokens"`
	CachedWrite int64 `json:"cache_write_input_tokens"`
}

// openAI returns u read the OpenAI way: input_tokens include the cached.
func (u rawUsage) openAI() Tokens {
	in, cached := max(u.Input, 0), max(u.Cached, 0)
	return Tokens{Input: max(in-cached, 0), Output: u.Output, CacheRead: cached, CacheWrite: u.CachedWrite}.counted()
}

type claudeModelUsage struct {
	Input      int64    `json:"inputTokens"`
	Output     int64    `json:"outputTokens"`
	CacheRead  int64    `json:"cacheReadInputTokens"`
	CacheWrite int64    `json:"cacheCreationInputTokens"`
	Cost       *float64 `json:"costUSD"`
}

type geminiStats struct {
	geminiModelStats
	Models map[string]geminiModelStats `json:"models"`
}

type geminiModelStats struct {
	Input  int64 `json:"input_tokens"`
	Output int64 `json:"output_tokens"`
	Cached int64 `json:"cached"`
}

// tokens: Gemini's input_tokens include the cached ones.
func (g geminiModelStats) tokens() Tokens {
	in, cached := max(g.Input, 0), max(g.Cached, 0)
	return Tokens{Input: max(in-cached, 0), Output: g.Output, CacheRead: cached}.counted()
}

// geminiChatTokens is a Gemini chat message's `tokens`: the API's
// usageMetadata as Gemini CLI records it. input (promptTokenCount)
// includes the cached tokens; output (candidatesTokenCount) does not
// include thoughts, as in its stream-json stats.
type geminiChatTokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Cached int64 `json:"cached"`
}

type codexPayload struct {
	Type  string `json:"type"`
	Model string `json:"model"`
	Info  *struct {
		Total *rawUsage `json:"total_token_usage"`
	} `json:"info"`
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// claudeMessage counts an assistant line of a Claude transcript. The
// lines of one message repeat its usage (the last may have more output);
// what a line adds beyond what was counted of its message is counted.
func claudeMessage(l rawLine, at time.Time, st *State) []Record {
	if l.Type != "assistant" || l.Message == nil || l.Message.Usage == nil {
		return nil
	}
	model := l.Message.Model
	if model == "<synthetic>" { // Claude Code's own notices: no API call behind them
		return nil
	}
	tok := l.Message.Usage.tokens()
	id := l.Message.ID
	var add Tokens
	if i := st.recent(id); id != "" && i >= 0 {
		add = tok.sub(st.Recent[i].Tokens)
		st.Recent[i].Tokens = maxTokens(st.Recent[i].Tokens, tok)
	} else {
		add = tok
		if id != "" {
			st.Recent = append(st.Recent, Counted{ID: id, Tokens: tok})
			if len(st.Recent) > maxRecent {
				st.Recent = st.Recent[len(st.Recent)-maxRecent:]
			}
		}
	}
	if add.Zero() {
		return nil
	}
	return []Record{{Model: NormalModel(model), Tokens: add, At: at}}
}

func (st *State) recent(id string) int {
	for i := len(st.Recent) - 1; i >= 0; i-- {
		if st.Recent[i].ID == id {
			return i
		}
	}
	return -1
}

// counted is t as a count: what an agent's file says is never less than
// zero tokens of a kind (a negative count would take from what the agent
// spent, and from its budget).
func (t Tokens) counted() Tokens { return maxTokens(t, Tokens{}) }

func maxTokens(a, b Tokens) Tokens {
	return Tokens{max(a.Input, b.Input), max(a.Output, b.Output), max(a.CacheRead, b.CacheRead), max(a.CacheWrite, b.CacheWrite)}
}

// codexRollout reads a Codex rollout line: turn_context names the model,
// token_count carries the session's running total.
func codexRollout(l rawLine, at time.Time, st *State) []Record {
	p := l.Payload
	if p == nil {
		return nil
	}
	switch {
	case l.Type == "turn_context" && p.Model != "":
		st.Model = p.Model
	case l.Type == "event_msg" && p.Type == "token_count" && p.Info != nil && p.Info.Total != nil:
		if r, ok := st.running("", st.Model, p.Info.Total.openAI(), nil, at); ok {
			return []Record{r}
		}
	}
	return nil
}

// geminiMessage counts a "gemini" message of a Gemini CLI chat file the
// first time it is seen with tokens; the lines that repeat it add
// nothing.
func geminiMessage(l rawLine, at time.Time, st *State) []Record {
	if l.Type != "gemini" || l.Tokens == nil || l.ID == "" || slices.Contains(st.Messages, l.ID) {
		return nil
	}
	st.Messages = append(st.Messages, l.ID)
	if len(st.Messages) > maxGeminiIDs {
		st.Messages = st.Messages[len(st.Messages)-maxGeminiIDs:]
	}
	model := l.Model
	if model == "" {
		model = st.Model
	}
	tok := geminiModelStats{Input: l.Tokens.Input, Output: l.Tokens.Output, Cached: l.Tokens.Cached}.tokens()
	if tok.Zero() {
		return nil
	}
	return []Record{{Model: NormalModel(model), Tokens: tok, At: at}}
}

// streamLine reads a line of an agent's JSON stream.
func streamLine(l rawLine, at time.Time, st *State) []Record {
	switch {
	case l.Type == "system" && l.Subtype == "init" && l.Model != "", // Claude
		l.Type == "init" && l.Model != "": // Gemini
		st.Model = l.Model
	case l.Type == "result" && l.Stats != nil: // Gemini
		return geminiResult(l.Stats, at, st)
	case l.Type == "result" && (l.ModelUsage != nil || l.Usage != nil): // Claude
		return claudeResult(l, at, st)
	case l.Type == "turn.completed" && l.Usage != nil: // Codex exec --json
		if r, ok := st.running("", st.Model, l.Usage.openAI(), nil, at); ok {
			return []Record{r}
		}
	}
	return nil
}

func claudeResult(l rawLine, at time.Time, st *State) []Record {
	if len(l.ModelUsage) == 0 {
		var cost *float64
		if l.TotalCost != nil {
			cost = l.TotalCost
		}
		// An empty modelUsage reaches here without a usage object too.
		var tok Tokens
		if l.Usage != nil {
			tok = l.Usage.claudeUsage.tokens()
		}
		if r, ok := st.running("", st.Model, tok, cost, at); ok {
			return []Record{r}
		}
		return nil
	}
	var out []Record
	for _, m := range sortedKeys(l.ModelUsage) {
		u := l.ModelUsage[m]
		if r, ok := st.running(m, m, Tokens{u.Input, u.Output, u.CacheRead, u.CacheWrite}.counted(), u.Cost, at); ok {
			out = append(out, r)
		}
	}
	return out
}

func geminiResult(s *geminiStats, at time.Time, st *State) []Record {
	if len(s.Models) == 0 {
		if r, ok := st.running("", st.Model, s.tokens(), nil, at); ok {
			return []Record{r}
		}
		return nil
	}
	var out []Record
	for _, m := range sortedKeys(s.Models) {
		if r, ok := st.running(m, m, s.Models[m].tokens(), nil, at); ok {
			out = append(out, r)
		}
	}
	return out
}

// running turns a running total reported under key into what it adds
// beyond the highest one seen in the file.
func (st *State) running(key, model string, total Tokens, cost *float64, at time.Time) (Record, bool) {
	if st.Seen == nil {
		st.Seen = map[string]Tokens{}
	}
	last, seen := st.Seen[key]
	add := total
	if seen {
		// What passes the highest total seen: a file read again from its
		// start (replaced, or cut short) recounts nothing.
		add = total.sub(last)
		total = maxTokens(total, last)
	}
	st.Seen[key] = total
	r := Record{Model: NormalModel(model), Tokens: add, At: at}
	if cost != nil {
		if st.SeenCost == nil {
			st.SeenCost = map[string]float64{}
		}
		lastCost := st.SeenCost[key]
		r.Cost, r.HasCost = max(*cost-lastCost, 0), true
		st.SeenCost[key] = max(*cost, lastCost)
	}
	if add.Zero() && r.Cost == 0 {
		return Record{}, false
	}
	return r, true
}

// Relevant reports whether a line of format f may carry what ParseLine
// reads: a cheap look for its keys, so that the many lines that cannot
// (prompts, tool results) are not decoded.
func Relevant(f Format, line []byte) bool {
	switch f {
	case ClaudeTranscript:
		return bytes.Contains(line, []byte(`"usage"`))
	case CodexRollout:
		return bytes.Contains(line, []byte("token_count")) || bytes.Contains(line, []byte("turn_context"))
	case GeminiChat:
		return bytes.Contains(line, []byte(`"tokens"`))
	case Stream:
		return bytes.Contains(line, []byte(`"result"`)) || bytes.Contains(line, []byte("turn.completed")) || bytes.Contains(line, []byte("init"))
	}
	return true
}
