package plan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// jsonScanner splits a JSON stream into values without decoding them:
// one pass over the bytes that tracks only strings and nesting, much
// faster than encoding/json's Decoder, which scans each value two or three
// times. It does not validate a value's inside: the workers decode every
// value with encoding/json, which does. It holds in memory only the value
// being read and what was read past it.
type jsonScanner struct {
	src io.Reader
	buf []byte
	// pos is the next unread byte in buf; offset is the stream offset of
	// buf[0].
	pos    int
	offset int64
	eof    bool
	err    error
}

// scanChunk is how much is read at a time.
const scanChunk = 1 << 20

// errTruncated: the stream ended inside a value.
var errTruncated = errors.New("unexpected end of input")

// errEndOfStream: no more values (io.EOF at a value's start).
var errEndOfStream = io.EOF

func newJSONScanner(src io.Reader) *jsonScanner {
	return &jsonScanner{src: src, buf: make([]byte, 0, scanChunk)}
}

// at is the stream offset of buf[index].
func (s *jsonScanner) at(index int) int64 { return s.offset + int64(index) }

// fill reads more input, keeping buf[keep:]; it returns how far buf was
// shifted left (indexes into buf above keep move down by it). It reports
// false at the end of input or on a read error (s.err).
func (s *jsonScanner) fill(keep int) (int, bool) {
	if s.eof {
		return 0, false
	}
	shift := 0
	if keep > 0 && keep >= len(s.buf)/2 {
		shift = keep
		s.offset += int64(keep)
		s.buf = append(s.buf[:0], s.buf[keep:]...)
		s.pos -= keep
	}
	if cap(s.buf)-len(s.buf) < scanChunk/2 {
		grown := make([]byte, len(s.buf), 2*cap(s.buf)+scanChunk)
		copy(grown, s.buf)
		s.buf = grown
	}
	read, err := s.src.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+read]
	if err != nil {
		s.eof = true
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
	}
	return shift, read > 0 || !s.eof
}

// peek skips white space and returns the next byte without consuming it;
// errEndOfStream at the end of input.
func (s *jsonScanner) peek() (byte, error) {
	for {
		for ; s.pos < len(s.buf); s.pos++ {
			switch s.buf[s.pos] {
			case ' ', '\t', '\r', '\n':
			default:
				return s.buf[s.pos], nil
			}
		}
		if _, more := s.fill(s.pos); !more {
			if s.err != nil {
				return 0, s.err
			}
			return 0, errEndOfStream
		}
	}
}

// expect consumes the next byte, which must be want.
func (s *jsonScanner) expect(want byte) error {
	got, err := s.peek()
	if err != nil {
		return s.truncated(err)
	}
	if got != want {
		return fmt.Errorf("found %q at byte %d where %q should be", got, s.at(s.pos), want)
	}
	s.pos++
	return nil
}

// truncated turns the end of input inside a value into errTruncated.
func (s *jsonScanner) truncated(err error) error {
	if errors.Is(err, errEndOfStream) {
		return fmt.Errorf("%w at byte %d", errTruncated, s.at(s.pos))
	}
	return err
}

// value consumes the next value and returns its bytes, valid until the
// next call, and its stream offset. A string, object or array ends where
// its brackets balance; any other value at the first delimiter.
func (s *jsonScanner) value() ([]byte, int64, error) {
	if _, err := s.peek(); err != nil {
		return nil, 0, err
	}
	start := s.pos
	startOffset := s.at(start)
	scalar := s.buf[start] != '{' && s.buf[start] != '[' && s.buf[start] != '"'
	var state scanState
	for i := start; ; {
		if i == len(s.buf) {
			shift, more := s.fill(start)
			start, i = start-shift, i-shift
			if !more {
				s.pos = i
				if scalar && s.err == nil {
					return s.buf[start:i], startOffset, nil
				}
				return nil, startOffset, s.truncated(errEndOfStream)
			}
		}
		if scalar {
			if isDelimiter(s.buf[i]) {
				s.pos = i
				return s.buf[start:i], startOffset, nil
			}
			i++
			continue
		}
		next, done := state.run(s.buf, start, i)
		if done {
			s.pos = next
			return s.buf[start:next], startOffset, nil
		}
		i = next
	}
}

