package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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

// runPlanTo is runPlan printing the plan to stdout.
func runPlanTo(stdout io.Writer, args []string) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	var files fileList
	fs.Var(&files, "f", "a YAML or JSON file of Kubernetes objects (repeatable; - for stdin)")
	region := fs.String("region", "", "Azure region of the embedded catalog (default: the Nodes' topology.kubernetes.io/region, else eastus)")
	catalogFile := fs.String("catalog", "", "a catalog file to use instead of the embedded catalog")
	output := fs.String("o", "table", "output format: json or table")
	disrupt := fs.Bool("disruption", false, "print what disruption (expiration, emptiness, drift, consolidation) would do to the nodes in the input, move by move, instead of placing pending pods")
	maxMoves := fs.Int("max-moves", 100, "with --disruption: stop after this many moves")
	spotToSpot := fs.Bool("spot-to-spot", false, "with --disruption: allow replacing spot nodes with cheaper spot nodes (Karpenter's SpotToSpotConsolidation)")
	maxInput := fs.Int64("max-input", 0, "the largest input file in bytes (0: what the memory at hand can hold: GOMEMLIMIT, else the cgroup's memory.max, else available memory)")
	rebalance := fs.Bool("rebalance", false, "with --disruption: add rebalancing consolidation, beyond Karpenter: groups of nodes replaced by several cheaper nodes of other shapes")
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: karpfunc plan -f FILE [-f FILE ...] [--region REGION] [--catalog FILE] [-o json|table] [--disruption [--max-moves N] [--spot-to-spot] [--rebalance]]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("plan: unexpected argument %q; pass files with -f", fs.Arg(0))
	}
	if len(files) == 0 {
		return errors.New("plan: no input; pass at least one -f FILE (- reads stdin)")
	}
	if *rebalance && !*disrupt {
		return errors.New("plan: --rebalance applies to --disruption only; add --disruption")
	}
	if *output != "json" && *output != "table" {
		return fmt.Errorf("plan: -o %q is not a format; use json or table", *output)
	}

	// The embedded catalog loads while the input is read. The region may
	// come from the input's Nodes, known only after reading: the guess
	// loaded early is used only if it is the region chosen.
	type loaded struct {
		cat *catalog.Catalog
		err error
	}
	guess := *region
	if guess == "" {
		guess = "eastus"
	}
	var early chan loaded
	if *catalogFile == "" {
		early = make(chan loaded, 1)
		go func() {
			c, err := catalog.Default(guess)
			early <- loaded{c, err}
		}()
	}

	if *maxInput < 0 {
		return fmt.Errorf("plan: --max-input %d is negative; give a size in bytes, or 0 for the memory at hand", *maxInput)
	}
	limit := inputLimit{bytes: *maxInput, source: "--max-input"}
	if limit.bytes == 0 {
		limit.bytes, limit.source = plan.InputLimit()
	}
	objs := &plan.Objects{}
	for _, name := range files {
		if err := readFile(objs, name, limit); err != nil {
			return err
		}
	}
	for _, w := range objs.Warnings {
		fmt.Fprintln(os.Stderr, "warning:", w)
	}

	var cat *catalog.Catalog
	var err error
	if *catalogFile != "" {
		if *region != "" {
			fmt.Fprintln(os.Stderr, "warning: --region is ignored when --catalog is given")
		}
		cat, err = catalog.Load(*catalogFile)
	} else {
		r := *region
		if r == "" {
			r = objs.Region()
		}
		if r == "" {
			r = "eastus"
		}
		if r == guess {
			l := <-early
			cat, err = l.cat, l.err
		} else {
			cat, err = catalog.Default(r)
		}
	}
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}

	if *disrupt {
		moves, before, last := disruption.Replay(disruption.State{Cluster: &objs.Cluster, Catalog: cat, Now: time.Now(),
			Options: disruption.Options{SpotToSpot: *spotToSpot, Rebalance: *rebalance}}, *maxMoves)
		out := plan.NewDisruptionOutput(moves, before, last)
		if *output == "json" {
			return out.WriteJSON(stdout)
		}
		return out.WriteTable(stdout)
	}
	start := time.Now()
	res := scheduler.Solve(objs.Input(cat))
	out := plan.NewOutput(res, time.Since(start))
	if *output == "json" {
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
	var r io.Reader = &plan.LimitedReader{R: os.Stdin, File: "<stdin>", Limit: limit.bytes, Source: limit.source}
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		defer f.Close()
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > limit.bytes {
			return fmt.Errorf("plan: %w", &plan.SizeError{File: name, Size: info.Size(), Limit: limit.bytes, Source: limit.source})
		}
		r = f
	} else {
		name = "<stdin>"
	}
	if err := objs.Read(name, r); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}
