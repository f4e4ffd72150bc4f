package yamljson

import (
	"bytes"
	"testing"
)

// TestPrintableASCII: any one byte, at any place in a word or after it,
// is judged as the byte-at-a-time check judges it.
func TestPrintableASCII(t *testing.T) {
	for value := range 256 {
		for at := range 19 {
			y := bytes.Repeat([]byte("a\nb c"), 4)[:19]
			y[at] = byte(value)
			if got, want := printableASCII(y), printableBytes(y); got != want {
				t.Errorf("byte %#x at %d: printableASCII = %v, want %v", value, at, got, want)
			}
		}
	}
}
