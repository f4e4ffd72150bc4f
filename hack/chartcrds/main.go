// Command chartcrds writes the CRDs karpfunc needs (pkg/apis.CRDFiles: the
// sigs.k8s.io/karpenter module's NodePool and NodeClaim, our AKSNodeClass)
// into a Helm chart's crds/ directory, replacing what was there. `make
// generate` runs it; relay/chart's test fails when the copy is stale.
//
//	go run ./hack/chartcrds relay/chart/crds
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chartcrds <chart>/crds")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "chartcrds:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, file := range old {
		if err := os.Remove(file); err != nil {
			return err
		}
	}
	files := apis.CRDFiles()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
		fmt.Println(filepath.Join(dir, name))
	}
	return nil
}
