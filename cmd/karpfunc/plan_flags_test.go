package main

import (
	"io"
	"strings"
	"testing"
)

func TestPlanRebalanceNeedsDisruption(t *testing.T) {
	err := runPlanTo(io.Discard, []string{"-f", "-", "--rebalance"})
	if err == nil || !strings.Contains(err.Error(), "--rebalance applies to --disruption only") {
		t.Fatalf("err = %v, want --rebalance refused without --disruption", err)
	}
}
