package plan

import (
	"bytes"
	"encoding/json"
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
