package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// elfHead is the start of a Linux amd64 executable.
var elfHead = []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0x3e, 0}

// peHead is a minimal PE image head: "MZ", e_lfanew = 0x40, "PE\0\0".
func peHead() []byte {
	b := make([]byte, 0x80)
	copy(b, "MZ")
	b[0x3c] = 0x40
	copy(b[0x40:], "PE\x00\x00")
	return b
}

// repoFile is one file a test repository holds.
type repoFile struct {
	path       string
	content    []byte
	executable bool
}

// clean is a repository every rule accepts: scripts with the executable
// bit, a large fixture under testdata/, the catalog's data, a text file
// starting "MZ", documents whose links all resolve.
var clean = []repoFile{
	{path: ".ci/run", content: []byte("#!/usr/bin/env bash\nexit 0\n"), executable: true},
	{path: "hack/tools.sh", content: []byte("#!/bin/sh\n"), executable: true},
	{path: "pkg/x/testdata/big.json", content: bytes.Repeat([]byte("{}"), MaxFileSize)},
	{path: "pkg/catalog/data/catalog.json.gz", content: bytes.Repeat([]byte{0x1f}, MaxFileSize+1)},
	{path: "notes.txt", content: []byte("MZ is how this note starts, and it is not a program.\n")},
	{path: "go.mod", content: []byte("module example\n")},
	{path: "README.md", content: []byte("# Example\n\n## Two commands\n\nSee [deploy](docs/deploy.md#steps-to-take), [the code](pkg/x), " +
		"[home](https://example.com), [mail](mailto:a@b.c), [here](#two-commands), [mod](/go.mod).\n\n" +
		"```sh\ncat [x](missing.md)\n```\n\nInline `[y](missing.md)` is code.\n\n[ref]: docs/deploy.md\n")},
	{path: "docs/deploy.md", content: []byte("# Deploy\n\n## Steps to take\n\nBack to the [README](../README.md#example) and [`plan`](plan.md).\n")},
	{path: "docs/plan.md", content: []byte("# Plan: offline (`karpfunc plan`)\n\n## Plan: offline (`karpfunc plan`)\n\n[again](#plan-offline-karpfunc-plan-1)\n")},
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		add   []repoFile
		wants []string // each a substring of one problem, in order
	}{
		{name: "clean repository"},
		{name: "ELF executable at the root", add: []repoFile{{path: "image", content: elfHead, executable: true}},
			wants: []string{"image: is a compiled ELF executable"}},
		{name: "ELF executable without the executable bit", add: []repoFile{{path: "bin/handler", content: elfHead}},
			wants: []string{"bin/handler: is a compiled ELF executable"}},
		{name: "Mach-O executable", add: []repoFile{{path: "karpfunc", content: []byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1}}},
			wants: []string{"karpfunc: is a compiled Mach-O executable"}},
		{name: "PE executable", add: []repoFile{{path: "karpfunc.exe", content: peHead()}},
			wants: []string{"karpfunc.exe: is a compiled PE (Windows) executable"}},
		{name: "executable bit on a file that is no script", add: []repoFile{{path: "hack/notes.txt", content: []byte("echo hi\n"), executable: true}},
			wants: []string{"hack/notes.txt: has the executable bit but is not a script"}},
		{name: "large file outside testdata", add: []repoFile{{path: "pkg/x/dump.json", content: bytes.Repeat([]byte("a"), MaxFileSize+1)}},
			wants: []string{"pkg/x/dump.json: is 1048577 bytes, over the 1048576-byte limit"}},
		{name: "large executable: both rules", add: []repoFile{{path: "relay-bin", content: append(slices.Clone(elfHead), bytes.Repeat([]byte{0}, MaxFileSize)...)}},
			wants: []string{"relay-bin: is a compiled ELF executable", "relay-bin: is 1048596 bytes"}},
		{name: "README over the line limit", add: []repoFile{{path: "README.md", content: readme(MaxReadmeLines + 1)}},
			wants: []string{"README.md: is 301 lines, over 300"}},
		{name: "README at the line limit", add: []repoFile{{path: "README.md", content: readme(MaxReadmeLines)}}},
		{name: "link to a missing file", add: []repoFile{{path: "docs/faults.md", content: []byte("# Faults\n\nSee\n[nodes](nodes.md).\n")}},
			wants: []string{`docs/faults.md:4: link "nodes.md" names docs/nodes.md, which the repository does not track`}},
		{name: "link to a missing heading", add: []repoFile{{path: "CONTRIBUTING.md", content: []byte("[steps](docs/deploy.md#steps)\n")}},
			wants: []string{`CONTRIBUTING.md:1: link "docs/deploy.md#steps" names #steps, which is no heading of docs/deploy.md`}},
		{name: "link to a missing heading of the same file", add: []repoFile{{path: "docs/operate.md", content: []byte("# Operate\n\n[m](#metrics)\n")}},
			wants: []string{`docs/operate.md:3: link "#metrics" names #metrics`}},
		{name: "link out of the repository", add: []repoFile{{path: "docs/design.md", content: []byte("[d](../../shared/DESIGN.md)\n")}},
			wants: []string{`docs/design.md:1: link "../../shared/DESIGN.md" leaves the repository`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := gitRepo(t, append(slices.Clone(clean), tt.add...))
			problems, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if len(got) != len(tt.wants) {
				t.Fatalf("problems:\n  %s\nwant %d matching %q", strings.Join(got, "\n  "), len(tt.wants), tt.wants)
			}
			for i, want := range tt.wants {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}

// TestCheckReadsTheIndex checks a staged file counts and an untracked one
// does not: build outputs lying in the work tree are .gitignore's business.
func TestCheckReadsTheIndex(t *testing.T) {
	dir := gitRepo(t, clean)
	if err := os.WriteFile(filepath.Join(dir, "handler"), elfHead, 0o755); err != nil {
		t.Fatal(err)
	}
	if problems, err := Check(dir); err != nil || len(problems) != 0 {
		t.Fatalf("untracked executable: Check = %v, %v; want no problem", problems, err)
	}
	run(t, dir, "git", "add", "handler")
	problems, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Path != "handler" {
		t.Fatalf("staged executable: Check = %v, want one problem on handler", problems)
	}
}

func TestCheckOutsideARepository(t *testing.T) {
	if _, err := Check(t.TempDir()); err == nil {
		t.Fatal("Check of a directory that is no git repository returned no error")
	}
}

// TestRepository runs the check on this repository: no executable, no large
// file, every document's links resolve.
func TestRepository(t *testing.T) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git work tree: %v", err)
	}
	problems, err := Check(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestSlugify(t *testing.T) {
	tests := map[string]string{
		"Burst: 1,000 pods (`make bench-burst`)":     "burst-1000-pods-make-bench-burst",
		"The cold pass: where its time goes":         "the-cold-pass-where-its-time-goes",
		"What `make demo` shows":                     "what-make-demo-shows",
		"Compatibility with [Karpenter](x.md) & NAP": "compatibility-with-karpenter--nap",
		"snake_case and UPPER":                       "snake_case-and-upper",
	}
	for heading, want := range tests {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
}

// readme is a README.md of n lines whose heading the clean repository's
// documents link to.
func readme(n int) []byte {
	return append([]byte("# Example\n"), bytes.Repeat([]byte("line\n"), n-1)...)
}

// gitRepo makes a git repository holding files, all staged.
func gitRepo(t *testing.T, files []repoFile) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q")
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if f.executable {
			mode = 0o755
		}
		if err := os.WriteFile(p, f.content, mode); err != nil {
			t.Fatal(err)
		}
		run(t, dir, "git", "add", "--", f.path)
		if f.executable {
			run(t, dir, "git", "update-index", "--chmod=+x", "--", f.path)
		}
	}
	return dir
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
