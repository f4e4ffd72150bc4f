// Command scaledump writes a cluster at AKS's limits (5,000 Standard_D16as_v5
// nodes with their NodeClaims, 150,000 bound pods and 2,000 pending, shaped
// as the API server returns them) as `kubectl get -o json` and `-o yaml`
// Lists, for measuring `karpfunc plan` at scale:
//
//	go run ./hack/scaledump -o /tmp/scale
//	/usr/bin/time -v bin/karpfunc plan -f /tmp/scale/dump.json
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

func main() {
	dir := flag.String("o", ".", "directory to write dump.json and dump.yaml into")
	size := scaletest.AKSLimits
	flag.IntVar(&size.Nodes, "nodes", size.Nodes, "nodes (each with its NodeClaim)")
	flag.IntVar(&size.BoundPods, "bound", size.BoundPods, "pods bound to the nodes")
	flag.IntVar(&size.PendingPods, "pending", size.PendingPods, "pending pods")
	flag.Parse()
	if err := write(*dir, size); err != nil {
		fmt.Fprintln(os.Stderr, "scaledump:", err)
		os.Exit(1)
	}
}

func write(dir string, size scaletest.Size) error {
	cluster := scaletest.Generate(size)
	for name, writeList := range map[string]func(*os.File) error{
		"dump.json": func(f *os.File) error { return cluster.WriteJSONList(f) },
		"dump.yaml": func(f *os.File) error { return cluster.WriteYAMLList(f) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := writeList(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
