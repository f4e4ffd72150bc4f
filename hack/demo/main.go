// Command demo is `make demo`, the developer's first look at the whole
// loop: it starts the local control plane, the ARM emulator, the local
// Functions host and the relay (internal/localenv), applies the sample
// NodePool and 50 pending pods, prints progress and ends with a summary.
// It is not part of the user CLI (cmd/karpfunc), which links no stand-in.
// With -pods N it applies one Deployment of N replicas instead (the burst,
// `make bench-burst`) and ends with the burst's breakdown, read from the
// pods', NodeClaims' and Nodes' own timestamps. With -bare-pods as well
// it creates the N pods itself, all within seconds, so the breakdown runs
// from the first pod's creation rather than kube-controller-manager's pace.
//
// With -nodepool it applies another NodePool file instead of the sample one
// (examples/nodepool-arm64.yaml: only arm64 sizes).
//
//	go run ./hack/demo [-timeout 10m] [-keep] [-vm-create 6s] [-boot 3s] [-nodepool file] [-pods N [-bare-pods] [-trace]]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/internal/tools"
)

func main() {
	// controller-runtime's clients log through logr; the demo prints what
	// it has to say itself, so their logs go to slog's default (warnings up).
	ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	if err := runDemo(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "karpfunc demo:", err)
		os.Exit(1)
	}
}

// demoFlags are the demo's command-line settings.
type demoFlags struct {
	timeout  time.Duration // give up if the pods are not all running by then
	keep     bool          // keep everything running after the summary
	vmCreate time.Duration // the ARM emulator's VM create time
	boot     time.Duration // a created VM's boot time
	pods     int           // 0: the sample workload; else the burst's replicas
	barePods bool          // create the burst's pods directly, not through a Deployment
	trace    bool          // collect the handler's traces and profile the Provision passes
	nodePool string        // the NodePool file to apply; "" is examples/nodepool.yaml
}

// parseDemoFlags reads the demo's flags from args.
func parseDemoFlags(args []string) (demoFlags, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Minute, "give up if the pods are not all running by then")
	keep := fs.Bool("keep", false, "keep everything running after the summary until Ctrl-C")
	vmCreate := fs.Duration("vm-create", demoVMCreate, "how long the ARM emulator takes to create a VM")
	boot := fs.Duration("boot", demoBoot, "how long a created VM takes to boot and register its Node")
	pods := fs.Int("pods", 0, "apply one Deployment of this many replicas instead of the sample workload, and print the burst's breakdown")
	barePods := fs.Bool("bare-pods", false, "with -pods N: create the N pods directly ("+fmt.Sprint(burstCreators)+
		" at a time) instead of a Deployment, and time the breakdown from the first pod's creation")
	trace := fs.Bool("trace", false, "collect the handler's traces (OTLP) and print where the Provision passes spent their time")
	nodePool := fs.String("nodepool", "", "the NodePool and AKSNodeClass file to apply, relative to the repository root "+
		"(default examples/nodepool.yaml; examples/nodepool-arm64.yaml launches only arm64 sizes, examples/nodepool-ephemeral.yaml only sizes with ephemeral OS disks)")
	if err := fs.Parse(args); err != nil {
		return demoFlags{}, err
	}
	opts := demoFlags{timeout: *timeout, keep: *keep, vmCreate: *vmCreate, boot: *boot, pods: *pods, barePods: *barePods, trace: *trace, nodePool: *nodePool}
	if err := opts.check(); err != nil {
		return demoFlags{}, err
	}
	return opts, nil
}

// check refuses settings that do not go together.
func (opts demoFlags) check() error {
	if opts.pods < 0 || opts.pods > burstPodsMax {
		return fmt.Errorf("-pods %d: the burst takes 1 to %d pods (0 runs the sample workload)", opts.pods, burstPodsMax)
	}
	if opts.barePods && opts.pods == 0 {
		return errors.New("-bare-pods needs -pods N: it creates the burst's N pods; the sample workload has no burst")
	}
	return nil
}

