package version_test

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/version"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.6",
		Main:      debug.Module{Path: "github.com/karpfunc/karpfunc", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-04T23:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		name  string
		build *debug.BuildInfo
		want  version.Info
		lines []string
	}{
		{"stamped and modified", stamped,
			version.Info{Module: "github.com/karpfunc/karpfunc", Version: "v0.3.0", Commit: "0123456789abcdef0123456789abcdef01234567",
				Modified: true, Date: "2026-12-04T23:00:00Z", GoVersion: "go1.26.6"},
			[]string{"version:     v0.3.0", "commit:      0123456789abcdef0123456789abcdef01234567 (modified)", "commit date: 2026-12-04T23:00:00Z", "go:          go1.26.6"}},
		{"built without VCS information", &debug.BuildInfo{GoVersion: "go1.26.6", Main: debug.Module{Path: "github.com/karpfunc/karpfunc", Version: "(devel)"}},
			version.Info{Module: "github.com/karpfunc/karpfunc", Version: "(devel)", Commit: version.Unknown, Date: version.Unknown, GoVersion: "go1.26.6"},
			[]string{"commit:      unknown\n", "commit date: unknown"}},
		{"no build information", nil,
			version.Info{Module: version.Unknown, Version: version.Unknown, Commit: version.Unknown, Date: version.Unknown, GoVersion: version.Unknown},
			[]string{"module:      unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := version.FromBuildInfo(tc.build)
			if got != tc.want {
				t.Fatalf("FromBuildInfo = %+v, want %+v", got, tc.want)
			}
			for _, line := range tc.lines {
				if !strings.Contains(got.Text(), line) {
					t.Errorf("Text() =\n%s\nwant a line %q", got.Text(), line)
				}
			}
		})
	}
}

// TestLogAttrs: the start-up log line carries every field by name.
func TestLogAttrs(t *testing.T) {
	info := version.Info{Module: "m", Version: "v", Commit: "c", Modified: true, Date: "d", GoVersion: "g"}
	var keys []string
	for _, attr := range info.LogAttrs() {
		keys = append(keys, attr.(interface{ String() string }).String())
	}
	want := "module=m version=v commit=c modified=true commitDate=d goVersion=g"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("LogAttrs = %q, want %q", got, want)
	}
}
