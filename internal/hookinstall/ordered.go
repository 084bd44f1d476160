package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// member is one key of a JSON object, with its value kept verbatim.
type member struct {
	Key   string
	Value json.RawMessage
}

// object is a JSON object that keeps its keys in file order, so rewriting a
// user's settings file changes nothing but what herd owns.
type object []member

func (o *object) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not an object")
	}
	var out object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key %v is not a string", tok)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, member{Key: key, Value: v})
	}
	if _, err := dec.Token(); err != nil { // closing brace
		return err
	}
	*o = out
	return nil
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(rawString(m.Key))
		b.WriteByte(':')
		b.Write(m.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// get returns the value of key and whether it is present.
func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// set replaces the value of key, or appends key when absent.
func (o *object) set(key string, v json.RawMessage) {
	for i, m := range *o {
		if m.Key == key {
			(*o)[i].Value = v
			return
		}
	}
	*o = append(*o, member{Key: key, Value: v})
}

// del removes key.
func (o *object) del(key string) {
	out := (*o)[:0]
	for _, m := range *o {
		if m.Key != key {
			out = append(out, m)
		}
	}
	*o = out
}

// getString returns the string value of key, or "" when absent or not a string.
func (o object) getString(key string) string {
	v, ok := o.get(key)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// isNull reports whether v is absent or JSON null.
func isNull(v json.RawMessage) bool {
	return len(bytes.TrimSpace(v)) == 0 || bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// rawString is the JSON encoding of s.
func rawString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
