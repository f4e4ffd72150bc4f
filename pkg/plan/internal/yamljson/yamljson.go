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
	"encoding/binary"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Converter holds buffers reused between documents; it is not safe for
// concurrent use. The zero value is ready.
type Converter struct {
	// DropManagedFields leaves out the root mapping's
	// metadata.managedFields in block style: its lines are crossed without
	// being parsed, so it is neither converted nor checked (see
	// skipNested). Everything else keeps the invariant.
	DropManagedFields bool

	src   []byte
	lines []line
	nodes []node
	kids  []entry
	stack []entry
	text  []byte // decoded strings that are not slices of src
	out   []byte
	depth int
	// inMetadata: the mapping being parsed is the root's metadata.
	inMetadata bool
	// valueMapping and valueElements are the Pruners for the value about
	// to be parsed: for it if it is a mapping, for its mapping elements if
	// it is a sequence.
	valueMapping, valueElements Pruner
}

// Pruner leaves out entries of block mappings as a document is converted
// (ConvertPruned): an entry it drops is not in the output, and its value,
// when on the following lines, is crossed without being parsed or
// checked. A nil Pruner drops nothing below it.
type Pruner interface {
	// Drop reports whether the entry key is left out.
	Drop(key []byte) bool
	// Mapping is the Pruner for key's value when that is a mapping.
	Mapping(key []byte) Pruner
	// Elements is the Pruner for the mappings in key's value when that is
	// a sequence.
	Elements(key []byte) Pruner
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
	js, ok := c.ConvertShared(y)
	return bytes.Clone(js), ok
}

// ConvertShared is Convert without the copy: the returned slice is the
// Converter's buffer, valid until its next use.
func (c *Converter) ConvertShared(y []byte) ([]byte, bool) {
	return c.ConvertPruned(y, nil)
}

// ConvertPruned is ConvertShared leaving out what root (the Pruner for
// the document's root mapping) drops.
func (c *Converter) ConvertPruned(y []byte, root Pruner) ([]byte, bool) {
	if !printableASCII(y) {
		return nil, false
	}
	c.reset(y)
	c.valueMapping = root
	first, ok := c.splitLines()
	if !ok {
		return nil, false
	}
	top, ok := c.root(first)
	if !ok || !c.emit(top) {
		return nil, false
	}
	return c.out, true
}

// printableASCII reports whether y holds only printable ASCII and line
// feeds. It reads eight bytes at a time; a word with a control byte (a
// line feed, most often) is read byte by byte.
func printableASCII(y []byte) bool {
	for len(y) >= 8 {
		word := binary.LittleEndian.Uint64(y)
		if word&highBits != 0 || (word+lowBits)&highBits != 0 {
			return false // a byte >= 0x80, or 0x7f
		}
		// Some byte < 0x20 (exact for bytes < 0x80).
		if (word-0x20*lowBits)&^word&highBits != 0 && !printableBytes(y[:8]) {
			return false
		}
		y = y[8:]
	}
	return printableBytes(y)
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// printableBytes is printableASCII one byte at a time.
func printableBytes(y []byte) bool {
	for _, b := range y {
		if (b < 0x20 && b != '\n') || b > 0x7e {
			return false
		}
	}
	return true
}

// reset starts a new document, keeping the buffers' capacity.
func (c *Converter) reset(y []byte) {
	c.src = y
	c.lines = c.lines[:0]
	c.nodes = c.nodes[:0]
	c.kids = c.kids[:0]
	c.stack = c.stack[:0]
	c.text = c.text[:0]
	c.out = c.out[:0]
	c.depth = 0
	c.inMetadata = false
	c.valueMapping, c.valueElements = nil, nil
}

// splitLines fills c.lines and returns the first line with content; it
// refuses documents with markers or directives, and empty documents.
func (c *Converter) splitLines() (int, bool) {
	src := c.src
	first := -1
	for start := 0; start < len(src); {
		end := bytes.IndexByte(src[start:], '\n')
		if end < 0 {
			end = len(src)
		} else {
			end += start
		}
		current := scanLine(src, start, end)
		if !current.skip {
			if current.indent == 0 && isMarker(src[start:end]) {
				return 0, false
			}
			if first < 0 {
				first = len(c.lines)
			}
		}
		c.lines = append(c.lines, current)
		start = end + 1
	}
	return first, first >= 0
}

// scanLine measures the line src[start:end]: its indent, and whether it is
// blank or a comment.
func scanLine(src []byte, start, end int) line {
	scanned := line{start: start, end: end}
	for start+scanned.indent < end && src[start+scanned.indent] == ' ' {
		scanned.indent++
	}
	scanned.skip = start+scanned.indent == end || src[start+scanned.indent] == '#'
	return scanned
}

// isMarker reports whether an unindented line is a document marker or a
// directive.
func isMarker(text []byte) bool {
	return bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("...")) || text[0] == '%'
}

