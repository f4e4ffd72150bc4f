// Package yamljson converts the common, plain shapes of YAML documents
// (what `kubectl get -o yaml` prints and what people write by hand) and
// JSON documents to JSON, much faster than sigs.k8s.io/yaml.YAMLToJSON.
//
// Invariant: whenever Convert answers (ok is true), its output is the
// bytes sigs.k8s.io/yaml.YAMLToJSON returns for the same input: same
// values, keys sorted the same way, strings escaped the same way. Convert
// gives up (ok is false) on anything it is not sure of, and the caller then
// uses sigs.k8s.io/yaml: anchors, aliases, tags, directives, complex keys,
// multi-line plain or quoted scalars, plain scalars YAML 1.1 could read as
// something other than a string or a simple integer (yes/on/y, floats,
// octal, hex, underscored or very long integers, timestamps), duplicate
// keys, keep-chomping or indented block scalars, tabs, carriage returns,
// non-ASCII bytes, and every syntax error. The differential tests and
// FuzzConvert check the invariant against sigs.k8s.io/yaml.
package yamljson

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Converter holds buffers reused between documents; it is not safe for
// concurrent use. The zero value is ready.
type Converter struct {
	src   []byte
	lines []line
	nodes []node
	kids  []entry
	stack []entry
	text  []byte // decoded strings that are not slices of src
	out   []byte
	depth int
}

type line struct {
	start, end int // end excludes '\n'
	indent     int
	skip       bool // blank or comment only
}

type kind uint8

const (
	kNull kind = iota
	kTrue
	kFalse
	kInt
	kString
	kMap
	kSeq
)

type node struct {
	kind kind
	// s is the string or the integer's digits: a slice of the source or
	// of Converter.text (appends never move bytes already sliced).
	s            []byte
	first, count int // kids of kMap and kSeq
}

type entry struct {
	key []byte
	val int
}

// maxDepth bounds nesting; deeper documents go the slow way.
const maxDepth = 500

