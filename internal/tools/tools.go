// Package tools finds the repository and makes sure the local control plane
// binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok) exist in its bin/ directory, building them from their Go modules with
// hack/tools.sh when they do not.
package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the module path RepoRoot looks for.
const Module = "github.com/karpfunc/karpfunc"

// Binaries are the programs hack/tools.sh builds into bin/.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// RepoRoot walks up from the working directory to the directory whose go.mod
// declares module github.com/karpfunc/karpfunc. Tests run with the package
// directory as working directory, so this is how they find bin/ and hack/.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for dir := wd; ; {
		mod, err := modulePath(filepath.Join(dir, "go.mod"))
		switch {
		case err == nil && mod == Module:
			return dir, nil
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod with module %s in %s or any parent directory", Module, wd)
		}
		dir = parent
	}
}

// modulePath reads the module line of a go.mod file.
func modulePath(goMod string) (string, error) {
	file, err := os.Open(goMod)
	if err != nil {
		return "", err
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", goMod, err)
	}
	return "", nil
}

// Missing lists the binaries absent from binDir (or present but not
// executable, which covers a dangling symlink into a wiped cache).
func Missing(binDir string) []string {
	var out []string
	for _, name := range Binaries {
		fi, err := os.Stat(filepath.Join(binDir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			out = append(out, name)
		}
	}
	return out
}

// EnsureBinaries returns repoRoot/bin after making sure every binary is
// there. When one is missing it runs hack/tools.sh, which compiles what is
// missing into a per-user cache and links it into bin/; its output goes to log
// (nil discards it). Cancelling ctx stops the build.
func EnsureBinaries(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	binDir := filepath.Join(repoRoot, "bin")
	missing := Missing(binDir)
	if len(missing) == 0 {
		return binDir, nil
	}
	script := filepath.Join(repoRoot, "hack", "tools.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("%s missing from %s and cannot build them: %w", strings.Join(missing, ", "), binDir, err)
	}
	fmt.Fprintf(log, "building the local control plane from source (first time only, ~10 min)… missing: %s\n", strings.Join(missing, ", "))
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = repoRoot
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running %s to build %s: %w", script, strings.Join(missing, ", "), err)
	}
	if still := Missing(binDir); len(still) > 0 {
		return "", fmt.Errorf("%s finished but %s still missing from %s", script, strings.Join(still, ", "), binDir)
	}
	return binDir, nil
}
