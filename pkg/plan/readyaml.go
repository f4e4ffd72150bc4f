package plan

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// YAML input is split line by line, never held whole: `kubectl get -o
// yaml` prints a cluster as one document, a List whose items are a
// sequence under a top-level "items:" key, and at 150,000 pods that one
// document is most of a gigabyte. Each item goes to the decoding workers as
// soon as its last line is read, as a document of its own (its lines
// dedented past the "- "); the rest of the document (apiVersion, kind,
// metadata) is decoded once it ends. kubectl prints kind after items, so
// whether the items belong to a List is known only then: if the document
// is not a List, its items are dropped and the rest decoded alone, as the
// JSON reader does (no kind the planner reads has a top-level items
// field).
//
// Anything the splitter does not recognise (a document with no "items:"
// line, items written in flow style) is left in the rest of the document
// and decoded whole by the general decoder.

// yamlSplitter holds the document being read.
type yamlSplitter struct {
	file   string
	submit func(*decodeUnit)
	doc    int
	// rest is the document less its streamed items.
	rest  bytes.Buffer
	items []*decodeUnit
	// Inside a top-level items sequence: indent is the column of its
	// "- ", item the lines of the item being read.
	inItems  bool
	awaiting bool // "items:" was read, its first entry not yet
	indent   int
	item     bytes.Buffer
	started  bool // item holds an entry
	// managed leaves out the item's metadata.managedFields.
	managed managedFieldsFilter
}

// splitYAMLStream submits the documents of r, streaming List items.
func splitYAMLStream(name string, r *bufio.Reader, submit func(*decodeUnit)) error {
	s := &yamlSplitter{file: name, submit: submit, doc: 1}
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			s.line(line)
		}
		if errors.Is(err, io.EOF) {
			s.endDocument()
			return nil
		}
		if err != nil {
			return &DocumentError{File: name, Document: s.doc, Err: err}
		}
	}
}

// isSeparator reports whether line ends a document: "---" and nothing but
// white space, as k8s.io/apimachinery's YAML reader splits.
func isSeparator(line []byte) bool {
	after, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && len(bytes.TrimSpace(after)) == 0
}

func (s *yamlSplitter) line(line []byte) {
	if isSeparator(line) {
		s.endDocument()
		return
	}
	switch {
	case s.awaiting:
		s.firstEntry(line)
	case s.inItems:
		s.itemLine(line)
	case isItemsKey(line):
		s.awaiting = true
	default:
		s.rest.Write(line)
	}
}

// isItemsKey reports whether line is a top-level "items:" with its value
// on the following lines.
func isItemsKey(line []byte) bool {
	return bytes.Equal(bytes.TrimRight(line, " \t\r\n"), []byte("items:"))
}

// blankOrComment reports whether line holds no YAML content.
func blankOrComment(line []byte) bool {
	t := bytes.TrimLeft(line, " \t")
	return len(bytes.TrimSpace(t)) == 0 || t[0] == '#'
}

// entryAt reports whether line starts a sequence entry at column indent.
func entryAt(line []byte, indent int) bool {
	if len(line) < indent+2 {
		return false
	}
	for _, c := range line[:indent] {
		if c != ' ' {
			return false
		}
	}
	return line[indent] == '-' && (line[indent+1] == ' ' || line[indent+1] == '\n' || line[indent+1] == '\r')
}

// firstEntry reads the first content line after "items:": a block
// sequence entry starts streaming; anything else (a mapping, a flow
// sequence, a scalar) stays in the document.
func (s *yamlSplitter) firstEntry(line []byte) {
	if blankOrComment(line) {
		return
	}
	s.awaiting = false
	indent := len(line) - len(bytes.TrimLeft(line, " "))
	if !entryAt(line, indent) {
		s.rest.WriteString("items:\n")
		s.rest.Write(line)
		return
	}
	s.inItems, s.indent = true, indent
	s.startItem(line)
}

// itemLine adds a line to the item being read, starts the next one, or
// ends the sequence.
func (s *yamlSplitter) itemLine(line []byte) {
	if !s.plainItemLine(line) {
		s.anyItemLine(line)
	}
}

// anyItemLine is itemLine for every line.
func (s *yamlSplitter) anyItemLine(line []byte) {
	switch {
	case entryAt(line, s.indent):
		s.flushItem()
		s.startItem(line)
	case blankOrComment(line):
		if !s.managed.skipping {
			s.item.WriteByte('\n')
		}
	case indentOf(line) > s.indent:
		s.writeItemLine(dedent(line, s.indent+2))
	default:
		// Back at the top level: the sequence has ended.
		s.flushItem()
		s.inItems = false
		s.line(line)
	}
}

