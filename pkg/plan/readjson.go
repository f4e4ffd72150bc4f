package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/plan/internal/yamljson"
)

// JSON input (what `kubectl get -o json` prints) is read as a stream, not
// as YAML: every top-level value in the file is a document, one after
// another, and a List's items are handed to the decoding workers as they
// are read, so neither the whole file nor the whole List is held as text.
// Invariants:
//   - every document is read; bytes after the last one that are not a
//     JSON object are an error naming the document and the byte offset;
//   - objects, warnings and errors come out in file order, as from YAML.

// decodeUnit is one document, or one item of a List, to decode.
type decodeUnit struct {
	doc, item int
	raw       []byte
	// yaml: raw is a YAML document, converted to JSON first.
	yaml    bool
	decoded []decoded
	err     error
	// ignored is set by the reader when the document holding this item
	// turns out not to be a List; only read after the pool is drained.
	ignored bool
}

// decodePool decodes units on GOMAXPROCS workers and keeps them in the
// order they were submitted.
type decodePool struct {
	file  string
	units []*decodeUnit
	next  chan *decodeUnit
	wg    sync.WaitGroup
}

func newDecodePool(file string) *decodePool {
	pool := &decodePool{file: file, next: make(chan *decodeUnit, 256)}
	for range runtime.GOMAXPROCS(0) {
		pool.wg.Add(1)
		go pool.work()
	}
	return pool
}

func (p *decodePool) work() {
	defer p.wg.Done()
	var conv converter
	for unit := range p.next {
		js, err := conv.toJSON(unit)
		if err != nil {
			unit.err = &DocumentError{File: p.file, Document: unit.doc, Err: err}
		} else {
			unit.decoded, unit.err = decode(nil, p.file, unit.doc, unit.item, js)
		}
		unit.raw = nil
	}
}

// converter turns a unit's text into compact JSON, reusing its buffers
// between units; one per worker.
type converter struct {
	fast    yamljson.Converter
	compact bytes.Buffer
}

func (c *converter) toJSON(unit *decodeUnit) ([]byte, error) {
	if unit.yaml {
		if js, ok := c.fast.Convert(unit.raw); ok {
			return js, nil
		}
		js, err := yaml.YAMLToJSON(unit.raw)
		if err != nil {
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		return js, nil
	}
	// Compact JSON lets decode read apiVersion and kind without a full
	// unmarshal; indented input is compacted first.
	c.compact.Reset()
	if json.Compact(&c.compact, unit.raw) != nil {
		return unit.raw, nil // decode reports what is wrong with it
	}
	return c.compact.Bytes(), nil
}

func (p *decodePool) submit(unit *decodeUnit) {
	p.units = append(p.units, unit)
	p.next <- unit
}

// drain waits for every submitted unit and returns them in order.
func (p *decodePool) drain() []*decodeUnit {
	close(p.next)
	p.wg.Wait()
	return p.units
}

// startsWithJSON reports whether the first byte of br that is not white
// space opens a JSON object; the bytes stay in br.
func startsWithJSON(br interface{ Peek(int) ([]byte, error) }) bool {
	for n := 1; ; n *= 2 {
		peeked, err := br.Peek(n)
		if trimmed := bytes.TrimLeft(peeked, " \t\r\n"); len(trimmed) > 0 {
			return trimmed[0] == '{'
		}
		if err != nil || n >= 1<<16 {
			return false
		}
	}
}

// readJSON adds the objects of the JSON documents in r to o.
func (o *Objects) readJSON(name string, r io.Reader) error {
	pool := newDecodePool(name)
	stream := jsonStream{file: name, dec: json.NewDecoder(r), submit: pool.submit}
	streamErr := stream.documents()
	return o.addUnits(pool.drain(), streamErr)
}

// addUnits adds the decoded units in order and returns the first error:
// a unit's, else readErr (the reader stopped after the last unit).
func (o *Objects) addUnits(units []*decodeUnit, readErr error) error {
	for _, unit := range units {
		if unit.ignored {
			continue
		}
		for _, dec := range unit.decoded {
			o.addDecoded(dec)
		}
		if unit.err != nil {
			return unit.err
		}
	}
	return readErr
}

// jsonStream splits a JSON stream into decode units.
type jsonStream struct {
	file   string
	dec    *json.Decoder
	submit func(*decodeUnit)
}

func (s *jsonStream) fail(doc, item int, err error) error {
	return &DocumentError{File: s.file, Document: doc, Item: item, Err: err}
}

// syntaxError names the byte where the stream stopped making sense.
func (s *jsonStream) syntaxError(doc int, err error) error {
	return s.fail(doc, 0, fmt.Errorf("not valid JSON (at byte %d): %w", s.dec.InputOffset(), err))
}

// documents reads every top-level value of the stream.
func (s *jsonStream) documents() error {
	for doc := 1; ; doc++ {
		tok, err := s.dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.syntaxError(doc, err)
		}
		if tok != json.Delim('{') {
			return s.fail(doc, 0, fmt.Errorf("found %v at byte %d where a Kubernetes object ({...}) should start", tok, s.dec.InputOffset()))
		}
		if err := s.object(doc); err != nil {
			return err
		}
	}
}

