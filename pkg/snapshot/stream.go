package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// A protobuf LIST body is the prefix, then a runtime.Unknown whose fields
// are its typeMeta, its raw (the list) and its content encoding; the list's
// fields are its metadata and its items, as in every *List of k8s.io/api
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf, generated.proto).
const (
	unknownTypeMetaField        = 1
	unknownRawField             = 2
	unknownContentEncodingField = 3
	listMetaField               = 1
	listItemsField              = 2
)

// itemSink takes a list's items as readList reads them.
type itemSink interface {
	// room is where the next item, n bytes long, is read to; false stops
	// the read.
	room(n int) ([]byte, bool)
	// item is called with room's bytes once they are read.
	item(value []byte) error
}

// errStopped is a read its sink stopped.
var errStopped = errors.New("the read was stopped")

// readList reads a protobuf LIST body from r as it arrives, handing each
// item to sink, and returns the list's metadata. A body that is not a list
// of listKind, or ends early, is an error saying where.
func readList(r io.Reader, listKind string, sink itemSink) (metav1.ListMeta, error) {
	in := &protoStream{r: bufio.NewReaderSize(r, 64<<10)}
	prefix := make([]byte, len(protobufPrefix))
	if _, err := io.ReadFull(in.r, prefix); err != nil || !bytes.Equal(prefix, protobufPrefix) {
		return metav1.ListMeta{}, errors.New("the body is not the API server's protobuf (no k8s prefix)")
	}
	var meta metav1.ListMeta
	kindSeen, listSeen := false, false
	for {
		num, typ, err := in.tag()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return meta, err
		}
		switch {
		case typ != protowire.BytesType:
			err = in.skip(num, typ)
		case num == unknownTypeMetaField:
			err = in.typeMeta(listKind)
			kindSeen = err == nil
		case num == unknownRawField && !kindSeen:
			err = errors.New("the list comes before its kind")
		case num == unknownRawField:
			meta, err = in.list(sink)
			listSeen = err == nil
		case num == unknownContentEncodingField:
			err = in.contentEncoding()
		default:
			err = in.skip(num, typ)
		}
		if err != nil {
			return meta, err
		}
	}
	if !listSeen {
		return meta, fmt.Errorf("malformed protobuf: the body holds no %s", listKind)
	}
	return meta, nil
}

// protoStream reads protobuf fields from a stream, counting the bytes
// read so that a nested message's end is known.
type protoStream struct {
	r      *bufio.Reader
	offset int64
}

func (s *protoStream) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	if err == nil {
		s.offset++
	}
	return b, err
}

// varint reads a varint; a stream that ends inside one is malformed.
func (s *protoStream) varint() (uint64, error) {
	start := s.offset
	v, err := binary.ReadUvarint(s)
	if errors.Is(err, io.EOF) && s.offset > start {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("malformed protobuf at byte %d: %w", start, err)
	}
	return v, err
}

// tag reads a field's tag; io.EOF at a field's start is the clean end.
func (s *protoStream) tag() (protowire.Number, protowire.Type, error) {
	start := s.offset
	v, err := s.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, fmt.Errorf("malformed protobuf at byte %d: field number %d", start, num)
	}
	return num, typ, nil
}

// length reads a length-delimited field's length, at most limit.
func (s *protoStream) length(limit int64) (int64, error) {
	start := s.offset
	n, err := s.varint()
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("malformed protobuf at byte %d: %w", start, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return 0, err
	}
	if n > uint64(limit) {
		return 0, fmt.Errorf("malformed protobuf at byte %d: a field of %d bytes, over the %d it may have", start, n, limit)
	}
	return int64(n), nil
}

// fill reads len(buf) bytes.
func (s *protoStream) fill(buf []byte) error {
	n, err := io.ReadFull(s.r, buf)
	s.offset += int64(n)
	if err != nil {
		return fmt.Errorf("malformed protobuf at byte %d: %w", s.offset, io.ErrUnexpectedEOF)
	}
	return nil
}

// bytesField reads a length-delimited field's value (of at most
// maxItemBytes) into a new slice.
func (s *protoStream) bytesField() ([]byte, error) {
	n, err := s.length(maxItemBytes)
	if err != nil {
		return nil, err
	}
	value := make([]byte, n)
	return value, s.fill(value)
}

// skip reads past a field of a type this reader does not need.
func (s *protoStream) skip(num protowire.Number, typ protowire.Type) error {
	var n int64
	switch typ {
	case protowire.VarintType:
		_, err := s.varint()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		length, err := s.length(1 << 40)
		if err != nil {
			return err
		}
		n = length
	default:
		return fmt.Errorf("malformed protobuf at byte %d: field %d has wire type %d", s.offset, num, typ)
	}
	discarded, err := s.r.Discard(int(n))
	s.offset += int64(discarded)
	if err != nil {
		return fmt.Errorf("malformed protobuf at byte %d: %w", s.offset, io.ErrUnexpectedEOF)
	}
	return nil
}

// typeMeta reads the envelope's kind and checks it is listKind.
func (s *protoStream) typeMeta(listKind string) error {
	raw, err := s.bytesField()
	if err != nil {
		return err
	}
	var typeMeta runtime.TypeMeta
	if err := typeMeta.Unmarshal(raw); err != nil {
		return fmt.Errorf("malformed protobuf: the envelope's kind: %w", err)
	}
	if typeMeta.Kind != listKind {
		return fmt.Errorf("the body holds a %q, not a %s", typeMeta.Kind, listKind)
	}
	return nil
}

// contentEncoding refuses any: the API server sends none.
func (s *protoStream) contentEncoding() error {
	raw, err := s.bytesField()
	if err != nil {
		return err
	}
	if len(raw) > 0 {
		return fmt.Errorf("the body's content encoding %q is not supported", raw)
	}
	return nil
}

// list reads the list message: its metadata, and its items into sink.
func (s *protoStream) list(sink itemSink) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	size, err := s.length(1 << 40)
	if err != nil {
		return meta, err
	}
	end := s.offset + size
	for s.offset < end {
		num, typ, err := s.tag()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("malformed protobuf at byte %d: %w", s.offset, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return meta, err
		}
		switch {
		case num == listItemsField && typ == protowire.BytesType:
			err = s.item(sink)
		case num == listMetaField && typ == protowire.BytesType:
			err = s.listMeta(&meta)
		default:
			err = s.skip(num, typ)
		}
		if err != nil {
			return meta, err
		}
	}
	if s.offset != end {
		return meta, fmt.Errorf("malformed protobuf at byte %d: the list's last field runs past its end (byte %d)", s.offset, end)
	}
	return meta, nil
}

func (s *protoStream) listMeta(meta *metav1.ListMeta) error {
	raw, err := s.bytesField()
	if err != nil {
		return err
	}
	if err := meta.Unmarshal(raw); err != nil {
		return fmt.Errorf("malformed protobuf: the list's metadata: %w", err)
	}
	return nil
}

// item reads one item into the room sink gives it, then hands it over.
func (s *protoStream) item(sink itemSink) error {
	n, err := s.length(maxItemBytes)
	if err != nil {
		return err
	}
	room, ok := sink.room(int(n))
	if !ok {
		return errStopped
	}
	if err := s.fill(room); err != nil {
		return err
	}
	return sink.item(room)
}