// Convert returns y as JSON and true, or nil and false when it does not
// handle y. The returned slice is freshly allocated.
func (c *Converter) Convert(y []byte) ([]byte, bool) {
	for _, b := range y {
		if (b < 0x20 && b != '\n') || b > 0x7e {
			return nil, false
		}
	}
	c.src = y
	c.lines = c.lines[:0]
	c.nodes = c.nodes[:0]
	c.kids = c.kids[:0]
	c.stack = c.stack[:0]
	c.text = c.text[:0]
	c.out = c.out[:0]
	c.depth = 0
	first := -1
	for start := 0; start < len(y); {
		end := bytes.IndexByte(y[start:], '\n')
		if end < 0 {
			end = len(y)
		} else {
			end += start
		}
		l := line{start: start, end: end}
		for l.indent = 0; start+l.indent < end && y[start+l.indent] == ' '; l.indent++ {
		}
		l.skip = start+l.indent == end || y[start+l.indent] == '#'
		if !l.skip {
			if l.indent == 0 && (bytes.HasPrefix(y[start:end], []byte("---")) || bytes.HasPrefix(y[start:end], []byte("...")) || y[start] == '%') {
				return nil, false
			}
			if first < 0 {
				first = len(c.lines)
			}
		}
		c.lines = append(c.lines, l)
		start = end + 1
	}
	if first < 0 {
		return nil, false
	}
	var root, next int
	var ok bool
	if b := y[c.lines[first].start+c.lines[first].indent]; b == '{' || b == '[' {
		root, ok = c.document(c.lines[first].start + c.lines[first].indent)
	} else {
		root, next, ok = c.block(first, c.lines[first].indent)
		if ok && c.nextLine(next) < len(c.lines) {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	if !c.emit(root) {
		return nil, false
	}
	return bytes.Clone(c.out), true
}

// nextLine returns the first line at or after i that is not blank or a comment.
func (c *Converter) nextLine(i int) int {
	for i < len(c.lines) && c.lines[i].skip {
		i++
	}
	return i
}

func (c *Converter) add(n node) int {
	c.nodes = append(c.nodes, n)
	return len(c.nodes) - 1
}

// isSeqItem reports whether the text at p starts a block sequence entry.
func (c *Converter) isSeqItem(p, end int) bool {
	return c.src[p] == '-' && (p+1 == end || c.src[p+1] == ' ')
}

// block parses the block node whose first line is i, at indent.
func (c *Converter) block(i, indent int) (int, int, bool) {
	l := c.lines[i]
	p := l.start + indent
	if c.isSeqItem(p, l.end) {
		return c.sequence(i, indent)
	}
	return c.mapping(i, indent, indent)
}

func (c *Converter) enter() bool {
	c.depth++
	return c.depth <= maxDepth
}

// mapping parses a block mapping whose first key is at column col of line
// i and whose further keys are at column indent of later lines.
func (c *Converter) mapping(i, col, indent int) (int, int, bool) {
	if !c.enter() {
		return 0, 0, false
	}
	defer func() { c.depth-- }()
	base := len(c.stack)
	for {
		l := c.lines[i]
		p := l.start + col
		e, vp, ok := c.key(p, l.end)
		if !ok {
			return 0, 0, false
		}
		val, next, ok := c.value(i, vp, indent, true)
		if !ok {
			return 0, 0, false
		}
		e.val = val
		c.stack = append(c.stack, e)
		next = c.nextLine(next)
		if next == len(c.lines) || c.lines[next].indent < indent {
			i = next
			break
		}
		if c.lines[next].indent > indent {
			return 0, 0, false
		}
		if nl := c.lines[next]; c.isSeqItem(nl.start+nl.indent, nl.end) {
			return 0, 0, false
		}
		i, col = next, indent
	}
	m, ok := c.finishMap(base)
	return m, i, ok
}

// finishMap turns the entries pushed since base into a map node with
// its keys sorted as encoding/json sorts them; duplicate keys refuse.
func (c *Converter) finishMap(base int) (int, bool) {
	entries := c.stack[base:]
	if !slices.IsSortedFunc(entries, compareKeys) {
		slices.SortFunc(entries, compareKeys)
	}
	for i := 1; i < len(entries); i++ {
		if bytes.Equal(entries[i-1].key, entries[i].key) {
			return 0, false
		}
	}
	first := len(c.kids)
	c.kids = append(c.kids, entries...)
	c.stack = c.stack[:base]
	return c.add(node{kind: kMap, first: first, count: len(entries)}), true
}

func compareKeys(a, b entry) int { return bytes.Compare(a.key, b.key) }

// sequence parses a block sequence whose entries are at indent.
func (c *Converter) sequence(i, indent int) (int, int, bool) {
	if !c.enter() {
		return 0, 0, false
	}
	defer func() { c.depth-- }()
	base := len(c.stack)
	for {
		l := c.lines[i]
		p := l.start + indent + 1
		for p < l.end && c.src[p] == ' ' {
			p++
		}
		var val, next int
		var ok bool
		switch {
		case p == l.end || c.src[p] == '#':
			val, next, ok = c.value(i, p, indent, false)
		case c.isSeqItem(p, l.end):
			return 0, 0, false
		default:
			if _, _, isKey := c.key(p, l.end); isKey {
				val, next, ok = c.mapping(i, p-l.start, p-l.start)
			} else {
				val, next, ok = c.value(i, p, indent, false)
			}
		}
		if !ok {
			return 0, 0, false
		}
		c.stack = append(c.stack, entry{val: val})
		next = c.nextLine(next)
		if next == len(c.lines) || c.lines[next].indent < indent {
			i = next
			break
		}
		nl := c.lines[next]
		if nl.indent > indent {
			return 0, 0, false
		}
		if !c.isSeqItem(nl.start+nl.indent, nl.end) {
			i = next
			break
		}
		i = next
	}
	first := len(c.kids)
	c.kids = append(c.kids, c.stack[base:]...)
	c.stack = c.stack[:base]
	return c.add(node{kind: kSeq, first: first, count: len(c.kids) - first}), i, true
}

// key parses "key:" at p; it returns the key and where its value starts.
func (c *Converter) key(p, end int) (entry, int, bool) {
	s := c.src
	var e entry
	q := p
	switch s[p] {
	case '"', '\'':
		var ok bool
		var str node
		str, q, ok = c.quoted(p, end)
		if !ok {
			return e, 0, false
		}
		e.key = str.s
	default:
		if !keyStart(s[p]) {
			return e, 0, false
		}
		for q < end && keyChar(s[q]) {
			q++
		}
		if k, _ := classify(s[p:q]); k != kString {
			return e, 0, false
		}
		e.key = s[p:q]
	}
	if q-p > 1000 || q >= end || s[q] != ':' || (q+1 < end && s[q+1] != ' ') {
		return e, 0, false
	}
	if string(e.key) == "<<" {
		return e, 0, false
	}
	q++
	for q < end && s[q] == ' ' {
		q++
	}
	return e, q, true
}

func isString(v []byte) bool {
	k, _ := classify(v)
	return k == kString
}

func keyStart(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}

func keyChar(b byte) bool {
	return keyStart(b) || b == '.' || b == '/' || b == '-'
}

// value parses the value that starts at p on line i, in a mapping (inMap)
// or sequence at indent. It returns the node and the line after it.
func (c *Converter) value(i, p, indent int, inMap bool) (int, int, bool) {
	l := c.lines[i]
	s := c.src
	if p == l.end || s[p] == '#' {
		next := c.nextLine(i + 1)
		if next == len(c.lines) {
			return c.add(node{kind: kNull}), next, true
		}
		nl := c.lines[next]
		if nl.indent > indent {
			return c.block(next, nl.indent)
		}
		if nl.indent == indent && inMap && c.isSeqItem(nl.start+nl.indent, nl.end) {
			return c.sequence(next, indent)
		}
		return c.add(node{kind: kNull}), next, true
	}
	var n node
	q := p
	var ok bool
	switch b := s[p]; b {
	case '|', '>':
		return c.blockScalar(i, p, indent)
	case '"', '\'':
		n, q, ok = c.quoted(p, l.end)
	case '[', '{':
		var idx int
		idx, q, ok = c.flow(p, l.end, false)
		if ok && c.rest(q, l.end) {
			return idx, i + 1, true
		}
		return 0, 0, false
	default:
		q = p
		for q < l.end && !(s[q] == '#' && s[q-1] == ' ') {
			if s[q] == ':' && (q+1 == l.end || s[q+1] == ' ') {
				return 0, 0, false
			}
			q++
		}
		for s[q-1] == ' ' {
			q--
		}
		n, ok = c.plain(s[p:q])
	}
	if !ok || !c.rest(q, l.end) {
		return 0, 0, false
	}
	return c.add(n), i + 1, true
}

// rest reports whether only spaces and a comment follow q on the line.
func (c *Converter) rest(q, end int) bool {
	if q == end {
		return true
	}
	if c.src[q] != ' ' {
		return false
	}
	for q < end && c.src[q] == ' ' {
		q++
	}
	return q == end || c.src[q] == '#'
}

// plain resolves a plain scalar as YAML 1.1 (go.yaml.in/yaml/v2) does,
// or refuses it.
func (c *Converter) plain(v []byte) (node, bool) {
	k, i := classify(v)
	switch k {
	case kString:
		return node{kind: kString, s: v}, true
	case kInt:
		if i != nil {
			off := len(c.text)
			c.text = strconv.AppendInt(c.text, *i, 10)
			return node{kind: kInt, s: c.text[off:]}, true
		}
		return node{kind: kInt, s: v}, true
	case kTrue, kFalse, kNull:
		return node{kind: k}, true
	}
	return node{}, false
}

const refuse kind = 255

// classify says what a plain scalar resolves to; refuse when unsure. An
// integer whose text is not what encoding/json writes comes with its value.
func classify(v []byte) (kind, *int64) {
	if len(v) == 0 {
		return kNull, nil
	}
	b := v[0]
	switch {
	case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z':
		if len(v) <= 5 {
			switch string(v) {
			case "true":
				return kTrue, nil
			case "false":
				return kFalse, nil
			case "null":
				return kNull, nil
			case "y", "Y", "yes", "Yes", "YES", "True", "TRUE", "on", "On", "ON",
				"n", "N", "no", "No", "NO", "False", "FALSE", "off", "Off", "OFF", "Null", "NULL":
				return refuse, nil
			}
		}
		return kString, nil
	case b == '/' || b == '_':
		return kString, nil
	case b == '~':
		if len(v) == 1 {
			return kNull, nil
		}
		return kString, nil
	case b == '.':
		switch string(v) {
		case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF":
			return refuse, nil
		}
		if onlyNumberChars(v) {
			return refuse, nil
		}
		return kString, nil
	case b >= '1' && b <= '9':
		letter, exp, dots := false, false, 0
		for _, d := range v {
			switch {
			case d >= '0' && d <= '9':
			case d == '.':
				dots++
			case d == 'e' || d == 'E':
				exp = true
			case d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z':
				letter = true
			default:
				return number(v)
			}
		}
		if letter || dots >= 2 {
			return kString, nil
		}
		if dots == 0 && !exp && len(v) <= 18 {
			return kInt, nil
		}
		return number(v)
	case b == '0' && len(v) == 1:
		return kInt, nil
	case b >= '0' && b <= '9' || b == '-' || b == '+':
		if len(v) == 1 || v[1] == ' ' {
			return refuse, nil // "-" or "- x": a sequence entry
		}
		if b == '-' && len(v) > 1 && v[1] >= '1' && v[1] <= '9' && len(v) <= 19 && onlyDigits(v[1:]) {
			return kInt, nil
		}
		return number(v)
	}
	return refuse, nil
}

// number is go.yaml.in/yaml/v2's resolution of a scalar that starts with
// a digit or a sign, refusing timestamps, floats and unsigned integers.
func number(v []byte) (kind, *int64) {
	if len(v) > 4 && onlyDigits(v[:4]) && v[4] == '-' {
		return refuse, nil // maybe a timestamp
	}
	p := strings.ReplaceAll(string(v), "_", "")
	if i, err := strconv.ParseInt(p, 0, 64); err == nil {
		return kInt, &i
	}
	if _, err := strconv.ParseUint(p, 0, 64); err == nil {
		return refuse, nil
	}
	if onlyNumberChars([]byte(p)) {
		return refuse, nil
	}
	if rest, ok := strings.CutPrefix(p, "0b"); ok {
		if _, err := strconv.ParseUint(rest, 2, 64); err == nil {
			return refuse, nil
		}
	}
	if rest, ok := strings.CutPrefix(p, "-0b"); ok {
		if _, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
			return refuse, nil
		}
	}
	return kString, nil
}

// onlyNumberChars: v could match go.yaml.in/yaml/v2's float syntax.
func onlyNumberChars(v []byte) bool {
	for _, d := range v {
		if !(d >= '0' && d <= '9' || d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-' || d == '_') {
			return false
		}
	}
	return true
}

func onlyDigits(v []byte) bool {
	for _, d := range v {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

// quoted parses a single- or double-quoted scalar that ends on its line.
func (c *Converter) quoted(p, end int) (node, int, bool) {
	s := c.src
	q := s[p]
	start := p + 1
	if nl := bytes.IndexByte(s[start:end], '\n'); nl >= 0 {
		end = start + nl // a quoted scalar must end on its line
	}
	if q == '\'' {
		for i := start; i < end; i++ {
			if s[i] != '\'' {
				continue
			}
			if i+1 < end && s[i+1] == '\'' {
				// an escaped quote: decode into text
				off := len(c.text)
				for j := start; j < end; j++ {
					if s[j] == '\'' {
						if j+1 < end && s[j+1] == '\'' {
							c.text = append(c.text, '\'')
							j++
							continue
						}
						return node{kind: kString, s: c.text[off:]}, j + 1, true
					}
					c.text = append(c.text, s[j])
				}
				return node{}, 0, false
			}
			return node{kind: kString, s: s[start:i]}, i + 1, true
		}
		return node{}, 0, false
	}
	for i := start; i < end; i++ {
		switch s[i] {
		case '"':
			return node{kind: kString, s: s[start:i]}, i + 1, true
		case '\\':
			off := len(c.text)
			c.text = append(c.text, s[start:i]...)
			for j := i; j < end; j++ {
				switch s[j] {
				case '"':
					return node{kind: kString, s: c.text[off:]}, j + 1, true
				case '\\':
					j++
					if j == end {
						return node{}, 0, false
					}
					switch e := s[j]; e {
					case '\\', '"':
						c.text = append(c.text, e)
					case 'n':
						c.text = append(c.text, '\n')
					case 't':
						c.text = append(c.text, '\t')
					case 'r':
						c.text = append(c.text, '\r')
					case 'b':
						c.text = append(c.text, '\b')
					case 'f':
						c.text = append(c.text, '\f')
					case 'u':
						if j+4 >= end {
							return node{}, 0, false
						}
						var r rune
						for _, h := range s[j+1 : j+5] {
							switch {
							case h >= '0' && h <= '9':
								r = r<<4 | rune(h-'0')
							case h >= 'a' && h <= 'f':
								r = r<<4 | rune(h-'a'+10)
							case h >= 'A' && h <= 'F':
								r = r<<4 | rune(h-'A'+10)
							default:
								return node{}, 0, false
							}
						}
						if r >= 0xd800 && r <= 0xdfff {
							return node{}, 0, false
						}
						c.text = utf8.AppendRune(c.text, r)
						j += 4
					default:
						return node{}, 0, false
					}
				default:
					c.text = append(c.text, s[j])
				}
			}
			return node{}, 0, false
		}
	}
	return node{}, 0, false
}

// blockScalar parses "|", "|-", ">" or ">-" at p on line i whose parent
// is at indent.
func (c *Converter) blockScalar(i, p, indent int) (int, int, bool) {
	s := c.src
	l := c.lines[i]
	folded := s[p] == '>'
	strip := false
	q := p + 1
	if q < l.end && s[q] == '-' {
		strip = true
		q++
	}
	for q < l.end && s[q] == ' ' {
		q++
	}
	if q != l.end {
		return 0, 0, false
	}
	j := i + 1
	if j == len(c.lines) || c.lines[j].skip && c.lines[j].start+c.lines[j].indent == c.lines[j].end {
		return 0, 0, false // no content, or leading empty lines
	}
	m := c.lines[j].indent
	if m <= indent {
		return 0, 0, false
	}
	off := len(c.text)
	empties := 0
	last := -1
	for ; j < len(c.lines); j++ {
		cl := c.lines[j]
		if cl.start+cl.indent == cl.end { // whitespace only
			if cl.indent > m {
				return 0, 0, false
			}
			empties++
			continue
		}
		if cl.indent < m {
			if cl.indent > indent {
				return 0, 0, false
			}
			break
		}
		content := s[cl.start+m : cl.end]
		if last >= 0 {
			switch {
			case !folded:
				for range empties + 1 {
					c.text = append(c.text, '\n')
				}
			case empties == 0:
				c.text = append(c.text, ' ')
			default:
				for range empties {
					c.text = append(c.text, '\n')
				}
			}
		}
		if folded && content[0] == ' ' {
			return 0, 0, false
		}
		c.text = append(c.text, content...)
		empties = 0
		last = j
	}
	if last >= 0 && c.lines[last].end == len(s) && !strip {
		return 0, 0, false // clip needs the final line break
	}
	if !strip {
		c.text = append(c.text, '\n')
	}
	// trailing empty lines belong to no one; continue after the content
	return c.add(node{kind: kString, s: c.text[off:]}), last + 1, true
}

// flow parses a flow collection at p. With multiline (a JSON-like
// document), line breaks are spaces; otherwise it must end on its line.
func (c *Converter) flow(p, end int, multiline bool) (int, int, bool) {
	if !c.enter() {
		return 0, 0, false
	}
	defer func() { c.depth-- }()
	s := c.src
	ws := func(q int) int {
		for q < end && (s[q] == ' ' || multiline && s[q] == '\n') {
			q++
		}
		return q
	}
	closer := byte(']')
	isMap := s[p] == '{'
	if isMap {
		closer = '}'
	}
	base := len(c.stack)
	q := ws(p + 1)
	if q < end && s[q] == closer {
		q++
	} else {
		for {
			if q >= end {
				return 0, 0, false
			}
			var e entry
			if isMap {
				var k node
				var ok bool
				switch s[q] {
				case '"', '\'':
					k, q, ok = c.quoted(q, end)
					if !ok || q >= end || s[q] != ':' {
						return 0, 0, false
					}
					q++
				default:
					st := q
					for q < end && keyChar(s[q]) {
						q++
					}
					if st == q || !keyStart(s[st]) || !isString(s[st:q]) || q+1 >= end || s[q] != ':' || s[q+1] != ' ' && !(multiline && s[q+1] == '\n') {
						return 0, 0, false
					}
					k = node{kind: kString, s: s[st:q]}
					q++
				}
				e.key = k.s
				if string(e.key) == "<<" {
					return 0, 0, false
				}
				q = ws(q)
				if q >= end {
					return 0, 0, false
				}
			}
			var val int
			switch s[q] {
			case '[', '{':
				var ok bool
				val, q, ok = c.flow(q, end, multiline)
				if !ok {
					return 0, 0, false
				}
			case '"', '\'':
				n, nq, ok := c.quoted(q, end)
				if !ok {
					return 0, 0, false
				}
				val, q = c.add(n), nq
			default:
				st := q
				for q < end && keyChar(s[q]) {
					q++
				}
				n, ok := c.plain(s[st:q])
				if st == q || !ok {
					return 0, 0, false
				}
				val = c.add(n)
			}
			e.val = val
			c.stack = append(c.stack, e)
			q = ws(q)
			if q >= end {
				return 0, 0, false
			}
			if s[q] == closer {
				q++
				break
			}
			if s[q] != ',' {
				return 0, 0, false
			}
			q = ws(q + 1)
			if q < end && (s[q] == ']' || s[q] == '}') {
				return 0, 0, false // trailing comma
			}
		}
	}
	if isMap {
		idx, ok := c.finishMap(base)
		return idx, q, ok
	}
	first := len(c.kids)
	c.kids = append(c.kids, c.stack[base:]...)
	c.stack = c.stack[:base]
	return c.add(node{kind: kSeq, first: first, count: len(c.kids) - first}), q, true
}

// document parses a whole document that is one flow collection (JSON).
func (c *Converter) document(p int) (int, bool) {
	if bytes.IndexByte(c.src, '#') >= 0 {
		return 0, false // comments, or '#' in strings: keep it simple
	}
	idx, q, ok := c.flow(p, len(c.src), true)
	if !ok {
		return 0, false
	}
	for ; q < len(c.src); q++ {
		if c.src[q] != ' ' && c.src[q] != '\n' {
			return 0, false
		}
	}
	return idx, true
}

const hexDigits = "0123456789abcdef"

// emit writes node i as encoding/json.Marshal would.
func (c *Converter) emit(i int) bool {
	n := &c.nodes[i]
	switch n.kind {
	case kNull:
		c.out = append(c.out, "null"...)
	case kTrue:
		c.out = append(c.out, "true"...)
	case kFalse:
		c.out = append(c.out, "false"...)
	case kInt:
		c.out = append(c.out, n.s...)
	case kString:
		c.appendString(n.s)
	case kMap:
		c.out = append(c.out, '{')
		for k, e := range c.kids[n.first : n.first+n.count] {
			if k > 0 {
				c.out = append(c.out, ',')
			}
			c.appendString(e.key)
			c.out = append(c.out, ':')
			c.emit(e.val)
		}
		c.out = append(c.out, '}')
	case kSeq:
		c.out = append(c.out, '[')
		for k, e := range c.kids[n.first : n.first+n.count] {
			if k > 0 {
				c.out = append(c.out, ',')
			}
			c.emit(e.val)
		}
		c.out = append(c.out, ']')
	}
	return true
}

// appendString is encoding/json's string encoding with HTML escaping.
func (c *Converter) appendString(s []byte) {
	dst := append(c.out, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	c.out = append(dst, '"')
}
