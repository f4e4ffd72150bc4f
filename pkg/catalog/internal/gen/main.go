// Command gen writes pkg/catalog's embedded data file; datagen.Build does the
// work (and says which SKUs are kept), so a test can run it in-process.
//
// Usage: go run ./internal/gen [-src dir] [-out file]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/datagen"
)

func main() {
	src := flag.String("src", "", "directory with azure-vm-skus.json, azure-vm-prices.json, azure-zones.json (default: <repo root>/../shared/data/azure-catalog)")
	out := flag.String("out", "data/catalog.json.gz", "output file")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	if src == "" {
		var err error
		if src, err = datagen.DefaultSource(); err != nil {
			return fmt.Errorf("%w (pass -src)", err)
		}
	}
	data, stats, err := datagen.Build(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("gen: wrote %s: %d SKUs, %d regions, %d bytes; dropped %v\n", out, stats.SKUs, stats.Regions, len(data), stats.Dropped)
	return nil
}
