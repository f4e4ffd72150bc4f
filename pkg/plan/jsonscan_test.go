package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"
)

var compactCases = []string{
	`{ "a" : [ 1 , 2 ] }`, `"x"`, `{"a\"b": " \\ ", "c": "\\\\\" ]}"}`, "{\n    \"k\": \"v w\",\n    \"n\": null\n}",
	`[ "\\" , "\\\\" , " \" " ]`, `{"":""}`, `{ "a" : { "b" : [ { } , [ ] ] } }`, `{"a":"\\\\"}`, `{"\\\"":"}"}`,
}

// TestAppendCompact: the scanner's compaction writes what json.Compact
// writes, escaped quotes and backslashes included.
func TestAppendCompact(t *testing.T) {
	for _, in := range compactCases {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := appendCompact(nil, []byte(in)); string(got) != want.String() {
			t.Errorf("appendCompact(%s) = %s, want %s", in, got, want.String())
		}
	}
}

// TestScannerValues: the scanner ends each value where encoding/json
// does, read whole or a byte at a time (strings cut between reads).
func TestScannerValues(t *testing.T) {
	for _, in := range compactCases {
		for name, reader := range map[string]func() *jsonScanner{
			"whole":    func() *jsonScanner { return newJSONScanner(bytes.NewReader([]byte(in + " 7"))) },
			"one byte": func() *jsonScanner { return newJSONScanner(iotest.OneByteReader(bytes.NewReader([]byte(in + " 7")))) },
		} {
			scan := reader()
			raw, _, err := scan.value()
			if err != nil || string(raw) != in {
				t.Errorf("%s: value() = %q, %v; want %q", name, raw, err, in)
				continue
			}
			if next, _, err := scan.value(); err != nil || string(next) != "7" {
				t.Errorf("%s: after %s, value() = %q, %v; want the next value 7", name, in, next, err)
			}
		}
	}
}

// TestSkipPlain: runs of spaces of every length around the eight-byte
// steps end where the next byte that is not a space is, and skipPlain
// stops at the first structural byte only.
func TestSkipPlain(t *testing.T) {
	for spaces := range 20 {
		for _, tail := range []string{"", "x", "\n ", "\"", "}"} {
			buf := []byte(strings.Repeat(" ", spaces) + tail)
			if got := skipSpaces(buf, 0); got != spaces {
				t.Errorf("skipSpaces(%q) = %d, want %d", buf, got, spaces)
			}
			want := strings.IndexAny(string(buf), "\"{}[]")
			if want < 0 {
				want = len(buf)
			}
			if got := skipPlain(buf, 0); got != want {
				t.Errorf("skipPlain(%q) = %d, want %d", buf, got, want)
			}
		}
	}
}
