package funchost

import (
	"os"
	"path/filepath"
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

func TestFunctionTimeoutSetting(t *testing.T) {
	dir := t.TempDir()
	hostJSON := `{"version":"2.0","functionTimeout":"00:10:00","customHandler":{"description":{"defaultExecutablePath":"handler"}}}`
	if err := os.WriteFile(filepath.Join(dir, "host.json"), []byte(hostJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		setting string
		want    time.Duration
		wantErr string
	}{
		{setting: "", want: 10 * time.Minute},
		{setting: "00:00:15", want: 15 * time.Second},
		{setting: "-1", want: 0},
		{setting: "15s", wantErr: "app setting " + FunctionTimeoutSetting},
	}
	for _, tt := range tests {
		lookup := func(k string) (string, bool) {
			if k == FunctionTimeoutSetting && tt.setting != "" {
				return tt.setting, true
			}
			return "", false
		}
		s, err := loadHostJSON(dir, lookup)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("setting %q: error %v; want one naming %q", tt.setting, err, tt.wantErr)
			}
			continue
		}
		if err != nil || s.functionTimeout != tt.want {
			t.Errorf("setting %q: functionTimeout %v, %v; want %v", tt.setting, s.functionTimeout, err, tt.want)
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
