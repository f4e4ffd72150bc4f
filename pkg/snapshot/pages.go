package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PageReader reads the core kinds the snapshot holds most of (pods,
// nodes) as protobuf, each LIST streamed item by item: goroutines read
// (and unzip) the bodies into a few chunks of items reused in turn, while
// the caller decodes the chunks before; no page is ever held whole. Each
// item is filtered at the wire before it is decoded: what Compact would
// drop is never decoded (wire.go).
//
// Whole LISTs, not pages: the API server's watch cache serves a page after
// the first by collecting every object from the continue key to the end
// of the kind, then keeping `limit` of them (k8s.io/apiserver
// cacher/store btreeStore.OrderedListPrefix, Cacher.GetList), so the
// pages of a large kind walk it over and over, the work growing with the
// square of its size; and a quiet cluster's later pages go to etcd, once
// its compaction has dropped the watch cache's snapshot at the list's
// resourceVersion. An informer lists
// the same way: client-go's reflector turns pagination off for its
// relists so the watch cache serves them whole (tools/cache/reflector.go
// list).
//
// Pods in parts, one LIST per namespace, ListsAtOnce at a time: the API
// server copies, sizes and encodes one LIST on one goroutine, so the
// pods' one LIST would be a cold pass's critical path; parts run on as
// many cores as it has. Each part is a read from the
// watch cache at least as fresh as the namespaces' list
// (resourceVersionMatch=NotOlderThan), itself a consistent read, and is
// whole at its own resourceVersion: the last page says which (listedAt),
// and the cache's watch, started from the lowest, skips in each namespace
// the events its LIST already held (kindCache.apply). A namespace made
// after the namespaces' list has only changes after it, which the watch
// brings. A kind with more than maxNamespaceParts namespaces is read in
// one LIST: a LIST costs the API server a few milliseconds even when
// nearly empty.
type PageReader struct {
	rest rest.Interface
	// ListsAtOnce is how many LISTs of a kind read in parts run at once
	// (0: DefaultListsAtOnce; 1: pods too are read in one LIST).
	ListsAtOnce int
}

// DefaultListsAtOnce is enough to keep two API server cores busy while
// the instance decodes, and few enough that the parts do not crowd out
// other clients; hack/benchscale -lists-at-once compares settings
// (docs/performance.md).
const DefaultListsAtOnce = 3

// maxNamespaceParts bounds how many LISTs one kind is read in.
const maxNamespaceParts = 256

// NewPageReader makes a PageReader for the API server of cfg; it has its
// own client-side rate limit (cfg's QPS and Burst), and asks for gzip
// unless cfg.DisableCompression (KARPFUNC_API_COMPRESSION=false:
// functions/config.go apiCompression).
func NewPageReader(cfg *rest.Config) (*PageReader, error) {
	core := rest.CopyConfig(cfg)
	core.APIPath = "/api"
	core.GroupVersion = &corev1.SchemeGroupVersion
	core.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	core.AcceptContentTypes = runtime.ContentTypeProtobuf
	core.ContentType = runtime.ContentTypeProtobuf
	restClient, err := rest.RESTClientFor(core)
	if err != nil {
		return nil, fmt.Errorf("building the snapshot's page reader: %w", err)
	}
	return &PageReader{rest: restClient}, nil
}

// protoKind is a core kind PageReader reads.
type protoKind struct {
	resource, listKind string
	namespaced         bool
	newItem            func() protoObject
	// wire is what decoding keeps of an item (wire.go): what Compact
	// keeps.
	wire *messageRule
}

// protoObject is an object that decodes itself from protobuf, as every
// built-in type does.
type protoObject interface {
	client.Object
	Unmarshal(data []byte) error
}

// page is a run of a list's objects having been read: how many, whether
// more follow, and, on the last, the last LIST's resourceVersion (rv) and,
// from a PageReader, where every part is whole (at).
type page struct {
	count int64
	more  bool
	rv    string
	at    listedAt
}

// listed is where the objects of a last page are whole.
func (p page) listed() (listedAt, error) {
	if p.at.floor > 0 {
		return p.at, nil
	}
	rv, err := parseRV(p.rv)
	return listedAt{floor: rv}, err
}

// listedAt is where a kind's LISTs were whole: every object at floor or
// later; read in parts, each namespace's objects at the resourceVersion of
// its own LIST (namespaces), the highest of which is ceiling.
type listedAt struct {
	floor, ceiling uint64
	namespaces     map[string]uint64
}

// add records where part was whole.
func (l *listedAt) add(part listPart, rvText string) error {
	rv, err := parseRV(rvText)
	if err != nil {
		return err
	}
	if part.namespace == "" {
		l.floor = rv
		return nil
	}
	if l.namespaces == nil {
		if l.floor, err = parseRV(part.atLeast); err != nil {
			return err
		}
		l.namespaces = map[string]uint64{}
	}
	l.namespaces[part.namespace] = rv
	l.ceiling = max(l.ceiling, rv)
	return nil
}

// holds reports whether obj's change at rv is one its namespace's LIST
// already held.
func (l *listedAt) holds(obj client.Object, rv uint64) bool {
	return rv <= l.namespaces[obj.GetNamespace()]
}

// Items travel from the reading goroutines to the decoding one in chunks
// of about chunkBytes, each reader's and spareChunks more: a pod with its
// status is a few KB of protobuf, so a chunk holds on the order of a
// thousand.
const (
	chunkBytes  = 4 << 20
	spareChunks = 2
	// maxItemBytes bounds one object: etcd refuses a value over 1.5 MiB
	// (its --max-request-bytes), so a larger length is a broken body.
	maxItemBytes = 64 << 20
)

// itemChunk is items read, each as the list encodes it (field 2, its
// length, its bytes); a part's last chunk carries the resourceVersion its
// LIST was whole at, or why it did not finish.
type itemChunk struct {
	items []byte
	part  listPart
	last  bool
	rv    string
	err   error
	// free is the pool the chunk goes back to once decoded.
	free chan<- *itemChunk
}

// listPart is one LIST of a kind read in parts: one namespace's objects,
// at least as fresh as atLeast; or, namespace "", the whole kind in a
// consistent read.
type listPart struct {
	namespace, atLeast string
}

// pages reads kind whole, handing each object to add, and yields a page
// every `every` objects and at the end. A consumer that stops early
// cancels the read.
func (r *PageReader) pages(ctx context.Context, kind *protoKind, every int64, add func(client.Object)) iter.Seq2[page, error] {
	return func(yield func(page, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		parts, err := r.parts(ctx, kind)
		if err != nil {
			yield(page{}, fmt.Errorf("listing %s: %w", kind.resource, err))
			return
		}
		filled := r.start(ctx, kind, parts)
		reading := &partsRead{kind: kind, add: add, remaining: len(parts)}
		for {
			var chunk *itemChunk
			select {
			case chunk = <-filled:
			case <-ctx.Done():
				yield(page{}, ctx.Err())
				return
			}
			read, err := reading.take(chunk)
			if err != nil {
				yield(page{}, fmt.Errorf("listing %s%s: %w", kind.resource, chunk.part, err))
				return
			}
			if !read.more {
				yield(read, nil)
				return
			}
			if read.count >= every {
				if !yield(read, nil) {
					return
				}
				reading.count = 0
			}
		}
	}
}

// start queues parts for up to ListsAtOnce readers (stream) and returns
// where their chunks arrive.
func (r *PageReader) start(ctx context.Context, kind *protoKind, parts []listPart) <-chan *itemChunk {
	readers := min(len(parts), r.listsAtOnce())
	free, filled := make(chan *itemChunk, readers+spareChunks), make(chan *itemChunk, readers+spareChunks)
	for range readers + spareChunks {
		free <- &itemChunk{items: make([]byte, 0, chunkBytes), free: free}
	}
	queue := make(chan listPart, len(parts))
	for _, part := range parts {
		queue <- part
	}
	close(queue)
	for range readers {
		go r.stream(ctx, kind, queue, free, filled)
	}
	return filled
}

// partsRead decodes the chunks of a kind's parts as they arrive.
type partsRead struct {
	kind      *protoKind
	add       func(client.Object)
	decoder   itemDecoder
	count     int64 // objects since the last page
	whole     listedAt
	remaining int
}

// take decodes a chunk and hands it back to its reader's pool; the page
// it returns says more (the running count) until every part has ended.
func (p *partsRead) take(chunk *itemChunk) (page, error) {
	if chunk.err != nil {
		return page{}, chunk.err
	}
	if err := p.decoder.items(chunk.items, p.kind, &p.count, p.add); err != nil {
		return page{}, err
	}
	read := page{count: p.count, more: true}
	if chunk.last {
		if err := p.whole.add(chunk.part, chunk.rv); err != nil {
			return page{}, err
		}
		if p.remaining--; p.remaining == 0 {
			read = page{count: p.count, rv: chunk.rv, at: p.whole}
		}
	}
	*chunk = itemChunk{items: chunk.items[:0], free: chunk.free}
	chunk.free <- chunk
	return read, nil
}

func (p listPart) String() string {
	if p.namespace == "" {
		return ""
	}
	return " in namespace " + p.namespace
}

func (r *PageReader) listsAtOnce() int {
	if r.ListsAtOnce > 0 {
		return r.ListsAtOnce
	}
	return DefaultListsAtOnce
}

// parts are the LISTs kind is read in: one per namespace, each at least as
// fresh as the namespaces' list, when kind is namespaced and read in parts;
// else one, a consistent read.
func (r *PageReader) parts(ctx context.Context, kind *protoKind) ([]listPart, error) {
	if !kind.namespaced || r.listsAtOnce() == 1 {
		return []listPart{{}}, nil
	}
	var namespaces corev1.NamespaceList
	// One more than the parts allowed tells too many from enough without
	// reading thousands of namespaces.
	if err := r.rest.Get().AbsPath("/api/v1/namespaces").Param("limit", strconv.Itoa(maxNamespaceParts+1)).
		Do(ctx).Into(&namespaces); err != nil {
		return nil, fmt.Errorf("listing the namespaces to read it by: %w", err)
	}
	if len(namespaces.Items) < 2 || len(namespaces.Items) > maxNamespaceParts {
		return []listPart{{}}, nil
	}
	parts := make([]listPart, 0, len(namespaces.Items))
	for _, ns := range namespaces.Items {
		parts = append(parts, listPart{namespace: ns.Name, atLeast: namespaces.ResourceVersion})
	}
	return parts, nil
}

// stream GETs the parts from queue and reads each into chunks taken from
// free, each sent on filled once full; a part's last says how it ended.
func (r *PageReader) stream(ctx context.Context, kind *protoKind, queue <-chan listPart, free <-chan *itemChunk, filled chan<- *itemChunk) {
	sink := &chunkSink{ctx: ctx, free: free, filled: filled}
	for part := range queue {
		if !sink.take() {
			return
		}
		meta, err := r.readPart(ctx, kind, part, sink)
		if errors.Is(err, errStopped) {
			return
		}
		sink.chunk.part, sink.chunk.last, sink.chunk.rv, sink.chunk.err = part, true, meta.ResourceVersion, err
		if !sink.send() || err != nil {
			return
		}
	}
}

func (r *PageReader) readPart(ctx context.Context, kind *protoKind, part listPart, sink *chunkSink) (metav1.ListMeta, error) {
	req := r.rest.Get().Resource(kind.resource)
	if part.namespace != "" {
		req = req.Namespace(part.namespace).Param("resourceVersion", part.atLeast).
			Param("resourceVersionMatch", string(metav1.ResourceVersionMatchNotOlderThan))
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	defer func() { _ = body.Close() }()
	return readList(body, kind.listKind, sink)
}

// chunkSink reads items into its chunk, sending it on filled and taking
// the next from free when an item would take it past chunkBytes; it stops
// the read when ctx ends.
type chunkSink struct {
	ctx    context.Context
	free   <-chan *itemChunk
	filled chan<- *itemChunk
	chunk  *itemChunk
}

func (s *chunkSink) take() bool {
	select {
	case s.chunk = <-s.free:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *chunkSink) send() bool {
	select {
	case s.filled <- s.chunk:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *chunkSink) room(n int) ([]byte, bool) {
	if len(s.chunk.items) > 0 && len(s.chunk.items)+n+2*binary.MaxVarintLen64 > chunkBytes {
		if !s.send() || !s.take() {
			return nil, false
		}
	}
	items := protowire.AppendTag(s.chunk.items, listItemsField, protowire.BytesType)
	items = protowire.AppendVarint(items, uint64(n))
	start := len(items)
	s.chunk.items = slices.Grow(items, n)[:start+n]
	return s.chunk.items[start:], true
}

func (s *chunkSink) item([]byte) error { return nil }

// bodySink decodes each item as it is read (decodePage).
type bodySink struct {
	decoder *itemDecoder
	kind    *protoKind
	add     func(client.Object)
	count   int64
	scratch []byte
}

func (s *bodySink) room(n int) ([]byte, bool) {
	s.scratch = slices.Grow(s.scratch[:0], n)[:n]
	return s.scratch, true
}

func (s *bodySink) item(value []byte) error {
	return s.decoder.item(value, s.kind, &s.count, s.add)
}

// protobufPrefix starts every protobuf body of the API server
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// decodePage decodes a whole protobuf LIST body as PageReader reads one.
// Every string and byte field is copied out of data as it is decoded, so
// data may be reused once this returns.
func decodePage(data []byte, kind *protoKind, add func(client.Object)) (page, error) {
	sink := &bodySink{decoder: &itemDecoder{}, kind: kind, add: add}
	meta, err := readList(bytes.NewReader(data), kind.listKind, sink)
	if err != nil {
		return page{}, fmt.Errorf("listing %s: %w", kind.resource, err)
	}
	return page{count: sink.count, more: meta.Continue != "", rv: meta.ResourceVersion}, nil
}

// items decodes a chunk's items, counting them in count.
func (d *itemDecoder) items(chunk []byte, kind *protoKind, count *int64, add func(client.Object)) error {
	return eachField(chunk, func(_ protowire.Number, field []byte) error {
		return d.item(field, kind, count, add)
	})
}

// item decodes one item and hands it to add.
func (d *itemDecoder) item(field []byte, kind *protoKind, count *int64, add func(client.Object)) error {
	decoded, err := d.decode(kind, field)
	if err != nil {
		return fmt.Errorf("item %d%s: %w", *count, describeItem(kind, field), err)
	}
	*count++
	add(decoded.object)
	d.remember(decoded)
	return nil
}

// eachRawField calls f with each field of a protobuf message: its number,
// wire type, whole encoding (tag included) and, for length-delimited
// fields, its value.
func eachRawField(msg []byte, f func(num protowire.Number, typ protowire.Type, raw, value []byte) error) error {
	for len(msg) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(msg)
		if tagLen < 0 {
			return fmt.Errorf("malformed protobuf: %w", protowire.ParseError(tagLen))
		}
		valueLen := protowire.ConsumeFieldValue(num, typ, msg[tagLen:])
		if valueLen < 0 {
			return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(valueLen))
		}
		raw := msg[:tagLen+valueLen]
		var value []byte
		if typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(msg[tagLen:])
		}
		msg = msg[tagLen+valueLen:]
		if err := f(num, typ, raw, value); err != nil {
			return err
		}
	}
	return nil
}

// describeItem is " (namespace/name)" of an item that did not decode,
// when its metadata can be read, else "".
func describeItem(kind *protoKind, field []byte) string {
	if name := objectName(field); name != "" {
		return fmt.Sprintf(" (%s %s)", kind.resource, name)
	}
	return ""
}

// eachField calls f with each length-delimited field of a protobuf
// message, skipping fields of other wire types.
func eachField(msg []byte, f func(protowire.Number, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("malformed protobuf: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(n))
			}
			msg = msg[n:]
			continue
		}
		field, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := f(num, field); err != nil {
			return err
		}
	}
	return nil
}
