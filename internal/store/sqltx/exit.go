package sqltx

import (
	"strconv"
	"strings"
	"time"

	"herd"
)

// decodeExit reads a session's exit column. The column is what
// encoding/json wrote for a herd.Exit (keys in order, message omitted
// when empty); that shape is read by hand — a listing of a thousand
// sessions decodes a thousand of them — and anything else goes to
// encoding/json.
func decodeExit(s string, e *herd.Exit) error {
	if fastExit(s, e) {
		return nil
	}
	*e = herd.Exit{}
	return decode(s, e)
}

// fastExit reads s when it has exactly the shape encoding/json writes for
// a herd.Exit with plain strings; it reports false, e half-filled, for
// anything else.
func fastExit(s string, e *herd.Exit) bool {
	var ok bool
	if s, ok = strings.CutPrefix(s, `{"code":`); !ok {
		return false
	}
	if e.Code, s, ok = cutIntOrNull(s); !ok {
		return false
	}
	if s, ok = strings.CutPrefix(s, `,"signal":`); !ok {
		return false
	}
	if e.Signal, s, ok = cutIntOrNull(s); !ok {
		return false
	}
	if s, ok = strings.CutPrefix(s, `,"reason":`); !ok {
		return false
	}
	if e.Reason, s, ok = cutPlainString(s); !ok {
		return false
	}
	if s, ok = strings.CutPrefix(s, `,"at":`); !ok {
		return false
	}
	var at string
	if at, s, ok = cutPlainString(s); !ok {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return false
	}
	e.At = t
	if rest, ok := strings.CutPrefix(s, `,"message":`); ok {
		if e.Message, s, ok = cutPlainString(rest); !ok {
			return false
		}
	}
	return s == "}"
}

// cutIntOrNull reads a JSON integer or null at the start of s.
func cutIntOrNull(s string) (*int, string, bool) {
	if rest, ok := strings.CutPrefix(s, "null"); ok {
		return nil, rest, true
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i-digits > 1 && s[digits] == '0' {
		return nil, s, false // a leading zero: not JSON
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return nil, s, false
	}
	return &n, s[i:], true
}

// cutPlainString reads a JSON string at the start of s that has no
// escapes (any backslash: not plain).
func cutPlainString(s string) (string, string, bool) {
	if len(s) == 0 || s[0] != '"' {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", s, false
	}
	v := s[1 : 1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", s, false
	}
	return v, s[2+end:], true
}
