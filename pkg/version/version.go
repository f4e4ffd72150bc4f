// Package version says which build of karpfunc is running: the module
// version, the VCS commit (and whether the work tree had changes), the
// commit's time and the Go version, all read from the build information
// the Go toolchain embeds in every binary (runtime/debug.ReadBuildInfo).
//
// Invariants:
//   - Nothing is set by linker flags: a binary built with plain `go build`
//     or `go install` from a git checkout reports its commit.
//   - A field the build did not record is "unknown", never empty, so a bug
//     report always carries every field.
package version

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Unknown stands for a field the build did not record: a binary built
// outside a VCS checkout or with -buildvcs=false has no commit.
const Unknown = "unknown"

// Info is what a build records about itself.
type Info struct {
	// Module is the main module's path, e.g. github.com/karpfunc/karpfunc.
	Module string
	// Version is the main module's version: a tag or pseudo-version for
	// `go install module@version`, "(devel)" for a build in a checkout.
	Version string
	// Commit is the VCS revision (vcs.revision).
	Commit string
	// Modified is true when the work tree had uncommitted changes
	// (vcs.modified).
	Modified bool
	// Date is the commit's time, RFC 3339 (vcs.time).
	Date string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get is the running binary's Info.
func Get() Info {
	build, ok := debug.ReadBuildInfo()
	if !ok {
		return FromBuildInfo(nil)
	}
	return FromBuildInfo(build)
}

// FromBuildInfo is the Info of build; nil (a binary built without module
// support) gives every field Unknown.
func FromBuildInfo(build *debug.BuildInfo) Info {
	info := Info{Module: Unknown, Version: Unknown, Commit: Unknown, Date: Unknown, GoVersion: Unknown}
	if build == nil {
		return info
	}
	info.Module = orUnknown(build.Main.Path)
	info.Version = orUnknown(build.Main.Version)
	info.GoVersion = orUnknown(build.GoVersion)
	for _, setting := range build.Settings {
		switch setting.Key {
		case "vcs.revision":
			info.Commit = orUnknown(setting.Value)
		case "vcs.time":
			info.Date = orUnknown(setting.Value)
		case "vcs.modified":
			info.Modified = setting.Value == "true"
		}
	}
	return info
}

func orUnknown(s string) string {
	if s == "" {
		return Unknown
	}
	return s
}

// CommitText is the commit, with " (modified)" when the work tree had
// uncommitted changes.
func (i Info) CommitText() string {
	if i.Modified {
		return i.Commit + " (modified)"
	}
	return i.Commit
}

// String is the one-line form, e.g. "github.com/karpfunc/karpfunc (devel),
// commit 0123abc (modified), commit date 2026-12-04T23:00:00Z, go1.26.6".
func (i Info) String() string {
	return fmt.Sprintf("%s %s, commit %s, commit date %s, %s", i.Module, i.Version, i.CommitText(), i.Date, i.GoVersion)
}

// Text is the form `karpfunc version` prints: one field a line.
func (i Info) Text() string {
	return fmt.Sprintf("module:      %s\nversion:     %s\ncommit:      %s\ncommit date: %s\ngo:          %s\n",
		i.Module, i.Version, i.CommitText(), i.Date, i.GoVersion)
}

// LogAttrs are the fields of a structured log line: what a command logs
// once at start.
func (i Info) LogAttrs() []any {
	return []any{
		slog.String("module", i.Module), slog.String("version", i.Version), slog.String("commit", i.Commit),
		slog.Bool("modified", i.Modified), slog.String("commitDate", i.Date), slog.String("goVersion", i.GoVersion),
	}
}