// plainItemLine takes, without trimming, the common line inside an item:
// indented deeper than its "- " and starting with neither white space
// other than spaces nor a comment (itemLine's cases, in its order, for
// that line: not an entry, not blank, deeper).
func (s *yamlSplitter) plainItemLine(line []byte) bool {
	spaces := 0
	for spaces < len(line) && line[spaces] == ' ' {
		spaces++
	}
	if spaces <= s.indent || spaces == len(line) || !plainStart[line[spaces]] {
		return false
	}
	s.writeItemLine(line[min(spaces, s.indent+2):])
	return true
}

// writeItemLine adds a line of the item, dedented, unless it belongs to
// the item's metadata.managedFields.
func (s *yamlSplitter) writeItemLine(text []byte) {
	if !s.managed.drops(text) {
		s.item.Write(text)
	}
}

// managedFieldsFilter finds an item's metadata.managedFields among its
// dedented lines, as kubectl prints it (metadata's keys two spaces in,
// the key alone on its line, the sequence under it), so that its lines,
// half of an API-server pod's, are neither copied nor converted (Compact
// drops it; yamljson's DropManagedFields would skip it later). Blank and
// comment lines inside it go too: kept, they could join a block scalar
// before it.
type managedFieldsFilter struct {
	inMetadata bool
	// childIndent is the indent of metadata's first key, -1 before it.
	childIndent int
	skipping    bool
}

// drops takes the item's next content line and reports whether it is
// part of metadata.managedFields.
func (f *managedFieldsFilter) drops(text []byte) bool {
	indent := indentOf(text)
	if f.skipping {
		if indent > 2 || indent == 2 && entryAt(text, 2) {
			return true
		}
		f.skipping = false
	}
	if indent == 0 {
		*f = managedFieldsFilter{inMetadata: string(text) == "metadata:\n", childIndent: -1}
		return false
	}
	if !f.inMetadata {
		return false
	}
	if f.childIndent < 0 {
		f.childIndent = indent
	}
	f.skipping = f.childIndent == 2 && string(text) == "  managedFields:\n"
	return f.skipping
}

// plainStart marks the bytes after a line's indentation that make it
// neither blank nor a comment.
var plainStart = func() (table [256]bool) {
	for char := range table {
		table[char] = char > ' ' && char < 0x7f && char != '#'
	}
	return table
}()

func indentOf(line []byte) int { return len(line) - len(bytes.TrimLeft(line, " ")) }

// dedent removes up to n leading spaces.
func dedent(line []byte, n int) []byte {
	for i := 0; i < n && len(line) > 0 && line[0] == ' '; i++ {
		line = line[1:]
	}
	return line
}

// startItem begins an item with its "- " line, the dash turned into the
// indentation its content has.
func (s *yamlSplitter) startItem(line []byte) {
	s.started = true
	s.item.Reset()
	s.managed = managedFieldsFilter{}
	s.writeItemLine(line[s.indent+2:])
}

// flushItem submits the item read so far as a document of its own.
func (s *yamlSplitter) flushItem() {
	if !s.started {
		return
	}
	s.started = false
	unit := &decodeUnit{doc: s.doc, item: len(s.items) + 1, raw: rawCopy(s.item.Bytes()), yaml: true}
	if !hasContent(unit.raw) {
		unit.raw = []byte("null")
	}
	s.items = append(s.items, unit)
	s.submit(unit)
}

// endDocument submits what remains of the document: nothing more when
// its items belong to a List, else the document less its items.
func (s *yamlSplitter) endDocument() {
	s.flushItem()
	if s.awaiting {
		s.rest.WriteString("items:\n")
	}
	s.inItems, s.awaiting = false, false
	rest := s.rest.Bytes()
	items := s.items
	s.items = nil
	defer s.rest.Reset()
	if !hasContent(rest) && len(items) == 0 {
		return // a leading "---" or an empty document is not counted
	}
	defer func() { s.doc++ }()
	if len(items) > 0 {
		kind := yamlKind(rest)
		if isList(kind) {
			return
		}
		for _, unit := range items {
			unit.ignored = true
		}
	}
	s.submit(&decodeUnit{doc: s.doc, raw: bytes.Clone(rest), yaml: true})
}

// yamlKind is the value of a top-level "kind:" line, unquoted; "" if there
// is none.
func yamlKind(doc []byte) string {
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		if value, ok := bytes.CutPrefix(line, []byte("kind:")); ok {
			value = bytes.TrimSpace(value)
			value = bytes.Trim(value, `"'`)
			return string(value)
		}
	}
	return ""
}
