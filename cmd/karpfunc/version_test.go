package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionPrintsCommit builds karpfunc with `go build` from a git
// repository holding the sources it is made of, as a user's clone does, and
// checks that `version` and `--version` print that repository's commit,
// marked modified once the work tree has changes. The sources are copied
// into a fresh repository because the go command stamps VCS information
// only where .git is a directory (not in a git worktree).
func TestVersionPrintsCommit(t *testing.T) {
	repo := t.TempDir()
	copySources(t, repo)
	git(t, repo, "init", "-q")
	git(t, repo, "add", "-A")
	git(t, repo, "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "sources")
	commit := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))

	bin := buildKarpfunc(t, repo)
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("karpfunc %s: %v\n%s", arg, err, out)
		}
		if !strings.Contains(string(out), "commit:      "+commit+"\n") {
			t.Errorf("karpfunc %s printed\n%s\nwant the line \"commit:      %s\" (not modified)", arg, out, commit)
		}
		for _, field := range []string{"module:      github.com/karpfunc/karpfunc", "commit date: 20", "go:          go1."} {
			if !strings.Contains(string(out), field) {
				t.Errorf("karpfunc %s printed\n%s\nwant %q", arg, out, field)
			}
		}
	}

	if err := os.WriteFile(filepath.Join(repo, "uncommitted.txt"), []byte("change"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(buildKarpfunc(t, repo), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("karpfunc version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit:      "+commit+" (modified)\n") {
		t.Errorf("built from a work tree with changes, karpfunc version printed\n%s\nwant %s marked (modified)", out, commit)
	}

	// Flags and arguments it does not know stay errors, with what to do.
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--bogus"}, 2, `unknown command "--bogus"`},
		{[]string{"-v"}, 2, `unknown command "-v"`},
		{[]string{"version", "--short"}, 1, `version: unexpected argument "--short"; version takes none`},
	} {
		cmd := exec.Command(bin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("karpfunc %s: %v, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), err, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// copySources copies into dir go.mod, go.sum and the Go and embedded files
// of every package of this module that cmd/karpfunc is built from.
func copySources(t *testing.T, dir string) {
	t.Helper()
	root := strings.TrimSpace(goCommand(t, ".", "list", "-m", "-f", "{{.Dir}}"))
	files := []string{"go.mod", "go.sum"}
	listing := goCommand(t, root, "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/karpfunc")
	for _, file := range strings.Fields(listing) {
		rel, err := filepath.Rel(root, file)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rel)
	}
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// buildKarpfunc runs `go build` in repo with VCS stamping on (the
// environment may turn it off through GOFLAGS; the flag wins).
func buildKarpfunc(t *testing.T, repo string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "karpfunc")
	goCommand(t, repo, "build", "-buildvcs=true", "-o", bin, "./cmd/karpfunc")
	return bin
}

func goCommand(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, "go", args...)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, "git", args...)
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
