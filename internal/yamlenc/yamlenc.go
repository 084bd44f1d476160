// Package yamlenc writes any JSON-encodable value as YAML (block style, keys sorted), for `-o yaml`.
package yamlenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Marshal returns v as YAML. v goes through encoding/json first, so its
// json tags decide the keys, exactly as in `-o json`.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	var b bytes.Buffer
	switch t := tree.(type) {
	case map[string]any:
		if len(t) == 0 {
			b.WriteString("{}\n")
		} else {
			writeMap(&b, t, 0)
		}
	case []any:
		if len(t) == 0 {
			b.WriteString("[]\n")
		} else {
			writeList(&b, t, 0)
		}
	default:
		b.WriteString(scalar(t) + "\n")
	}
	return b.Bytes(), nil
}

// Encode writes v as YAML to w.
func Encode(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func writeMap(b *bytes.Buffer, m map[string]any, indent int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(strings.Repeat(" ", indent))
		writeEntry(b, scalar(k)+":", m[k], indent+2, indent)
	}
}

func writeList(b *bytes.Buffer, l []any, indent int) {
	for _, v := range l {
		b.WriteString(strings.Repeat(" ", indent))
		switch t := v.(type) {
		case map[string]any:
			if len(t) == 0 {
				b.WriteString("- {}\n")
				continue
			}
			b.WriteString("- ")
			// Keys after the first line up under the first, past "- ".
			writeMapInList(b, t, indent+2)
		case []any:
			if len(t) == 0 {
				b.WriteString("- []\n")
				continue
			}
			b.WriteString("-\n")
			writeList(b, t, indent+2)
		default:
			b.WriteString("- " + scalar(t) + "\n")
		}
	}
}

func writeMapInList(b *bytes.Buffer, m map[string]any, indent int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", indent))
		}
		writeEntry(b, scalar(k)+":", m[k], indent+2, indent)
	}
}

// writeEntry writes "key: value" with the value inline when it is a
// scalar or empty, else on the following lines. childIndent indents a
// nested map; listIndent a nested list (YAML allows a list at its key's
// own indentation, as kubectl writes it).
func writeEntry(b *bytes.Buffer, key string, v any, childIndent, listIndent int) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			b.WriteString(key + " {}\n")
			return
		}
		b.WriteString(key + "\n")
		writeMap(b, t, childIndent)
	case []any:
		if len(t) == 0 {
			b.WriteString(key + " []\n")
			return
		}
		b.WriteString(key + "\n")
		writeList(b, t, listIndent)
	default:
		b.WriteString(key + " " + scalar(t) + "\n")
	}
}

// plain is a string YAML reads back as the same string without quotes.
var plain = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./-]*$`)

// reserved are plain words YAML 1.1 or 1.2 would read as something else.
var reserved = map[string]bool{
	"true": true, "false": true, "yes": true, "no": true, "on": true, "off": true,
	"y": true, "n": true, "null": true, "~": true,
}

func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		if t {
			return "true"
		}
		return "false"
	case json.Number:
		return t.String()
	case string:
		if plain.MatchString(t) && !reserved[strings.ToLower(t)] {
			return t
		}
		// A JSON string is a valid YAML double-quoted scalar.
		q, _ := json.Marshal(t)
		return string(q)
	}
	q, _ := json.Marshal(v)
	return string(q)
}
