package api

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"herd"
)

// AppendSessionViews appends vs as a JSON array to b, byte for byte what
// encoding/json writes for them, without its reflection and its second
// pass over each time: `get sessions` of a thousand sessions is encoded
// on every call.
func AppendSessionViews(b []byte, vs []SessionView) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = vs[i].appendJSON(b)
	}
	return append(b, ']')
}

// appendJSON appends v as encoding/json writes it (fields in order, tags
// and omitempty as declared on SessionView).
func (v *SessionView) appendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, v.Name)
	b = append(b, `,"role":`...)
	b = appendString(b, v.Role)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(v.Index), 10)
	b = append(b, `,"host":`...)
	b = appendString(b, v.Host)
	b = append(b, `,"incarnation":`...)
	b = appendString(b, v.Incarnation)
	b = append(b, `,"runtime_kind":`...)
	b = appendString(b, v.RuntimeKind)
	b = append(b, `,"state":`...)
	b = appendString(b, string(v.State))
	b = append(b, `,"runtime":`...)
	b = appendString(b, string(v.Runtime))
	b = append(b, `,"process":`...)
	b = appendString(b, string(v.Process))
	b = append(b, `,"activity":`...)
	b = appendString(b, string(v.Activity))
	b = append(b, `,"restarts":`...)
	b = strconv.AppendInt(b, int64(v.Restarts), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(v.PID), 10)
	b = append(b, `,"started_at":`...)
	b = appendTimePtr(b, v.StartedAt)
	b = append(b, `,"last_activity_at":`...)
	b = appendTimePtr(b, v.LastActivityAt)
	b = append(b, `,"backoff_until":`...)
	b = appendTimePtr(b, v.BackoffUntil)
	b = append(b, `,"attached":`...)
	b = strconv.AppendBool(b, v.Attached)
	b = append(b, `,"exit":`...)
	b = appendExit(b, v.Exit)
	b = append(b, `,"state_since":`...)
	b = appendTime(b, v.StateSince)
	b = append(b, `,"archived":`...)
	b = strconv.AppendBool(b, v.Archived)
	b = append(b, `,"escalated":`...)
	b = strconv.AppendBool(b, v.Escalated)
	b = append(b, `,"notified":`...)
	b = strconv.AppendBool(b, v.Notified)
	b = append(b, `,"outdated":`...)
	b = strconv.AppendBool(b, v.Outdated)
	if v.OutdatedReason != "" {
		b = append(b, `,"outdated_reason":`...)
		b = appendString(b, v.OutdatedReason)
	}
	if v.Unmanaged {
		b = append(b, `,"unmanaged":true`...)
	}
	b = append(b, `,"worktree":`...)
	if w := v.Worktree; w == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"path":`...)
		b = appendString(b, w.Path)
		b = append(b, `,"branch":`...)
		b = appendString(b, w.Branch)
		b = append(b, `,"dirty":`...)
		b = strconv.AppendBool(b, w.Dirty)
		b = append(b, `,"ahead":`...)
		b = strconv.AppendInt(b, int64(w.Ahead), 10)
		b = append(b, '}')
	}
	if v.Account != "" {
		b = append(b, `,"account":`...)
		b = appendString(b, v.Account)
	}
	b = append(b, `,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, v.Usage.InputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, v.Usage.OutputTokens, 10)
	b = append(b, `,"cache_read_tokens":`...)
	b = strconv.AppendInt(b, v.Usage.CacheReadTokens, 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, v.Usage.CacheWriteTokens, 10)
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, v.Usage.CostUSD)
	return append(b, "}}"...)
}

// appendFloat is encoding/json's encoding of a float64: the shortest
// decimal, in exponent form below 1e-6 and from 1e21 on ("1e-07", not
// "1e-07" padded); a NaN or infinity, which it refuses, is written 0.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendExit(b []byte, e *herd.Exit) []byte {
	if e == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"code":`...)
	b = appendIntPtr(b, e.Code)
	b = append(b, `,"signal":`...)
	b = appendIntPtr(b, e.Signal)
	b = append(b, `,"reason":`...)
	b = appendString(b, e.Reason)
	b = append(b, `,"at":`...)
	b = appendTime(b, e.At)
	if e.Message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, e.Message)
	}
	return append(b, '}')
}

func appendIntPtr(b []byte, p *int) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*p), 10)
}

func appendTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendTime is time.Time's MarshalJSON (RFC 3339 with nanoseconds); a
// time it refuses (a year outside 0..9999) is written as null rather
// than failing the whole answer.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = appendRFC3339Nano(b, t)
	return append(b, '"')
}

// appendRFC3339Nano is t.AppendFormat(b, time.RFC3339Nano), by hand for a
// time in UTC (every time the store returns): the general formatter is
// most of the cost of a thousand views.
func appendRFC3339Nano(b []byte, t time.Time) []byte {
	if t.Location() != time.UTC {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	b = appendDigits(b, y, 4)
	b = append(b, '-')
	b = appendDigits(b, int(mo), 2)
	b = append(b, '-')
	b = appendDigits(b, d, 2)
	b = append(b, 'T')
	b = appendDigits(b, h, 2)
	b = append(b, ':')
	b = appendDigits(b, mi, 2)
	b = append(b, ':')
	b = appendDigits(b, s, 2)
	if ns := t.Nanosecond(); ns != 0 {
		b = append(b, '.')
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		b = appendDigits(b, ns, digits)
	}
	return append(b, 'Z')
}

// appendDigits appends n (>= 0) in exactly width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	var buf [9]byte
	for i := width - 1; i >= 0; i-- {
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, buf[:width]...)
}

// appendString is encoding/json's quoting of s: plain ASCII is copied;
// anything it escapes (quotes, backslashes, control characters, <, >, &,
// non-ASCII) is left to encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
