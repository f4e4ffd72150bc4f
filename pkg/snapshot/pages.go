package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PageReader reads the core kinds the snapshot holds most of (pods,
// nodes) as protobuf, in one LIST streamed item by item: a goroutine reads
// (and unzips) the body into a few chunks of items reused in turn, while
// the caller decodes the chunk before; no page is ever held whole. Each
// item is filtered at the wire before it is decoded: what Compact would
// drop is never decoded (wire.go).
//
// One LIST, not pages: the API server's watch cache serves a page after
// the first by collecting every object from the continue key to the end
// of the kind, then keeping `limit` of them (k8s.io/apiserver
// cacher/store btreeStore.OrderedListPrefix, Cacher.GetList), so paging
// 150,000 pods by 5,000 walked 2.4 million objects: 0.98 of the API
// server's 7 CPU-s in its profile of a cold pass (hack/benchscale
// -cpuprofile, with the API server's /debug/pprof); and a quiet
// cluster's later pages went to etcd, once its compaction had dropped the
// watch cache's snapshot at the list's resourceVersion. An informer lists
// the same way: client-go's reflector turns pagination off for its
// relists so the watch cache serves them whole (tools/cache/reflector.go
// list). The API server encodes a protobuf list as it writes it
// (StreamingCollectionEncodingToProtobuf), and this reader decodes it as
// it arrives.
type PageReader struct {
	rest rest.Interface
}

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
// more follow, and, on the last, the list's resourceVersion.
type page struct {
	count int64
	more  bool
	rv    string
}

// Items travel from the reading goroutine to the decoding one in chunks
// of about chunkBytes, chunksInFlight of them at a time: the bench's pods
// are 3.1 KB of protobuf each, so a chunk holds about 1,300.
const (
	chunkBytes     = 4 << 20
	chunksInFlight = 3
	// maxItemBytes bounds one object: etcd refuses a value over 1.5 MiB
	// (its --max-request-bytes), so a larger length is a broken body.
	maxItemBytes = 64 << 20
)

// itemChunk is items read, each as the list encodes it (field 2, its
// length, its bytes); the last chunk carries the list's resourceVersion,
// or why the list did not finish.
type itemChunk struct {
	items []byte
	last  bool
	rv    string
	err   error
}

// pages reads kind whole in one LIST, handing each object to add, and
// yields a page every `every` objects and at the end. A consumer that
// stops early cancels the read.
func (r *PageReader) pages(ctx context.Context, kind *protoKind, every int64, add func(client.Object)) iter.Seq2[page, error] {
	return func(yield func(page, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		free, filled := make(chan *itemChunk, chunksInFlight), make(chan *itemChunk, chunksInFlight)
		for range chunksInFlight {
			free <- &itemChunk{items: make([]byte, 0, chunkBytes)}
		}
		go r.stream(ctx, kind, free, filled)
		var decoder itemDecoder
		var read page
		for {
			var chunk *itemChunk
			select {
			case chunk = <-filled:
			case <-ctx.Done():
				yield(page{}, ctx.Err())
				return
			}
			if chunk.err != nil {
				yield(page{}, fmt.Errorf("listing %s: %w", kind.resource, chunk.err))
				return
			}
			if err := decoder.items(chunk.items, kind, &read.count, add); err != nil {
				yield(page{}, fmt.Errorf("listing %s: %w", kind.resource, err))
				return
			}
			if chunk.last {
				read.rv = chunk.rv
				yield(read, nil)
				return
			}
			chunk.items = chunk.items[:0]
			free <- chunk
			if read.count >= every {
				if !yield(page{count: read.count, more: true}, nil) {
					return
				}
				read.count = 0
			}
		}
	}
}

// stream GETs kind's list and reads it into chunks taken from free, each
// sent on filled once full; the last says how the list ended.
func (r *PageReader) stream(ctx context.Context, kind *protoKind, free <-chan *itemChunk, filled chan<- *itemChunk) {
	sink := &chunkSink{ctx: ctx, free: free, filled: filled}
	if !sink.take() {
		return
	}
	body, err := r.rest.Get().Resource(kind.resource).Stream(ctx)
	if err != nil {
		sink.chunk.last, sink.chunk.err = true, err
		sink.send()
		return
	}
	defer func() { _ = body.Close() }()
	meta, err := readList(body, kind.listKind, sink)
	if errors.Is(err, errStopped) {
		return
	}
	sink.chunk.last, sink.chunk.rv, sink.chunk.err = true, meta.ResourceVersion, err
	sink.send()
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
