package linkguard

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shipped are the commands users run: the handler deployed to Azure
// Functions, the in-cluster relay and the user CLI.
var shipped = []string{"./functions", "./relay", "./cmd/karpfunc"}

// TestShippedBinariesLinkNoStandIns fails when `go list -deps` of a shipped
// command names a package under the module's top-level internal/.
func TestShippedBinariesLinkNoStandIns(t *testing.T) {
	root := moduleRoot(t)
	forbidden := modulePath(t, root) + "/internal/"
	for _, cmd := range shipped {
		t.Run(strings.TrimPrefix(cmd, "./"), func(t *testing.T) {
			if bad := standIns(t, root, cmd, forbidden); len(bad) > 0 {
				t.Errorf("%s links %d package(s) under %s, which holds stand-ins and test support only:\n  %s\n"+
					"move the production code they hold into pkg/ (see hack/linkguard/doc.go)",
					cmd, len(bad), forbidden, strings.Join(bad, "\n  "))
			}
		})
	}
}

// TestStandInsAreDetected checks the test can fail: the local loop
// (internal/localenv) must be reported as linking stand-ins.
func TestStandInsAreDetected(t *testing.T) {
	root := moduleRoot(t)
	forbidden := modulePath(t, root) + "/internal/"
	if bad := standIns(t, root, "./internal/localenv", forbidden); len(bad) == 0 {
		t.Fatalf("go list -deps ./internal/localenv names no package under %s; the guard would pass on anything", forbidden)
	}
}

// standIns are the packages cmd depends on (itself included) whose import
// path starts with forbidden.
func standIns(t *testing.T, root, cmd, forbidden string) []string {
	t.Helper()
	var bad []string
	for _, pkg := range goCmd(t, root, "list", "-deps", cmd) {
		if strings.HasPrefix(pkg, forbidden) {
			bad = append(bad, pkg)
		}
	}
	return bad
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod := goCmd(t, ".", "env", "GOMOD")
	if len(gomod) != 1 || gomod[0] == "" || gomod[0] == "/dev/null" {
		t.Fatalf("go env GOMOD = %q: not inside the module", gomod)
	}
	return filepath.Dir(gomod[0])
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	path := goCmd(t, root, "list", "-m")
	if len(path) != 1 {
		t.Fatalf("go list -m printed %q, want one module path", path)
	}
	return path[0]
}

// goCmd runs the go command in dir and returns its output's lines.
func goCmd(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			stderr = string(exitErr.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}
