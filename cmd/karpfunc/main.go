// Command karpfunc is the user CLI; it links no stand-in (the local loop of
// `make demo` is hack/demo):
//
//	karpfunc plan -f FILE ...     what would be launched for these objects (offline)
//	karpfunc catalog refresh ...  a catalog file from Azure's Retail Prices and Resource SKUs APIs
//	karpfunc version              the build: module version, commit, commit date, Go version
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpfunc/karpfunc/pkg/version"
)

func main() {
	// controller-runtime's clients log through logr; the CLI prints what it
	// has to say itself, so their logs go to slog's default (warnings up).
	ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "plan":
		err = runPlan(os.Args[2:])
	case "catalog":
		err = runCatalog(os.Args[2:])
	case "version", "--version":
		err = runVersion(os.Stdout, os.Args[2:])
	case "help", "-h", "--help":
		usage()
		return
	case "demo":
		fmt.Fprintln(os.Stderr, "karpfunc: the demo is a developer command now: make demo (go run ./hack/demo)")
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "karpfunc: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "karpfunc:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: karpfunc <command> [flags]

commands:
  plan   plan what karpfunc would launch for Kubernetes objects read from files
  catalog refresh  rebuild a catalog file from the Azure Retail Prices and Resource SKUs APIs
  version  print the build: module version, commit, commit date and Go version (also --version)
`)
}

// runVersion prints the running binary's build information; it takes no
// arguments.
func runVersion(stdout io.Writer, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("version: unexpected argument %q; version takes none", args[0])
	}
	_, err := io.WriteString(stdout, version.Get().Text())
	return err
}
