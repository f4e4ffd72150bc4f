package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PageReader reads LIST pages of the core kinds the snapshot holds most of
// (pods, nodes) as protobuf, each page into one buffer reused from page to
// page and decoded object by object. A client's List reads each page with
// io.ReadAll, which grows a new buffer by doubling for every page (the
// page of 5,000 pods is about 15 MB), then copies the page once more as it
// unwraps it, and decodes every item into one slice that stays alive as
// long as any of its objects does: in the bench's profile of a cold pass
// over 30,000 pods (hack/benchscale -cpuprofile) the read and the copy
// were 40% of the instance's CPU; over 150,000, where decoding and GC
// weigh more, this reader (with managedFields skipped) saved 0.5-1 of
// 9.5-10.5 CPU-seconds and 60-115 MB of peak heap. Each item is filtered
// at the wire before it is decoded: what Compact would drop is never
// decoded (wire.go).
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

// page is what one LIST page said besides its items.
type page struct {
	count          int64
	cont, rvOfPage string
}

// A kind's first page is read into a buffer of itemBytesHint per object
// asked for (at most maxFirstBuffer), not one grown by doubling from
// nothing: the bench's pods are 3.1 KB of protobuf each, its nodes 3.4 KB,
// and growing to a 15 MB page allocates and clears twice that on the way,
// on memory the process touches for the first time.
const (
	itemBytesHint  = 4 << 10
	maxFirstBuffer = 64 << 20
)

// pages reads kind whole, a page of limit objects at a time, each object
// handed to add, and yields each page once its objects are. The next page
// is asked for as soon as a page's body has arrived (its continue token
// comes first, in the list's metadata): the API server encodes it, and the
// transport reads and unzips it, while this page decodes. At 150,000 pods
// the API server's part and the decoding each take seconds of CPU, which
// one page at a time added up. A consumer that stops early cancels the
// page on its way.
func (r *PageReader) pages(ctx context.Context, kind *protoKind, limit int64, add func(client.Object)) iter.Seq2[page, error] {
	return func(yield func(page, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var decoder itemDecoder
		bufs := [2]*bytes.Buffer{{}, {}}
		pending := r.fetchAsync(ctx, kind, limit, "", bufs[0])
		for i := 0; ; i++ {
			got := <-pending
			if got.err != nil {
				yield(page{}, got.err)
				return
			}
			if got.next != "" {
				pending = r.fetchAsync(ctx, kind, limit, got.next, bufs[(i+1)%2])
			}
			read, err := decoder.page(bufs[i%2].Bytes(), kind, add)
			if !yield(read, err) || err != nil || got.next == "" {
				return
			}
		}
	}
}

// fetched is a page's body having arrived: the continue token of the page
// after it, or why it did not.
type fetched struct {
	next string
	err  error
}

// fetchAsync fetches a page into buf in the background.
func (r *PageReader) fetchAsync(ctx context.Context, kind *protoKind, limit int64, cont string, buf *bytes.Buffer) <-chan fetched {
	done := make(chan fetched, 1)
	go func() {
		next, err := r.fetch(ctx, kind, limit, cont, buf)
		done <- fetched{next: next, err: err}
	}()
	return done
}

// fetch reads one page of kind from cont into buf, whole, and returns the
// continue token its list metadata carries.
func (r *PageReader) fetch(ctx context.Context, kind *protoKind, limit int64, cont string, buf *bytes.Buffer) (string, error) {
	req := r.rest.Get().Resource(kind.resource).Param("limit", strconv.FormatInt(limit, 10))
	if cont != "" {
		req = req.Param("continue", cont)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	buf.Reset()
	if buf.Cap() == 0 {
		buf.Grow(int(min(limit*itemBytesHint, maxFirstBuffer)))
	}
	if _, err := buf.ReadFrom(body); err != nil {
		return "", fmt.Errorf("reading a page of %s: %w", kind.resource, err)
	}
	return peekContinue(buf.Bytes(), kind)
}

// peekContinue is the continue token of a protobuf LIST body, read from
// the list's metadata (field 1, encoded before the items) without walking
// the items.
func peekContinue(data []byte, kind *protoKind) (string, error) {
	raw, err := unwrapUnknown(data, kind.listKind)
	if err != nil {
		return "", fmt.Errorf("a page of %s: %w", kind.resource, err)
	}
	for len(raw) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(raw)
		if tagLen < 0 {
			break
		}
		valueLen := protowire.ConsumeFieldValue(num, typ, raw[tagLen:])
		if valueLen < 0 {
			break
		}
		if num == 1 && typ == protowire.BytesType {
			field, _ := protowire.ConsumeBytes(raw[tagLen:])
			var listMeta metav1.ListMeta
			if err := listMeta.Unmarshal(field); err != nil {
				return "", fmt.Errorf("a page of %s: its list metadata: %w", kind.resource, err)
			}
			return listMeta.Continue, nil
		}
		raw = raw[tagLen+valueLen:]
	}
	return "", nil // a malformed page: decoding it says where
}

// protobufPrefix starts every protobuf body of the API server
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00}

// decodePage decodes a protobuf LIST body: the prefix, then a
// runtime.Unknown (typeMeta = 1, raw = 2, contentEncoding = 3) whose raw
// is the list (metadata = 1, items = 2, as every *List of k8s.io/api).
// Every string and byte field is copied out of data as it is decoded, so
// data may be reused once this returns.
func decodePage(data []byte, kind *protoKind, add func(client.Object)) (page, error) {
	var decoder itemDecoder
	return decoder.page(data, kind, add)
}

// page is decodePage with what d shares between items (and pages).
func (d *itemDecoder) page(data []byte, kind *protoKind, add func(client.Object)) (page, error) {
	raw, err := unwrapUnknown(data, kind.listKind)
	if err != nil {
		return page{}, fmt.Errorf("a page of %s: %w", kind.resource, err)
	}
	var out page
	err = eachField(raw, func(num protowire.Number, field []byte) error {
		switch num {
		case 1:
			var listMeta metav1.ListMeta
			if err := listMeta.Unmarshal(field); err != nil {
				return err
			}
			out.cont, out.rvOfPage = listMeta.Continue, listMeta.ResourceVersion
		case 2:
			item, err := d.decode(kind, field)
			if err != nil {
				return fmt.Errorf("item %d%s: %w", out.count, describeItem(kind, field), err)
			}
			out.count++
			add(item.object)
			d.remember(item)
		}
		return nil
	})
	if err != nil {
		return page{}, fmt.Errorf("a page of %s: %w", kind.resource, err)
	}
	return out, nil
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

// unwrapUnknown checks the prefix and the envelope's kind and returns its raw.
func unwrapUnknown(data []byte, wantKind string) ([]byte, error) {
	body, ok := bytes.CutPrefix(data, protobufPrefix)
	if !ok {
		return nil, errors.New("the body is not the API server's protobuf (no k8s prefix)")
	}
	var typeMeta runtime.TypeMeta
	var raw []byte
	encoding := ""
	err := eachField(body, func(num protowire.Number, field []byte) error {
		switch num {
		case 1:
			return typeMeta.Unmarshal(field)
		case 2:
			raw = field
		case 3:
			encoding = string(field)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case typeMeta.Kind != wantKind:
		return nil, fmt.Errorf("the body holds a %q, not a %s", typeMeta.Kind, wantKind)
	case encoding != "":
		return nil, fmt.Errorf("the body's content encoding %q is not supported", encoding)
	}
	return raw, nil
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
