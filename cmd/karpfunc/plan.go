package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// fileList is a repeatable -f flag.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// runPlan is `karpfunc plan -f FILE [-f FILE ...] [--region REGION]
// [--catalog FILE] [-o json|table]`: it reads Kubernetes objects, solves,
// and prints what would be launched. It fails only when input cannot be
// read; pods that cannot be placed are part of the plan.
func runPlan(args []string) error { return runPlanTo(os.Stdout, args) }

// planFlags are the plan command's settings.
type planFlags struct {
	files       fileList
	region      string
	catalogFile string
	output      string
	disrupt     bool
	maxMoves    int
	spotToSpot  bool
	maxInput    int64
	rebalance   bool
}

// runPlanTo is runPlan printing the plan to stdout.
func runPlanTo(stdout io.Writer, args []string) error {
	opts, err := parsePlanFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if err := opts.validate(); err != nil {
		return err
	}

	// The embedded catalog loads while the input is read. The region may
	// come from the input's Nodes, known only after reading: the guess
	// loaded early is used only if it is the region chosen.
	guess := opts.region
	if guess == "" {
		guess = "eastus"
	}
	var early chan loadedCatalog
	if opts.catalogFile == "" {
		early = make(chan loadedCatalog, 1)
		go func() {
			cat, err := catalog.Default(guess)
			early <- loadedCatalog{cat, err}
		}()
	}

	objs, err := readInputs(opts.files, opts.maxInput)
	if err != nil {
		return err
	}
	cat, err := opts.loadCatalog(objs, guess, early)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return opts.writePlan(stdout, objs, cat)
}

// parsePlanFlags reads the plan command's flags from args; flag.ErrHelp
// means help was asked for (and printed).
func parsePlanFlags(args []string) (*planFlags, error) {
	opts := &planFlags{}
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.Var(&opts.files, "f", "a YAML or JSON file of Kubernetes objects (repeatable; - for stdin)")
	fs.StringVar(&opts.region, "region", "", "Azure region of the embedded catalog (default: the Nodes' topology.kubernetes.io/region, else eastus)")
	fs.StringVar(&opts.catalogFile, "catalog", "", "a catalog file to use instead of the embedded catalog")
	fs.StringVar(&opts.output, "o", "table", "output format: json or table")
	fs.BoolVar(&opts.disrupt, "disruption", false, "print what disruption (expiration, emptiness, drift, consolidation) would do to the nodes in the input, move by move, instead of placing pending pods")
	fs.IntVar(&opts.maxMoves, "max-moves", 100, "with --disruption: stop after this many moves")
	fs.BoolVar(&opts.spotToSpot, "spot-to-spot", false, "with --disruption: allow replacing spot nodes with cheaper spot nodes (Karpenter's SpotToSpotConsolidation)")
	fs.Int64Var(&opts.maxInput, "max-input", 0, "the largest input file in bytes (0: what the memory at hand can hold: GOMEMLIMIT, else the cgroup's memory.max, else available memory)")
	fs.BoolVar(&opts.rebalance, "rebalance", false, "with --disruption: add rebalancing consolidation, beyond Karpenter: groups of nodes replaced by several cheaper nodes of other shapes")
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: karpfunc plan -f FILE [-f FILE ...] [--region REGION] [--catalog FILE] [-o json|table] [--disruption [--max-moves N] [--spot-to-spot] [--rebalance]]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("plan: unexpected argument %q; pass files with -f", fs.Arg(0))
	}
	return opts, nil
}

// validate refuses flag combinations and values plan cannot act on.
func (opts *planFlags) validate() error {
	if len(opts.files) == 0 {
		return errors.New("plan: no input; pass at least one -f FILE (- reads stdin)")
	}
	if opts.rebalance && !opts.disrupt {
		return errors.New("plan: --rebalance applies to --disruption only; add --disruption")
	}
	if opts.output != "json" && opts.output != "table" {
		return fmt.Errorf("plan: -o %q is not a format; use json or table", opts.output)
	}
	if opts.maxInput < 0 {
		return fmt.Errorf("plan: --max-input %d is negative; give a size in bytes, or 0 for the memory at hand", opts.maxInput)
	}
	return nil
}

