// Package tomlpos indexes where the keys of a TOML document are written,
// so config's errors can name a key by its canonical path and line, and it
// bounds nesting depth before the decoder runs. internal/config calls it
// while parsing herd.toml. It never decodes values or judges them.
package tomlpos

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Positions maps the keys of a TOML document to the lines they appear on.
// Key paths are canonical: dotted, with array-of-tables elements indexed
// from 0, e.g. "role[1].restart.policy" whether the document wrote
// restart = { policy = ... } or a [role.restart] table.
type Positions struct {
	// lines maps a key path to the line where it is first written.
	lines map[string]int
	// at maps the (line, column) of a written key part to its path, so keys
	// reported by the decoder can be named canonically.
	at map[[2]int]string
	// unindexed maps a line and a path with its indexes removed to the
	// first path written on that line, for the decoder's unindexed keys.
	unindexed map[lineKey]string
}

// lineKey is a path without array indexes on a line.
type lineKey struct {
	line int
	path string
}

// Line returns the line of the first of keys present in the document.
func (p *Positions) Line(keys ...string) (int, string, bool) {
	if p == nil {
		return 0, "", false
	}
	for _, k := range keys {
		if l, ok := p.lines[k]; ok {
			return l, k, true
		}
	}
	return 0, "", false
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// Name returns the canonical path of the key the decoder reported at
// (line, col) with the uncanonical path key, or key itself when unknown.
func (p *Positions) Name(key string, line, col int) string {
	if p == nil {
		return key
	}
	// The decoder reports array-of-tables paths without indexes: pick the
	// indexed path written on that line.
	if k, ok := p.unindexed[lineKey{line, key}]; ok {
		return k
	}
	// Within inline tables it may drop parts of the path; its position
	// still names the key.
	if k, ok := p.at[[2]int{line, col}]; ok {
		return k
	}
	return key
}

// MaxDepth bounds how deeply arrays and inline tables may nest, and how
// many parts one key may have. Real files nest two or three levels; the
// bound keeps a hostile file from costing time quadratic in its size (every
// nested element has a path as long as its depth).
const MaxDepth = 32

// DepthError reports a key or value nested deeper than MaxDepth.
type DepthError struct {
	Line int    // 1-based line where the limit is crossed
	Key  string // canonical path of the key holding the value
	What string // "arrays and inline tables nest" or "key has"
}

// Error names the key and the limit.
func (e *DepthError) Error() string {
	if e.What == depthKey {
		return fmt.Sprintf("%s: key has more than %d dotted parts", e.Key, MaxDepth)
	}
	return fmt.Sprintf("%s: arrays and inline tables nest more than %d levels deep", e.Key, MaxDepth)
}

const (
	depthValue = "value"
	depthKey   = "key"
)

// indexer walks a parsed document, tracking the current table.
type indexer struct {
	p      unstable.Parser
	pos    *Positions
	nl     []int          // byte offsets of every '\n'
	arrays map[string]int // array-of-tables path -> elements seen so far
	err    *DepthError    // the first depth problem; ends the walk
}

// Index parses data and records the line of every key.
func Index(data []byte) (*Positions, error) {
	ix := &indexer{
		pos: &Positions{lines: map[string]int{}, at: map[[2]int]string{},
			unindexed: map[lineKey]string{}},
		arrays: map[string]int{},
	}
	for i, c := range data {
		if c == '\n' {
			ix.nl = append(ix.nl, i)
		}
	}
	ix.p.Reset(data)
	prefix := ""
	for ix.err == nil && ix.p.NextExpression() {
		n := ix.p.Expression()
		switch n.Kind {
		case unstable.Table:
			parts, first, ok := ix.keyParts(prefix, n.Key())
			if !ok {
				break
			}
			prefix = ix.canon(parts)
			ix.record(prefix, first)
		case unstable.ArrayTable:
			parts, first, ok := ix.keyParts(prefix, n.Key())
			if !ok {
				break
			}
			full := ix.canon(parts[:len(parts)-1])
			full = join(full, parts[len(parts)-1])
			ix.arrays[full]++
			prefix = fmt.Sprintf("%s[%d]", full, ix.arrays[full]-1)
			ix.record(full, first)
			ix.record(prefix, first)
		case unstable.KeyValue:
			ix.keyValue(prefix, n, "", 0)
		}
	}
	if ix.err != nil {
		return nil, ix.err
	}
	if err := ix.p.Error(); err != nil {
		return nil, err
	}
	return ix.pos, nil
}

// keyParts returns the parts of a key and the line and column of each. A
// key of more than MaxDepth parts records a DepthError naming it from
// prefix, and returns false.
func (ix *indexer) keyParts(prefix string, it unstable.Iterator) ([]string, [][2]int, bool) {
	var parts []string
	var at [][2]int
	for it.Next() {
		k := it.Node()
		if len(parts) == MaxDepth {
			ix.fail(depthKey, join(prefix, joinParts(parts)), ix.lineCol(k.Raw)[0])
			return nil, nil, false
		}
		parts = append(parts, string(k.Data))
		at = append(at, ix.lineCol(k.Raw))
	}
	return parts, at, true
}

// fail records the first depth problem.
func (ix *indexer) fail(what, key string, line int) {
	if ix.err == nil {
		ix.err = &DepthError{Line: line, Key: key, What: what}
	}
}

// joinParts joins key parts with dots.
func joinParts(parts []string) string {
	path := ""
	for _, p := range parts {
		path = join(path, p)
	}
	return path
}

// canon turns the parts of a table header into a canonical path: a part
// naming an array of tables refers to its last element.
func (ix *indexer) canon(parts []string) string {
	path := ""
	for _, part := range parts {
		path = join(path, part)
		if n, ok := ix.arrays[path]; ok {
			path = fmt.Sprintf("%s[%d]", path, n-1)
		}
	}
	return path
}

// record notes the line of path and of each part leading to it, given the
// positions of the parts of its last key.
func (ix *indexer) record(path string, at [][2]int) {
	if len(at) == 0 {
		return
	}
	last := at[len(at)-1]
	ix.setLine(path, last[0])
	ix.pos.at[last] = path
}

// keyValue records a key = value line under prefix, descending into inline
// tables and arrays. depth counts the arrays and inline tables around it;
// outer is the key of the outermost of them ("" at depth 0).
func (ix *indexer) keyValue(prefix string, n *unstable.Node, outer string, depth int) {
	parts, at, ok := ix.keyParts(prefix, n.Key())
	if !ok {
		return
	}
	path := prefix
	for i, part := range parts {
		path = join(path, part)
		ix.record(path, at[i:i+1])
	}
	line := at[len(at)-1][0]
	if outer == "" {
		outer = path
	}
	ix.value(outer, path, line, n.Value(), depth)
}

// value records the elements of an inline table or array written at path,
// the value of key, nested depth levels deep.
func (ix *indexer) value(key, path string, line int, v *unstable.Node, depth int) {
	if v.Kind != unstable.InlineTable && v.Kind != unstable.Array {
		return
	}
	if depth == MaxDepth {
		ix.fail(depthValue, key, line)
		return
	}
	it := v.Children()
	if v.Kind == unstable.InlineTable {
		for ix.err == nil && it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				ix.keyValue(path, c, key, depth+1)
			}
		}
		return
	}
	for i := 0; ix.err == nil && it.Next(); {
		c := it.Node()
		if c.Kind == unstable.Comment {
			continue
		}
		elem := fmt.Sprintf("%s[%d]", path, i)
		l := line
		if c.Raw.Length > 0 {
			l = ix.lineCol(c.Raw)[0]
		}
		ix.setLine(elem, l)
		ix.value(key, elem, l, c, depth+1)
		i++
	}
}

// setLine records the line of path unless it was seen before.
func (ix *indexer) setLine(path string, line int) {
	if _, ok := ix.pos.lines[path]; ok {
		return
	}
	ix.pos.lines[path] = line
	k := lineKey{line, indexRE.ReplaceAllString(path, "")}
	if _, ok := ix.pos.unindexed[k]; !ok {
		ix.pos.unindexed[k] = path
	}
}

// lineCol returns the 1-based line and column where r starts.
func (ix *indexer) lineCol(r unstable.Range) [2]int {
	off := int(r.Offset)
	// Number of newlines before off.
	i := sort.SearchInts(ix.nl, off)
	lineStart := 0
	if i > 0 {
		lineStart = ix.nl[i-1] + 1
	}
	return [2]int{i + 1, off - lineStart + 1}
}

// join appends a key part to a dotted path.
func join(path, part string) string {
	if path == "" {
		return part
	}
	return path + "." + part
}
