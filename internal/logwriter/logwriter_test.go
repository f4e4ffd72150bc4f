package logwriter

import (
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	tests := []struct {
		name     string
		writes   []string
		flush    bool
		keep     int
		wantOut  string
		wantTail string
	}{
		{"lines split across writes", []string{"a\nb", "c\n", "d"}, false, 5, "p a\np bc\n", "  a\n  bc"},
		{"flush writes the unterminated line", []string{"a\nb"}, true, 5, "p a\np b\n", "  a\n  b"},
		{"tail keeps only the last lines", []string{"1\n2\n3\n4\n"}, false, 2, "p 1\np 2\np 3\np 4\n", "  3\n  4"},
		{"no output", nil, true, 3, "", "  (no output)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			w := NewLines(NewSynced(&out), "p ", tt.keep)
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if tt.flush {
				w.Flush()
			}
			if out.String() != tt.wantOut {
				t.Errorf("out %q; want %q", out.String(), tt.wantOut)
			}
			if got := w.Tail(); got != tt.wantTail {
				t.Errorf("tail %q; want %q", got, tt.wantTail)
			}
		})
	}
}

func TestLinesBoundsAnEndlessLine(t *testing.T) {
	var out strings.Builder
	w := NewLines(&out, "", 0)
	_, _ = w.Write([]byte(strings.Repeat("x", maxPartial+1)))
	if got := len(out.String()); got != maxPartial+2 {
		t.Errorf("wrote %d bytes; want the %d-byte partial line forced out with its newline", got, maxPartial+2)
	}
}
