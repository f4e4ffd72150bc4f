package tools

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestRepoRoot(t *testing.T) {
	ours := t.TempDir()
	write(t, filepath.Join(ours, "go.mod"), "// comment\nmodule github.com/karpfunc/karpfunc\n\ngo 1.26\n", 0o644)
	write(t, filepath.Join(ours, "a", "b", "keep"), "", 0o644)
	// A nested module of another name must be walked past, not stopped at.
	write(t, filepath.Join(ours, "tools", "x", "go.mod"), "module example.com/tools\n", 0o644)
	other := t.TempDir()
	write(t, filepath.Join(other, "go.mod"), "module github.com/karpfunc/karpfunc-fork\n", 0o644)

	for _, tc := range []struct {
		name, wd, want, wantErr string
	}{
		{name: "at the root", wd: ours, want: ours},
		{name: "nested directory", wd: filepath.Join(ours, "a", "b"), want: ours},
		{name: "past a nested module", wd: filepath.Join(ours, "tools", "x"), want: ours},
		{name: "another module", wd: other, wantErr: "no go.mod with module github.com/karpfunc/karpfunc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.wd)
			got, err := RepoRoot()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("RepoRoot() = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("RepoRoot() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRepoRootFromThisPackage(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "tools.sh")); err != nil {
		t.Fatalf("RepoRoot() = %s, which has no hack/tools.sh: %v", root, err)
	}
}

func TestEnsureBinaries(t *testing.T) {
	const fakeBinary = "#!/bin/sh\nexit 0\n"
	for _, tc := range []struct {
		name    string
		present []string // binaries already in bin/
		script  string   // hack/tools.sh; "" = none
		wantErr string
		wantLog string
	}{
		{name: "all present, nothing built", present: Binaries},
		{name: "missing and no script", present: Binaries[:4], wantErr: "kwok missing from"},
		{
			name: "missing, script builds it", present: Binaries[:4],
			script:  "#!/usr/bin/env bash\nprintf '#!/bin/sh\\n' > bin/kwok && chmod +x bin/kwok && echo built kwok >&2\n",
			wantLog: "building the local control plane from source",
		},
		{
			name: "script fails", present: Binaries[1:],
			script: "#!/usr/bin/env bash\necho boom >&2; exit 3\n", wantErr: "exit status 3",
		},
		{
			name: "script succeeds without building", present: Binaries[1:],
			script: "#!/usr/bin/env bash\nexit 0\n", wantErr: "etcd still missing",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.present {
				write(t, filepath.Join(root, "bin", b), fakeBinary, 0o755)
			}
			if tc.script != "" {
				write(t, filepath.Join(root, "hack", "tools.sh"), tc.script, 0o755)
			}
			var log bytes.Buffer
			got, err := EnsureBinaries(context.Background(), root, &log)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("EnsureBinaries() = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != filepath.Join(root, "bin") {
				t.Fatalf("EnsureBinaries() = %q, %v; want %s", got, err, filepath.Join(root, "bin"))
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Fatalf("log %q does not contain %q", log.String(), tc.wantLog)
			}
			if tc.wantLog == "" && log.Len() != 0 {
				t.Fatalf("nothing to build, yet log = %q", log.String())
			}
		})
	}
}