// field is one top-level field of a document, kept as raw JSON.
type field struct {
	key string
	raw json.RawMessage
}

// object reads one top-level object whose '{' was read: a List's items
// go to the workers one by one, any other object whole.
func (s *jsonStream) object(doc int) error {
	var fields []field
	var items []*decodeUnit
	for s.dec.More() {
		keyTok, err := s.dec.Token()
		if err != nil {
			return s.syntaxError(doc, err)
		}
		key, _ := keyTok.(string)
		if strings.EqualFold(key, "items") {
			streamed, raw, err := s.itemsField(doc)
			if err != nil {
				return err
			}
			items = append(items, streamed...)
			if raw != nil {
				fields = append(fields, field{key: key, raw: raw})
			}
			continue
		}
		var raw json.RawMessage
		if err := s.dec.Decode(&raw); err != nil {
			return s.syntaxError(doc, err)
		}
		fields = append(fields, field{key: key, raw: raw})
	}
	if _, err := s.dec.Token(); err != nil { // the closing '}'
		return s.syntaxError(doc, err)
	}
	return s.finishObject(doc, fields, items)
}

// itemsField reads the value of an "items" field: an array is streamed
// item by item; anything else is returned raw.
func (s *jsonStream) itemsField(doc int) ([]*decodeUnit, json.RawMessage, error) {
	tok, err := s.dec.Token()
	if err != nil {
		return nil, nil, s.syntaxError(doc, err)
	}
	switch tok {
	case json.Delim('['):
		return s.items(doc)
	case json.Delim('{'):
		raw, err := s.rebuildObject(doc)
		return nil, raw, err
	default:
		raw, err := json.Marshal(tok)
		return nil, raw, err
	}
}

// items submits each element of an array whose '[' was read.
func (s *jsonStream) items(doc int) ([]*decodeUnit, json.RawMessage, error) {
	var units []*decodeUnit
	for item := 1; s.dec.More(); item++ {
		var raw json.RawMessage
		if err := s.dec.Decode(&raw); err != nil {
			return nil, nil, s.fail(doc, item, fmt.Errorf("not valid JSON (at byte %d): %w", s.dec.InputOffset(), err))
		}
		unit := &decodeUnit{doc: doc, item: item, raw: raw}
		units = append(units, unit)
		s.submit(unit)
	}
	if _, err := s.dec.Token(); err != nil { // the closing ']'
		return nil, nil, s.syntaxError(doc, err)
	}
	return units, nil, nil
}

// rebuildObject reads the rest of an object whose '{' was read back into
// raw JSON.
func (s *jsonStream) rebuildObject(doc int) (json.RawMessage, error) {
	var fields []field
	for s.dec.More() {
		keyTok, err := s.dec.Token()
		if err != nil {
			return nil, s.syntaxError(doc, err)
		}
		var raw json.RawMessage
		if err := s.dec.Decode(&raw); err != nil {
			return nil, s.syntaxError(doc, err)
		}
		key, _ := keyTok.(string)
		fields = append(fields, field{key: key, raw: raw})
	}
	if _, err := s.dec.Token(); err != nil {
		return nil, s.syntaxError(doc, err)
	}
	return joinFields(fields), nil
}

// joinFields writes fields back as one JSON object.
func joinFields(fields []field) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(f.key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(f.raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// finishObject decides, now that the whole object was read, what its
// streamed items were: a List's items stay; any other object is decoded
// whole without them (no kind the planner reads has an items field, so
// encoding/json would have skipped it too).
func (s *jsonStream) finishObject(doc int, fields []field, items []*decodeUnit) error {
	kind := fieldString(fields, "kind")
	if len(items) > 0 && kind != "" && isList(kind) {
		return nil
	}
	for _, unit := range items {
		unit.ignored = true
	}
	s.submit(&decodeUnit{doc: doc, raw: joinFields(fields)})
	return nil
}

// isList says whether kind names a list of objects (List, PodList, ...).
func isList(kind string) bool {
	return kind == "List" || strings.HasSuffix(kind, "List")
}

// fieldString is the string value of the top-level field key, "" when it
// is absent or not a string.
func fieldString(fields []field, key string) string {
	for _, f := range fields {
		if strings.EqualFold(f.key, key) {
			var value string
			if json.Unmarshal(f.raw, &value) == nil {
				return value
			}
		}
	}
	return ""
}
