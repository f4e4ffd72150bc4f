package funchost

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseTimeSpan(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "00:05:00", want: 5 * time.Minute},
		{in: "01:02:03", want: time.Hour + 2*time.Minute + 3*time.Second},
		{in: "1.00:00:00", want: 24 * time.Hour},
		{in: "00:00:01.5", want: 1500 * time.Millisecond},
		{in: "5m", wantErr: true},
		{in: "00:05", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseTimeSpan(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseTimeSpan(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestExpandSettings(t *testing.T) {
	settings := map[string]string{"Q": "provision", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := settings[k]; return v, ok }
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "%Q%", want: "provision"},
		{in: "pre-%Q%-%Q%", want: "pre-provision-provision"},
		{in: "plain", want: "plain"},
		{in: "%EMPTY%", want: ""},
		{in: "%MISSING%", wantErr: "app setting MISSING, which is not set"},
		{in: "%%", wantErr: `app setting "" (an empty "%%")`},
	}
	for _, tt := range tests {
		got, err := expandSettings(tt.in, lookup)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("expandSettings(%q) error = %v; want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("expandSettings(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestTruncateTail(t *testing.T) {
	short := "POST /X answered 500: boom"
	if got := truncateTail(short); got != short {
		t.Errorf("short description changed: %q", got)
	}
	long := "POST /X answered 500: " + strings.Repeat("é", 5000) + "error: the reason"
	got := truncateTail(long)
	if len(got) > maxDescription || !strings.HasPrefix(got, "POST /X answered 500: …") ||
		!strings.HasSuffix(got, "error: the reason") || !utf8.ValidString(got) {
		t.Errorf("truncateTail kept %d bytes: %q…%q", len(got), got[:40], got[len(got)-40:])
	}
}