// root parses the document whose first line with content is first.
func (c *Converter) root(first int) (int, bool) {
	start := c.lines[first].start + c.lines[first].indent
	if b := c.src[start]; b == '{' || b == '[' {
		return c.document(start)
	}
	root, next, ok := c.block(first, c.lines[first].indent)
	return root, ok && c.nextLine(next) == len(c.lines)
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
	pruner := c.valueMapping
	c.valueMapping, c.valueElements = nil, nil
	base := len(c.stack)
	for {
		l := c.lines[i]
		p := l.start + col
		e, vp, ok := c.key(p, l.end)
		if !ok {
			return 0, 0, false
		}
		next, ok := c.entryValue(&e, i, vp, indent, pruner)
		if !ok {
			return 0, 0, false
		}
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

// entryValue parses the value of the mapping entry e (at indent, its
// value at p of line i) and pushes the entry, unless it is one
// DropManagedFields leaves out; it returns the line after the value.
func (c *Converter) entryValue(e *entry, i, p, indent int, pruner Pruner) (int, bool) {
	if c.dropped(e.key, i, p) {
		return c.skipNested(i, indent), true
	}
	if pruner != nil && pruner.Drop(e.key) {
		return c.dropValue(i, p, indent)
	}
	c.valueMapping, c.valueElements = nil, nil
	if pruner != nil {
		c.valueMapping, c.valueElements = pruner.Mapping(e.key), pruner.Elements(e.key)
	}
	inMetadata := c.inMetadata
	c.inMetadata = c.depth == 1 && string(e.key) == "metadata"
	val, next, ok := c.value(i, p, indent, true)
	c.inMetadata = inMetadata
	e.val = val
	c.stack = append(c.stack, *e)
	return next, ok
}

// dropValue crosses the value a Pruner dropped: one on the following
// lines is skipped, one on the key's line is parsed (it is cheap, and
// keeps its checks) and left out.
func (c *Converter) dropValue(i, p, indent int) (int, bool) {
	if p == c.lines[i].end || c.src[p] == '#' {
		return c.skipNested(i, indent), true
	}
	c.valueMapping, c.valueElements = nil, nil
	_, next, ok := c.value(i, p, indent, true)
	return next, ok
}

// dropped reports whether key, at p of line i, is the managedFields of
// the root's metadata with its value on the following lines.
func (c *Converter) dropped(key []byte, i, p int) bool {
	return c.DropManagedFields && c.inMetadata && c.depth == 2 && string(key) == "managedFields" &&
		(p == c.lines[i].end || c.src[p] == '#')
}

// skipNested returns the line after the nested value of the entry on
// line i at indent: the lines indented deeper, and a sequence's entries
// at indent itself, as nestedValue would parse them.
func (c *Converter) skipNested(i, indent int) int {
	next := i + 1
	for next < len(c.lines) {
		l := c.lines[next]
		if !l.skip && l.indent <= indent && !(l.indent == indent && c.isSeqItem(l.start+l.indent, l.end)) {
			break
		}
		next++
	}
	return next
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
	elements := c.valueElements
	base := len(c.stack)
	for {
		c.valueMapping, c.valueElements = elements, nil
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
		var ok bool
		if q, ok = plainKeyEnd(s, p, end); !ok {
			return e, 0, false
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

// plainKeyEnd returns where the plain key at p ends: at the first ':'
// followed by a space or the end of the line. Besides key characters it
// takes the ':', '{', '}', '[', ']', ',' and '"' that server-side apply's
// managedFields keys hold (f:metadata, k:{"type":"Ready"}, "." too): in a
// block mapping they do not end a plain scalar (go.yaml.in/yaml/v2's
// scanner, yaml_parser_scan_plain_scalar, ends one only at ": ", " #" and
// a line break outside flow collections). A space, or any other byte,
// refuses.
func plainKeyEnd(s []byte, p, end int) (int, bool) {
	if !keyStart(s[p]) && s[p] != '.' {
		return 0, false
	}
	for q := p; q < end; q++ {
		switch b := s[q]; {
		case b == ':' && (q+1 == end || s[q+1] == ' '):
			return q, true
		case keyChar(b), b == ':', b == '{', b == '}', b == '[', b == ']', b == ',', b == '"':
		default:
			return 0, false
		}
	}
	return 0, false
}

// value parses the value that starts at p on line i, in a mapping (inMap)
// or sequence at indent. It returns the node and the line after it.
func (c *Converter) value(i, p, indent int, inMap bool) (int, int, bool) {
	end := c.lines[i].end
	if p == end || c.src[p] == '#' {
		return c.nestedValue(i, indent, inMap)
	}
	switch c.src[p] {
	case '|', '>':
		return c.blockScalar(i, p, indent)
	case '[', '{':
		idx, q, ok := c.flow(p, end, false)
		if ok && c.rest(q, end) {
			return idx, i + 1, true
		}
		return 0, 0, false
	}
	var scalar node
	var q int
	var ok bool
	if b := c.src[p]; b == '"' || b == '\'' {
		scalar, q, ok = c.quoted(p, end)
		if !ok && b == '\'' {
			return c.multilineSingleQuoted(i, p, indent)
		}
	} else {
		scalar, q, ok = c.plainValue(p, end)
	}
	if !ok || !c.rest(q, end) {
		return 0, 0, false
	}
	return c.add(scalar), i + 1, true
}

// nestedValue parses the value of a key or entry with nothing after it on
// line i: a block on the following lines, a sequence at the same indent
// under a mapping key, or null.
func (c *Converter) nestedValue(i, indent int, inMap bool) (int, int, bool) {
	next := c.nextLine(i + 1)
	if next == len(c.lines) {
		return c.add(node{kind: kNull}), next, true
	}
	following := c.lines[next]
	if following.indent > indent {
		return c.block(next, following.indent)
	}
	if following.indent == indent && inMap && c.isSeqItem(following.start+following.indent, following.end) {
		return c.sequence(next, indent)
	}
	return c.add(node{kind: kNull}), next, true
}

// plainValue parses a plain scalar at p that ends at a comment or the end
// of the line; a ": " inside it refuses (a nested mapping on one line).
func (c *Converter) plainValue(p, end int) (node, int, bool) {
	s := c.src
	q := p
	for q < end && !(s[q] == '#' && s[q-1] == ' ') {
		if s[q] == ':' && (q+1 == end || s[q+1] == ' ') {
			return node{}, 0, false
		}
		q++
	}
	for s[q-1] == ' ' {
		q--
	}
	scalar, ok := c.plain(s[p:q])
	return scalar, q, ok
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

// scalarRule resolves a plain scalar that starts with a given byte.
type scalarRule func(v []byte) (kind, *int64)

// scalarRules is classify's table: the rule for each first byte of a plain
// scalar. A byte with no rule (nil) refuses.
var scalarRules = func() (rules [256]scalarRule) {
	for b := 'a'; b <= 'z'; b++ {
		rules[b] = classifyWord
		rules[b-'a'+'A'] = classifyWord
	}
	for b := '1'; b <= '9'; b++ {
		rules[b] = classifyDecimal
	}
	rules['/'] = alwaysString
	rules['_'] = alwaysString
	rules['~'] = classifyTilde
	rules['.'] = classifyDot
	rules['0'] = classifyZero
	rules['-'] = classifySigned
	rules['+'] = classifySigned
	return rules
}()

// reservedWords are the words of at most five letters YAML 1.1 reads as
// something other than a string: JSON's three, and the spellings
// go.yaml.in/yaml/v2 reads as booleans or null that JSON would not (refused).
var reservedWords = map[string]kind{
	"true": kTrue, "false": kFalse, "null": kNull,
	"y": refuse, "Y": refuse, "yes": refuse, "Yes": refuse, "YES": refuse,
	"True": refuse, "TRUE": refuse, "on": refuse, "On": refuse, "ON": refuse,
	"n": refuse, "N": refuse, "no": refuse, "No": refuse, "NO": refuse,
	"False": refuse, "FALSE": refuse, "off": refuse, "Off": refuse, "OFF": refuse,
	"Null": refuse, "NULL": refuse,
}

// classify says what a plain scalar resolves to; refuse when unsure. An
// integer whose text is not what encoding/json writes comes with its value.
func classify(v []byte) (kind, *int64) {
	if len(v) == 0 {
		return kNull, nil
	}
	if rule := scalarRules[v[0]]; rule != nil {
		return rule(v)
	}
	return refuse, nil
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func alwaysString([]byte) (kind, *int64) { return kString, nil }

// classifyWord: a scalar that starts with a letter is a string unless it is
// a reserved word.
func classifyWord(v []byte) (kind, *int64) {
	if len(v) <= 5 {
		if reserved, ok := reservedWords[string(v)]; ok {
			return reserved, nil
		}
	}
	return kString, nil
}

// classifyTilde: "~" alone is null.
func classifyTilde(v []byte) (kind, *int64) {
	if len(v) == 1 {
		return kNull, nil
	}
	return kString, nil
}

// classifyDot refuses .nan, .inf and what strconv.ParseFloat reads (a
// float to go.yaml.in/yaml/v2's resolve); the rest, "." among them, is a
// string.
func classifyDot(v []byte) (kind, *int64) {
	switch string(v) {
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF":
		return refuse, nil
	}
	if _, err := strconv.ParseFloat(string(v), 64); err == nil {
		return refuse, nil
	}
	return kString, nil
}

// classifyDecimal resolves a scalar that starts with 1-9: a short run of
// digits is an integer as it stands; letters or two dots make a string
// (a version, a size); anything else goes to number.
func classifyDecimal(v []byte) (kind, *int64) {
	letter, exp, dots := false, false, 0
	for _, d := range v {
		switch {
		case d >= '0' && d <= '9':
		case d == '.':
			dots++
		case d == 'e' || d == 'E':
			exp = true
		case isLetter(d):
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
}

// classifyZero: "0" is an integer; 0x…, 0o…, 07… go to classifySigned.
func classifyZero(v []byte) (kind, *int64) {
	if len(v) == 1 {
		return kInt, nil
	}
	return classifySigned(v)
}

// classifySigned resolves a scalar that starts with a sign or with 0.
func classifySigned(v []byte) (kind, *int64) {
	if len(v) == 1 || v[1] == ' ' {
		return refuse, nil // "-" or "- x": a sequence entry
	}
	if v[1] == '.' && (v[0] == '-' || v[0] == '+') {
		return refuse, nil // -.inf, +.5: floats
	}
	if v[0] == '-' && v[1] >= '1' && v[1] <= '9' && len(v) <= 19 && onlyDigits(v[1:]) {
		return kInt, nil
	}
	return number(v)
}

// yamlFloat is go.yaml.in/yaml/v2's float syntax (resolve.go,
// yamlStyleFloat), tried after the underscores are removed.
var yamlFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

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
	if yamlFloat.MatchString(p) {
		// A float when ParseFloat reads it, else a string
		// (5e57657452, a pod-template-hash, overflows).
		if _, err := strconv.ParseFloat(p, 64); err == nil {
			return refuse, nil
		}
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
	start := p + 1
	if nl := bytes.IndexByte(c.src[start:end], '\n'); nl >= 0 {
		end = start + nl // a quoted scalar must end on its line
	}
	if c.src[p] == '\'' {
		return c.singleQuoted(start, end)
	}
	return c.doubleQuoted(start, end)
}

// singleQuoted parses the single-quoted scalar whose text starts at start:
// a slice of the source, or decoded text when it holds an escaped quote.
func (c *Converter) singleQuoted(start, end int) (node, int, bool) {
	s := c.src
	for i := start; i < end; i++ {
		if s[i] != '\'' {
			continue
		}
		if i+1 < end && s[i+1] == '\'' {
			return c.decodeSingleQuoted(start, end)
		}
		return node{kind: kString, s: s[start:i]}, i + 1, true
	}
	return node{}, 0, false
}

// decodeSingleQuoted decodes a single-quoted scalar whose quotes are escaped
// by doubling them into text.
func (c *Converter) decodeSingleQuoted(start, end int) (node, int, bool) {
	s := c.src
	off := len(c.text)
	for j := start; j < end; j++ {
		if s[j] != '\'' {
			c.text = append(c.text, s[j])
			continue
		}
		if j+1 < end && s[j+1] == '\'' {
			c.text = append(c.text, '\'')
			j++
			continue
		}
		return node{kind: kString, s: c.text[off:]}, j + 1, true
	}
	return node{}, 0, false
}

// doubleQuoted parses the double-quoted scalar whose text starts at start:
// a slice of the source, or decoded text from its first escape on.
func (c *Converter) doubleQuoted(start, end int) (node, int, bool) {
	s := c.src
	for i := start; i < end; i++ {
		switch s[i] {
		case '"':
			return node{kind: kString, s: s[start:i]}, i + 1, true
		case '\\':
			return c.decodeDoubleQuoted(start, i, end)
		}
	}
	return node{}, 0, false
}

// decodeDoubleQuoted decodes a double-quoted scalar into text; its first
// escape is at i.
func (c *Converter) decodeDoubleQuoted(start, i, end int) (node, int, bool) {
	s := c.src
	off := len(c.text)
	c.text = append(c.text, s[start:i]...)
	for j := i; j < end; j++ {
		switch s[j] {
		case '"':
			return node{kind: kString, s: c.text[off:]}, j + 1, true
		case '\\':
			last, ok := c.escape(j+1, end)
			if !ok {
				return node{}, 0, false
			}
			j = last
		default:
			c.text = append(c.text, s[j])
		}
	}
	return node{}, 0, false
}

// simpleEscapes decodes the one-letter escapes; 0 is none.
var simpleEscapes = [256]byte{'\\': '\\', '"': '"', 'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f'}

// escape decodes the escape whose letter is at j into text and returns the
// index of its last byte; escapes other than the simple ones and \uXXXX
// (outside the surrogates) refuse.
func (c *Converter) escape(j, end int) (int, bool) {
	if j == end {
		return 0, false
	}
	letter := c.src[j]
	if decoded := simpleEscapes[letter]; decoded != 0 {
		c.text = append(c.text, decoded)
		return j, true
	}
	if letter != 'u' || j+4 >= end {
		return 0, false
	}
	r, ok := hexRune(c.src[j+1 : j+5])
	if !ok || r >= 0xd800 && r <= 0xdfff {
		return 0, false
	}
	c.text = utf8.AppendRune(c.text, r)
	return j + 4, true
}

// hexRune reads four hex digits.
func hexRune(digits []byte) (rune, bool) {
	var r rune
	for _, h := range digits {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// blockScalar parses "|", "|-", ">" or ">-" at p on line i whose parent
// is at indent.
func (c *Converter) blockScalar(i, p, indent int) (int, int, bool) {
	folded := c.src[p] == '>'
	strip, ok := c.blockHeader(i, p)
	if !ok {
		return 0, 0, false
	}
	j := i + 1
	if j == len(c.lines) || c.lines[j].skip && c.lines[j].start+c.lines[j].indent == c.lines[j].end {
		return 0, 0, false // no content, or leading empty lines
	}
	contentIndent := c.lines[j].indent
	if contentIndent <= indent {
		return 0, 0, false
	}
	off := len(c.text)
	last, ok := c.blockLines(j, indent, contentIndent, folded)
	if !ok {
		return 0, 0, false
	}
	if last >= 0 && c.lines[last].end == len(c.src) && !strip {
		return 0, 0, false // clip needs the final line break
	}
	if !strip {
		c.text = append(c.text, '\n')
	}
	// trailing empty lines belong to no one; continue after the content
	return c.add(node{kind: kString, s: c.text[off:]}), last + 1, true
}

// blockHeader reads a block scalar's header at p on line i: whether it
// strips ("-"); nothing but spaces may follow.
func (c *Converter) blockHeader(i, p int) (strip, ok bool) {
	end := c.lines[i].end
	q := p + 1
	if q < end && c.src[q] == '-' {
		strip = true
		q++
	}
	for q < end && c.src[q] == ' ' {
		q++
	}
	return strip, q == end
}

// blockLines appends a block scalar's content lines, from line j at
// contentIndent, to text and returns the last content line.
func (c *Converter) blockLines(j, indent, contentIndent int, folded bool) (int, bool) {
	empties := 0
	last := -1
	for ; j < len(c.lines); j++ {
		current := c.lines[j]
		if current.start+current.indent == current.end { // whitespace only
			if current.indent > contentIndent {
				return 0, false
			}
			empties++
			continue
		}
		if current.indent < contentIndent {
			if current.indent > indent {
				return 0, false
			}
			break
		}
		content := c.src[current.start+contentIndent : current.end]
		if last >= 0 {
			c.lineBreaks(empties, folded)
		}
		if folded && content[0] == ' ' {
			return 0, false
		}
		c.text = append(c.text, content...)
		empties = 0
		last = j
	}
	return last, true
}

// lineBreaks appends what joins two content lines with empties empty lines
// between them: literal keeps every break, folded turns a lone break into
// a space.
func (c *Converter) lineBreaks(empties int, folded bool) {
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

// flowScan parses the inside of a flow collection that ends before end;
// with multiline, line breaks are spaces.
type flowScan struct {
	conv      *Converter
	end       int
	multiline bool
}

// space skips spaces (and line breaks when multiline) from q.
func (f flowScan) space(q int) int {
	s := f.conv.src
	for q < f.end && (s[q] == ' ' || f.multiline && s[q] == '\n') {
		q++
	}
	return q
}

// flow parses a flow collection at p. With multiline (a JSON-like
// document), line breaks are spaces; otherwise it must end on its line.
func (c *Converter) flow(p, end int, multiline bool) (int, int, bool) {
	if !c.enter() {
		return 0, 0, false
	}
	defer func() { c.depth-- }()
	scan := flowScan{conv: c, end: end, multiline: multiline}
	isMap := c.src[p] == '{'
	closer := byte(']')
	if isMap {
		closer = '}'
	}
	base := len(c.stack)
	q := scan.space(p + 1)
	if q < end && c.src[q] == closer {
		q++
	} else {
		var ok bool
		if q, ok = scan.entries(q, isMap, closer); !ok {
			return 0, 0, false
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

// entries pushes a non-empty flow collection's entries from q onto the
// stack and returns the position after its closer; trailing commas refuse.
func (f flowScan) entries(q int, isMap bool, closer byte) (int, bool) {
	s := f.conv.src
	for {
		if q >= f.end {
			return 0, false
		}
		var item entry
		var ok bool
		if isMap {
			if item.key, q, ok = f.key(q); !ok {
				return 0, false
			}
		}
		if item.val, q, ok = f.value(q); !ok {
			return 0, false
		}
		f.conv.stack = append(f.conv.stack, item)
		q = f.space(q)
		if q >= f.end {
			return 0, false
		}
		if s[q] == closer {
			return q + 1, true
		}
		if s[q] != ',' {
			return 0, false
		}
		q = f.space(q + 1)
		if q < f.end && (s[q] == ']' || s[q] == '}') {
			return 0, false // trailing comma
		}
	}
}

// key parses a flow mapping's "key:" at q and returns the key and where its
// value starts.
func (f flowScan) key(q int) ([]byte, int, bool) {
	s := f.conv.src
	var key []byte
	switch s[q] {
	case '"', '\'':
		quotedKey, next, ok := f.conv.quoted(q, f.end)
		if !ok || next >= f.end || s[next] != ':' {
			return nil, 0, false
		}
		key = quotedKey.s
		q = next + 1
	default:
		start := q
		for q < f.end && keyChar(s[q]) {
			q++
		}
		if !f.plainKey(start, q) {
			return nil, 0, false
		}
		key = s[start:q]
		q++
	}
	if string(key) == "<<" {
		return nil, 0, false
	}
	q = f.space(q)
	if q >= f.end {
		return nil, 0, false
	}
	return key, q, true
}

// plainKey reports whether s[start:q] is a plain string key followed by
// ": " (or ":" and a line break in a multiline document).
func (f flowScan) plainKey(start, q int) bool {
	s := f.conv.src
	if start == q || !keyStart(s[start]) || !isString(s[start:q]) || q+1 >= f.end || s[q] != ':' {
		return false
	}
	return s[q+1] == ' ' || f.multiline && s[q+1] == '\n'
}

// value parses a flow entry's value at q: a nested collection, a quoted
// scalar or a plain scalar of key characters.
func (f flowScan) value(q int) (int, int, bool) {
	s := f.conv.src
	switch s[q] {
	case '[', '{':
		return f.conv.flow(q, f.end, f.multiline)
	case '"', '\'':
		scalar, next, ok := f.conv.quoted(q, f.end)
		if !ok {
			return 0, 0, false
		}
		return f.conv.add(scalar), next, true
	}
	start := q
	for q < f.end && keyChar(s[q]) {
		q++
	}
	scalar, ok := f.conv.plain(s[start:q])
	if start == q || !ok {
		return 0, 0, false
	}
	return f.conv.add(scalar), q, true
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
			dst = appendEscaped(append(dst, s[start:i]...), b)
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

// appendEscaped appends the JSON escape of an ASCII byte encoding/json escapes.
func appendEscaped(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
}

// multilineSingleQuoted parses a single-quoted scalar that opens at p on
// line i, under a parent at indent, and ends on a later line: what
// go.yaml.in/yaml/v2 writes for a long string with ": " in it (a pending
// pod's PodScheduled message). Its lines fold as the scanner folds them
// (yaml_parser_scan_flow_scalar): the spaces around a line break go, a
// lone break becomes a space, n empty lines become n line feeds. Every
// line after the first must be indented past the parent, or it refuses.
func (c *Converter) multilineSingleQuoted(i, p, indent int) (int, int, bool) {
	off := len(c.text)
	from := p + 1
	for j := i; j < len(c.lines); j++ {
		current := c.lines[j]
		if j > i {
			if current.start+current.indent == current.end {
				c.text = append(c.text, '\n')
				continue
			}
			if current.indent <= indent {
				return 0, 0, false
			}
			from = current.start + current.indent
			c.foldBreak(off)
		}
		closing, ok := c.appendSingleQuotedLine(from, current.end)
		if ok {
			if !c.rest(closing, current.end) {
				return 0, 0, false
			}
			return c.add(node{kind: kString, s: c.text[off:]}), j + 1, true
		}
		c.trimTrailingSpaces(off)
	}
	return 0, 0, false
}

// trimTrailingSpaces drops the spaces at the end of text, back to off.
func (c *Converter) trimTrailingSpaces(off int) {
	n := len(c.text)
	for n > off && c.text[n-1] == ' ' {
		n--
	}
	c.text = c.text[:n]
}

// foldBreak joins the next content line to the scalar in text from
// off: a space after a content line, nothing after empty lines (already
// line feeds).
func (c *Converter) foldBreak(off int) {
	if n := len(c.text); n > off && c.text[n-1] == '\n' {
		return
	}
	c.text = append(c.text, ' ')
}

// appendSingleQuotedLine appends src[from:end] to text up to the closing
// quote, undoubling quotes; it returns the index after the closing quote
// and true, or false when the line ends first.
func (c *Converter) appendSingleQuotedLine(from, end int) (int, bool) {
	for j := from; j < end; j++ {
		if c.src[j] != '\'' {
			c.text = append(c.text, c.src[j])
			continue
		}
		if j+1 < end && c.src[j+1] == '\'' {
			c.text = append(c.text, '\'')
			j++
			continue
		}
		return j + 1, true
	}
	return 0, false
}
