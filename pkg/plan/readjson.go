package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
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
	// managedFields is pruned and compacted away anyway.
	conv := converter{fast: yamljson.Converter{DropManagedFields: true}}
	var dec decoder
	for unit := range p.next {
		js, err := conv.toJSON(unit)
		if err != nil {
			unit.err = &DocumentError{File: p.file, Document: unit.doc, Err: err}
		} else {
			unit.decoded, unit.err = decode(nil, &dec, p.file, unit.doc, unit.item, js)
		}
		releaseRaw(unit.raw)
		unit.raw = nil
	}
}

// converter turns a unit's text into compact JSON, reusing its buffers
// between units; one per worker.
type converter struct {
	fast yamljson.Converter
}

func (c *converter) toJSON(unit *decodeUnit) ([]byte, error) {
	if unit.yaml {
		if js, ok := c.fast.ConvertPruned(unit.raw, yamlPrunerFor(unit.raw)); ok {
			return js, nil
		}
		js, err := yaml.YAMLToJSON(unit.raw)
		if err != nil {
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		return js, nil
	}
	// decode compacts indented JSON as it prunes it (readTypeMeta).
	return unit.raw, nil
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

// rawBuffers recycles the text of List items between the reader and the
// workers: an item is copied into a buffer and the buffer comes back once
// the item is decoded, so a dump's text (gigabytes for a cluster at AKS's
// limits) is not garbage that drives the collector.
var rawBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRaw: larger buffers are left to the collector.
const maxPooledRaw = 1 << 20

// rawCopy is a copy of src in a recycled buffer.
func rawCopy(src []byte) []byte {
	buf := rawBuffers.Get().(*[]byte)
	return append((*buf)[:0], src...)
}

// releaseRaw gives raw back for another item to be copied into; nothing
// may use it after.
func releaseRaw(raw []byte) {
	if cap(raw) == 0 || cap(raw) > maxPooledRaw {
		return
	}
	rawBuffers.Put(&raw)
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
	stream := jsonStream{file: name, scan: newJSONScanner(r), submit: pool.submit}
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
	scan   *jsonScanner
	submit func(*decodeUnit)
}

func (s *jsonStream) fail(doc, item int, err error) error {
	return &DocumentError{File: s.file, Document: doc, Item: item, Err: err}
}

// documents reads every top-level value of the stream.
func (s *jsonStream) documents() error {
	for doc := 1; ; doc++ {
		next, err := s.scan.peek()
		if errors.Is(err, errEndOfStream) {
			return nil
		}
		if err != nil {
			return s.fail(doc, 0, err)
		}
		if next != '{' {
			return s.fail(doc, 0, s.notAnObject())
		}
		s.scan.pos++
		if err := s.object(doc); err != nil {
			var docErr *DocumentError
			if errors.As(err, &docErr) {
				return err
			}
			return s.fail(doc, 0, fmt.Errorf("not valid JSON: %w", err))
		}
	}
}

// notAnObject says what stands where a document should start.
func (s *jsonStream) notAnObject() error {
	raw, offset, err := s.scan.value()
	if err != nil {
		return fmt.Errorf("not valid JSON (at byte %d): %w", offset, err)
	}
	var scalar any
	if err := json.Unmarshal(raw, &scalar); err != nil {
		return fmt.Errorf("not valid JSON (at byte %d): %w", offset, err)
	}
	return fmt.Errorf("found %s at byte %d where a Kubernetes object ({...}) should start", raw, offset)
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
	for first := true; ; first = false {
		next, err := s.scan.peek()
		if err != nil {
			return s.scan.truncated(err)
		}
		if next == '}' {
			s.scan.pos++
			break
		}
		if !first {
			if err := s.scan.expect(','); err != nil {
				return err
			}
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		if next, err = s.scan.peek(); err == nil && next == '[' && strings.EqualFold(key, "items") {
			streamed, err := s.items(doc)
			if err != nil {
				return err
			}
			items = append(items, streamed...)
			continue
		}
		raw, _, err := s.scan.value()
		if err != nil {
			return s.scan.truncated(err)
		}
		fields = append(fields, field{key: key, raw: slices.Clone(raw)})
	}
	return s.finishObject(doc, fields, items)
}

// key reads an object key and its colon.
func (s *jsonStream) key() (string, error) {
	raw, offset, err := s.scan.value()
	if err != nil {
		return "", s.scan.truncated(err)
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", fmt.Errorf("not valid JSON (at byte %d): expected a field name: %w", offset, err)
	}
	return key, s.scan.expect(':')
}

// items submits each element of an array at the scanner.
func (s *jsonStream) items(doc int) ([]*decodeUnit, error) {
	if err := s.scan.expect('['); err != nil {
		return nil, err
	}
	var units []*decodeUnit
	for item := 1; ; item++ {
		next, err := s.scan.peek()
		if err != nil {
			return nil, s.scan.truncated(err)
		}
		if next == ']' {
			s.scan.pos++
			return units, nil
		}
		if item > 1 {
			if err := s.scan.expect(','); err != nil {
				return nil, err
			}
		}
		raw, _, err := s.scan.value()
		if err != nil {
			return nil, s.fail(doc, item, fmt.Errorf("not valid JSON: %w", s.scan.truncated(err)))
		}
		unit := &decodeUnit{doc: doc, item: item, raw: rawCopy(raw)}
		units = append(units, unit)
		s.submit(unit)
	}
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
