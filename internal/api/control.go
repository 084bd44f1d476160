package api

// Targets names the sessions of a verb that acts on many: by name, by
// role, every session, or a selector (-l role=worker,state=running). Role,
// All and Selector narrow together; Names stands alone.
type Targets struct {
	Names    []string `json:"names,omitempty"`
	Role     string   `json:"role,omitempty"`
	All      bool     `json:"all,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// InjectManyRequest is the body of POST /v1/inject: text typed into every
// session Targets names, each through the one inject verb.
type InjectManyRequest struct {
	Targets
	Text    string `json:"text"`
	Enter   bool   `json:"enter"`
	NoClear bool   `json:"no_clear,omitempty"`
	// Multiline: as InjectRequest's.
	Multiline bool `json:"multiline,omitempty"`
}

// Delivery is what an inject did to one session: delivered, or refused
// and why.
type Delivery struct {
	Session   string `json:"session"`
	Delivered bool   `json:"delivered"`
	// Message is the verb's outcome when delivered.
	Message string `json:"message,omitempty"`
	// Error says why the text was refused.
	Error string `json:"error,omitempty"`
	// TookMS is how long the inject into this session took.
	TookMS float64 `json:"took_ms"`
}

// InjectManyResult is the reply of POST /v1/inject.
type InjectManyResult struct {
	Message    string     `json:"message"`
	Deliveries []Delivery `json:"deliveries"`
}

// WaitRequest is the body of POST /v1/wait: it answers once every session
// Targets names has reached For (a state or an activity), or when Timeout
// passes.
type WaitRequest struct {
	Targets
	// For is a state (running, stopped, ...) or an activity (idle,
	// waiting, ...); "state=unknown" and "activity=unknown" tell the two
	// unknowns apart (plain "unknown" is the state).
	For string `json:"for"`
	// Timeout is a Go duration ("30s").
	Timeout string `json:"timeout"`
}

// WaitTarget is one session a wait watched.
type WaitTarget struct {
	Session  string `json:"session"`
	State    string `json:"state"`
	Activity string `json:"activity"`
	// FromState and FromActivity are what it was when the wait began.
	FromState    string `json:"from_state"`
	FromActivity string `json:"from_activity"`
	Reached      bool   `json:"reached"`
	// Gone: the session no longer exists.
	Gone bool `json:"gone,omitempty"`
}

// WaitResult is the reply of POST /v1/wait.
type WaitResult struct {
	// Reached is true when every target reached For.
	Reached bool   `json:"reached"`
	For     string `json:"for"`
	Message string `json:"message"`
	// Sessions are the targets, by name.
	Sessions []WaitTarget `json:"sessions"`
	// Lagging names the targets that had not reached For.
	Lagging []string `json:"lagging"`
	// WaitedMS is how long the wait took, in milliseconds.
	WaitedMS int64 `json:"waited_ms"`
}

// MCPPolicy is the reply of GET /v1/mcp: the daemon's [mcp] table, which
// bounds what herd's MCP servers may touch.
type MCPPolicy struct {
	Roles []string `json:"roles"`
	Verbs []string `json:"verbs"`
}

// MCPCall is the body of POST /v1/mcp/calls: one tool call of an MCP
// server, recorded as an mcp_call event.
type MCPCall struct {
	// Session is the calling session; "" when the server runs outside
	// herd's agents.
	Session string   `json:"session"`
	Tool    string   `json:"tool"`
	Targets []string `json:"targets,omitempty"`
	// Refused names the targets the guard rails refused, Why why.
	Refused []string `json:"refused,omitempty"`
	Why     string   `json:"why,omitempty"`
	// Error is the call's failure after the guard rails let it through.
	Error string `json:"error,omitempty"`
}