// loadedCatalog is the outcome of loading a catalog in the background.
type loadedCatalog struct {
	cat *catalog.Catalog
	err error
}

// readInputs reads the input files, each no larger than maxInput bytes (0:
// the memory at hand), and prints their warnings.
func readInputs(files []string, maxInput int64) (*plan.Objects, error) {
	limit := inputLimit{bytes: maxInput, source: "--max-input"}
	if limit.bytes == 0 {
		limit.bytes, limit.source = plan.InputLimit()
	}
	objs := &plan.Objects{}
	for _, name := range files {
		if err := readFile(objs, name, limit); err != nil {
			return nil, err
		}
	}
	for _, warning := range objs.Warnings {
		fmt.Fprintln(os.Stderr, "warning:", warning)
	}
	return objs, nil
}

// loadCatalog is the --catalog file, else the embedded catalog of the
// --region, the input's region or eastus; early carries the embedded
// catalog of guess, loading since the start.
func (opts *planFlags) loadCatalog(objs *plan.Objects, guess string, early <-chan loadedCatalog) (*catalog.Catalog, error) {
	if opts.catalogFile != "" {
		if opts.region != "" {
			fmt.Fprintln(os.Stderr, "warning: --region is ignored when --catalog is given")
		}
		return catalog.Load(opts.catalogFile)
	}
	region := opts.region
	if region == "" {
		region = objs.Region()
	}
	if region == "" {
		region = "eastus"
	}
	if region == guess {
		loaded := <-early
		return loaded.cat, loaded.err
	}
	return catalog.Default(region)
}

// planOutput is a plan or disruption replay ready to print.
type planOutput interface {
	WriteJSON(w io.Writer) error
	WriteTable(w io.Writer) error
}

// writePlan prints what disruption would do to the input's nodes with
// --disruption, else where its pending pods would be placed.
func (opts *planFlags) writePlan(stdout io.Writer, objs *plan.Objects, cat *catalog.Catalog) error {
	var out planOutput
	overlays := objs.Overlays(cat)
	if opts.disrupt {
		moves, before, last := disruption.Replay(disruption.State{Cluster: &objs.Cluster, Catalog: cat, PoolCatalogs: overlays.Catalogs(cat),
			Now: time.Now(), Options: disruption.Options{SpotToSpot: opts.spotToSpot, Rebalance: opts.rebalance}}, opts.maxMoves)
		out = plan.NewDisruptionOutput(moves, before, last)
	} else {
		start := time.Now()
		static := plan.KeepStatic(&objs.Cluster, cat, overlays.Catalogs(cat), start)
		buffers := objs.Buffers()
		in := objs.OverlaidInput(cat, overlays)
		in.Pods = append(in.Pods, capacitybuffer.AllVirtualPods(buffers)...)
		res := scheduler.Solve(in)
		out = plan.NewOutput(res, time.Since(start)).WithStatic(static).WithOverlays(overlays, cat).WithBuffers(buffers, res)
	}
	if opts.output == "json" {
		return out.WriteJSON(stdout)
	}
	return out.WriteTable(stdout)
}

// inputLimit is the largest input and where that limit comes from.
type inputLimit struct {
	bytes  int64
	source string
}

// readFile reads one input, refusing a file larger than limit before
// reading it (stdin: once more than limit was read), so a dump too large
// for the memory at hand fails with its size instead of an out-of-memory
// kill.
func readFile(objs *plan.Objects, name string, limit inputLimit) error {
	var input io.Reader = &plan.LimitedReader{R: os.Stdin, File: "<stdin>", Limit: limit.bytes, Source: limit.source}
	if name != "-" {
		file, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		defer file.Close()
		if info, err := file.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > limit.bytes {
			return fmt.Errorf("plan: %w", &plan.SizeError{File: name, Size: info.Size(), Limit: limit.bytes, Source: limit.source})
		}
		input = file
	} else {
		name = "<stdin>"
	}
	if err := objs.Read(name, input); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}