// run steps through buf[i:], part of the value that starts at start,
// and returns the index after the value's end and true, or len(buf) and
// false when the value goes on. Strings are crossed with bytes.IndexByte
// and the bytes between tokens by a table, not byte by byte through step.
func (st *scanState) run(buf []byte, start, i int) (int, bool) {
	for i < len(buf) {
		if st.inString {
			end := stringEnd(buf, start, i)
			if end < 0 {
				return len(buf), false
			}
			st.inString = false
			i = end + 1
			if st.depth == 0 {
				return i, true
			}
			continue
		}
		i = skipPlain(buf, i)
		if i < len(buf) {
			if st.step(buf[i]) {
				return i + 1, true
			}
			i++
		}
	}
	return len(buf), false
}

// skipPlain is the index of the first byte at or after i that changes
// scanState, or len(buf). Indented JSON is mostly runs of spaces: those are
// crossed eight bytes at a time.
func skipPlain(buf []byte, i int) int {
	for i < len(buf) && !structural[buf[i]] {
		i = skipSpaces(buf, i+1)
	}
	return i
}

// eightSpaces is eight ' ' bytes read as one word.
const eightSpaces = 0x2020202020202020

// skipSpaces is the index of the first byte at or after i that is not ' '.
func skipSpaces(buf []byte, i int) int {
	for i+8 <= len(buf) && binary.LittleEndian.Uint64(buf[i:]) == eightSpaces {
		i += 8
	}
	for i < len(buf) && buf[i] == ' ' {
		i++
	}
	return i
}

// structural marks the bytes that change scanState outside strings.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// stringEnd is the index of the quote that closes the string whose
// inside includes buf[i:] (it opened after start), or -1 if buf ends
// first. A quote is escaped when an odd run of backslashes precedes it.
func stringEnd(buf []byte, start, i int) int {
	for {
		quote := bytes.IndexByte(buf[i:], '"')
		if quote < 0 {
			return -1
		}
		at := i + quote
		backslashes := 0
		for back := at - 1; back > start && buf[back] == '\\'; back-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return at
		}
		i = at + 1
	}
}

// scanState tracks strings and nesting while a value is scanned.
type scanState struct {
	depth             int
	inString, escaped bool
}

// step takes the value's next byte; true when the value ends with it.
func (st *scanState) step(char byte) bool {
	switch {
	case st.inString:
		st.inString, st.escaped = !st.escaped && char != '"' || st.escaped, !st.escaped && char == '\\'
	case char == '"':
		st.inString = true
	case char == '{' || char == '[':
		st.depth++
	case char == '}' || char == ']':
		st.depth--
	}
	return st.depth == 0 && !st.inString
}

func isDelimiter(char byte) bool {
	switch char {
	case ' ', '\t', '\r', '\n', ',', ':', '{', '}', '[', ']', '"':
		return true
	}
	return false
}

// appendCompact appends js without the white space between its tokens,
// as json.Compact would, but without validating: decoding validates.
// Strings are copied whole; an unterminated one is copied to the end.
func appendCompact(dst, js []byte) []byte {
	for i := 0; i < len(js); {
		char := js[i]
		switch char {
		case ' ', '\t', '\r', '\n':
			i = skipSpaces(js, i+1)
		case '"':
			end := stringEnd(js, i, i+1)
			if end < 0 {
				return append(dst, js[i:]...)
			}
			dst = append(dst, js[i:end+1]...)
			i = end + 1
		default:
			run := i + 1
			for run < len(js) && !compactStop[js[run]] {
				run++
			}
			dst = append(dst, js[i:run]...)
			i = run
		}
	}
	return dst
}

// compactStop marks the bytes that end a run appendCompact copies as is.
var compactStop = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, '"': true}
