package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

// TestPlanInputLimit: a dump larger than the limit is refused before it is
// read, with its size and the limit, not read until memory runs out.
func TestPlanInputLimit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dump.yaml")
	if err := os.WriteFile(file, []byte(plantest.NodePool()+plantest.Node("n1", "28Gi", plantest.Pod{CPU: "1", Memory: "1Gi"})), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runPlanTo(&strings.Builder{}, []string{"-f", file, "--max-input", "100"})
	var sizeErr *plan.SizeError
	if !errors.As(err, &sizeErr) {
		t.Fatalf("err = %v, want a SizeError", err)
	}
	for _, want := range []string{"dump.yaml is", "more than the 0.0 MiB", "--max-input"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := runPlanTo(&strings.Builder{}, []string{"-f", file, "--max-input", "1000000"}); err != nil {
		t.Fatalf("a dump within the limit: %v", err)
	}
}