func runDemo(args []string) error {
	opts, err := parseDemoFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := tools.RepoRoot()
	if err != nil {
		return err
	}
	fmt.Println("karpfunc demo: starting the local loop (control plane, ARM emulator, Functions host, relay)")
	started := time.Now()
	fmt.Printf("  · time is compressed: the emulator creates a VM in %s and boots it in %s (on Azure, roughly %s and %s: %.0fx faster)\n",
		opts.vmCreate, opts.boot, azureVMCreate, azureBoot, compression(opts.vmCreate+opts.boot))
	envOpts := localenv.Options{RepoRoot: root, ClusterName: "demo", Progress: os.Stdout,
		VMCreateDelay: opts.vmCreate, BootDelay: opts.boot}
	var traces *otlpreceiver.Receiver
	if opts.trace {
		traces = otlpreceiver.Start()
		defer traces.Close()
		envOpts.OTLPEndpoint = traces.URL()
	}
	env, err := localenv.Start(ctx, envOpts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("cleaning up: stopping the relay, Functions host, ARM emulator and control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}()
	fmt.Printf("  · everything up in %s; process logs in %s\n", time.Since(started).Round(100*time.Millisecond), env.LogPath)

	load, err := applyWorkload(ctx, env, root, opts)
	if err != nil {
		return err
	}
	took, err := waitForPods(ctx, env, load, opts.timeout)
	if err != nil {
		return err
	}
	if err := printSummary(ctx, env, opts, load, took); err != nil {
		return err
	}
	if traces != nil && !load.start.IsZero() {
		printProvisionProfile(os.Stdout, traces.Spans(), load.start, load.startEvent)
	}
	if opts.keep {
		fmt.Printf("\nkeeping it running; KUBECONFIG=%s ; Ctrl-C to stop\n", env.ControlPlane.KubeconfigPath())
		<-ctx.Done()
	}
	return nil
}

// workload is what the demo applied: the pods it waits for.
type workload struct {
	selector client.MatchingLabelsSelector
	pods     int
	// start is when the burst's Deployment or, with -bare-pods, its first
	// pod was created (zero for the sample workload, whose time runs from
	// the first pending pod); startEvent says which.
	start      time.Time
	startEvent string
	// poll is how often the progress is read: a LIST of every pod costs
	// the shared machine more the more pods there are.
	poll time.Duration
}

// applyWorkload applies the sample NodePool and either the sample workload
// (opts.pods 0) or the burst: its Deployment or, with -bare-pods, its pods.
func applyWorkload(ctx context.Context, env *localenv.Env, root string, opts demoFlags) (workload, error) {
	nodePool := "examples/nodepool.yaml"
	if opts.nodePool != "" {
		nodePool = opts.nodePool
	}
	files := []string{nodePool, "examples/workload.yaml"}
	if opts.pods > 0 {
		files = files[:1]
	}
	for _, file := range files {
		objs, err := env.ApplyFile(ctx, filepath.Join(root, file))
		if err != nil {
			return workload{}, err
		}
		for _, obj := range objs {
			fmt.Printf("  · applied %s/%s from %s\n", obj.GetKind(), obj.GetName(), file)
		}
	}
	if opts.pods == 0 {
		return workload{selector: client.MatchingLabelsSelector{Selector: mustSelector("app in (web, api, worker)")},
			pods: 50, poll: 250 * time.Millisecond}, nil
	}
	load := workload{selector: client.MatchingLabelsSelector{Selector: mustSelector("app=" + burstName)},
		pods: opts.pods, poll: time.Second}
	var err error
	if opts.barePods {
		load.startEvent = startFirstPod
		load.start, err = createBurst(ctx, env, opts.pods)
	} else {
		load.startEvent = startDeployment
		load.start, err = applyBurst(ctx, env, opts.pods)
	}
	return load, err
}

// waitForPods prints the workload's progress as it changes until all its
// pods run, and returns how long that took from the first pending pod.
func waitForPods(ctx context.Context, env *localenv.Env, load workload, timeout time.Duration) (time.Duration, error) {
	deadline := time.After(timeout)
	tick := time.NewTicker(load.poll)
	defer tick.Stop()
	var firstPending time.Time
	last := ""
	for {
		select {
		case <-ctx.Done():
			return 0, errors.New("interrupted")
		case <-deadline:
			return 0, fmt.Errorf("pods not all running after %s; see %s", timeout, env.LogPath)
		case <-tick.C:
		}
		progress, err := env.Observe(ctx, "default", load.selector)
		if err != nil {
			return 0, err
		}
		now := time.Now()
		if firstPending.IsZero() && progress.Pending > 0 {
			firstPending = now
		}
		if line := progress.String(); line != last {
			elapsed := time.Duration(0)
			if !firstPending.IsZero() {
				elapsed = now.Sub(firstPending)
			}
			fmt.Printf("[%6.1fs] %s\n", elapsed.Seconds(), line)
			last = line
		}
		if progress.Pods >= load.pods && progress.Running == progress.Pods && !firstPending.IsZero() {
			return now.Sub(firstPending), nil
		}
	}
}

// printSummary prints the fleet the workload got, its price and how long
// the launches took (took, from the first pending pod to all running).
func printSummary(ctx context.Context, env *localenv.Env, opts demoFlags, load workload, took time.Duration) error {
	fleet, total, err := env.Fleet(ctx)
	if err != nil {
		return err
	}
	fmt.Println("\nsummary")
	table := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(table, "  NODES\tSKU\tZONE\tCAPACITY\t$/HOUR")
	for _, group := range fleet {
		fmt.Fprintf(table, "  %d\t%s\t%s\t%s\t%.4f\n", group.Nodes, group.SKU, group.Zone, group.CapacityType, group.PricePerHour)
	}
	_ = table.Flush()
	counters := env.ARM.Counters()
	fmt.Printf("  fleet: $%.4f/hour, %d VMs created through ARM\n", total, counters.VMCreates)
	fmt.Printf("  first pending pod -> all %d running: %s, with the emulator's VM creates of %s and boots of %s (launch time compressed %.0fx from Azure's typical %s + %s)\n",
		load.pods, took.Round(10*time.Millisecond), opts.vmCreate, opts.boot, compression(opts.vmCreate+opts.boot), azureVMCreate, azureBoot)
	if dead, err := env.Host.DeadLetters("provision"); err == nil && len(dead) > 0 {
		fmt.Printf("  warning: %d provision messages dead-lettered\n", len(dead))
	}
	if load.start.IsZero() {
		return nil
	}
	line, err := readTimeline(ctx, env.Kube, load.start, load.startEvent)
	if err != nil {
		return fmt.Errorf("reading the burst's timeline: %w", err)
	}
	line.print(os.Stdout)
	return nil
}

// The demo's emulator times, and the times they stand for on Azure: a
// node VM's create (ARM accepting the PUT to provisioningState Succeeded)
// and its boot (to the kubelet registering the Node). The Azure figures are
// typical orders of magnitude, not guarantees.
const (
	demoVMCreate  = 6 * time.Second
	demoBoot      = 3 * time.Second
	azureVMCreate = 60 * time.Second
	azureBoot     = 30 * time.Second
)

// compression is how much faster than Azure the demo's launches are.
func compression(demo time.Duration) float64 {
	if demo <= 0 {
		return 1
	}
	return float64(azureVMCreate+azureBoot) / float64(demo)
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}
