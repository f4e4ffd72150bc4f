// Command benchquota measures quota awareness on the local loop: the
// subscription's quota is tight (the two D families cheapest per vCPU at
// 16 vCPUs each, 64 regional vCPUs, 32 spot vCPUs) and one Deployment of
// 200 pods that need most of it lands on an empty cluster, once with quota awareness off
// (KARPFUNC_QUOTA_AWARE=false: quota is learnt from refused creates) and
// once on. For each it prints the creates ARM refused for quota, the time
// from the Deployment's creation to all pods Running, and the fleet's
// hourly price. With -rounds N it runs N rounds, alternating which setting
// goes first (off then on, on then off, ...), so that neither always runs
// on a machine warmed or loaded by the other. It is a benchmark, not part
// of `make test`.
//
//	go run ./hack/benchquota [-pods 200] [-rounds 1] [-timeout 5m] [-vm-create 6s] [-boot 3s]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// The tight quota of the benchmark.
const (
	familyVCPUs   = 16
	regionalVCPUs = 64
	spotVCPUs     = 32
	app           = "quota-burst"
	podCPU        = "400m"
	podMemory     = "256Mi"
)

// pollEvery is how often a run counts Running pods: its time to all
// Running is late by at most this much.
const pollEvery = 100 * time.Millisecond

type settings struct {
	pods     int
	rounds   int
	timeout  time.Duration
	vmCreate time.Duration
	boot     time.Duration
}

// result is one run's figures.
type result struct {
	round         int
	aware         bool
	refused       int
	creates       int
	tookToRunning time.Duration
	running       int
	pricePerHour  float64
	vcpus         int64
}

func main() {
	ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler()))
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchquota:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchquota", flag.ContinueOnError)
	var s settings
	fs.IntVar(&s.pods, "pods", 200, "replicas of the burst Deployment ("+podCPU+" CPU, "+podMemory+" memory each)")
	fs.IntVar(&s.rounds, "rounds", 1, "rounds of both settings, alternating which goes first")
	fs.DurationVar(&s.timeout, "timeout", 5*time.Minute, "give up on a run whose pods are not all Running by then")
	fs.DurationVar(&s.vmCreate, "vm-create", 6*time.Second, "how long the ARM emulator takes to create a VM")
	fs.DurationVar(&s.boot, "boot", 3*time.Second, "how long a created VM takes to boot and register its Node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.pods < 1 || s.pods > 1000 {
		return fmt.Errorf("-pods %d: between 1 and 1000", s.pods)
	}
	if s.rounds < 1 || s.rounds > 10 {
		return fmt.Errorf("-rounds %d: between 1 and 10", s.rounds)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := tools.RepoRoot()
	if err != nil {
		return err
	}
	var results []result
	for round := 1; round <= s.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, aware := range order {
			res, err := runOnce(ctx, root, s, aware)
			if err != nil {
				return fmt.Errorf("round %d, quota awareness %s: %w", round, onOff(aware), err)
			}
			res.round = round
			results = append(results, res)
		}
	}
	return report(s, results)
}

// report prints the runs' figures, one line each, and in how many rounds
// awareness on had all pods Running sooner.
func report(s settings, results []result) error {
	fmt.Printf("\n%d pods (%s CPU, %s memory), quota: two cheapest D families %d vCPUs each, regional %d, spot %d; VM create %s, boot %s\n",
		s.pods, podCPU, podMemory, familyVCPUs, regionalVCPUs, spotVCPUs, s.vmCreate, s.boot)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tquota awareness\tcreates refused for quota\tVMs created\tto all Running\tpods Running\tfleet vCPUs\tfleet price ($/h)")
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d/%d\t%d\t%.3f\n", r.round, onOff(r.aware), r.refused, r.creates, r.tookToRunning.Round(100*time.Millisecond),
			r.running, s.pods, r.vcpus, r.pricePerHour)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	faster := 0
	for i := 0; i+1 < len(results); i += 2 {
		on, off := results[i], results[i+1]
		if !on.aware {
			on, off = off, on
		}
		if on.running == s.pods && (off.running < s.pods || on.tookToRunning < off.tookToRunning) {
			faster++
		}
	}
	fmt.Printf("all Running sooner with quota awareness on in %d of %d rounds\n", faster, s.rounds)
	return nil
}

func onOff(aware bool) string {
	if aware {
		return "on"
	}
	return "off"
}

// runOnce starts a fresh loop, sets the tight quota, applies the burst
// and waits for all pods Running (or the timeout).
func runOnce(ctx context.Context, root string, s settings, aware bool) (result, error) {
	fmt.Printf("== quota awareness %s\n", onOff(aware))
	env, err := localenv.Start(ctx, localenv.Options{RepoRoot: root, ClusterName: "quota-" + onOff(aware), Progress: os.Stdout,
		VMCreateDelay: s.vmCreate, BootDelay: s.boot,
		HostSettings: map[string]string{"KARPFUNC_QUOTA_AWARE": fmt.Sprint(aware)}})
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}()
	families := cheapestDFamilies(env.Catalog, 2)
	quota := armemulator.Quota{Families: map[string]int64{}, Regional: regionalVCPUs, Spot: spotVCPUs}
	for _, family := range families {
		quota.Families[family] = familyVCPUs
	}
	env.ARM.SetQuota(quota)
	fmt.Printf("  · quota: %s at %d vCPUs each, regional %d, spot %d\n", strings.Join(families, " and "), familyVCPUs, regionalVCPUs, spotVCPUs)
	if _, err := env.ApplyFile(ctx, filepath.Join(root, "examples", "nodepool.yaml")); err != nil {
		return result{}, err
	}
	started := time.Now()
	if _, err := env.Apply(ctx, manifest(s.pods), "burst deployment"); err != nil {
		return result{}, err
	}
	res := result{aware: aware}
	deadline := time.Now().Add(s.timeout)
	for {
		running, err := runningPods(ctx, env.Kube)
		if err != nil {
			return result{}, err
		}
		res.running = running
		if running == s.pods {
			res.tookToRunning = time.Since(started)
			break
		}
		if time.Now().After(deadline) {
			res.tookToRunning = s.timeout
			fmt.Printf("  · timed out: %d of %d pods Running\n", running, s.pods)
			break
		}
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
	counters := env.ARM.Counters()
	res.refused, res.creates = counters.QuotaRefusals, counters.VMCreates
	res.vcpus, res.pricePerHour = fleet(env.ARM.VMs(), env.Catalog)
	printQuotaEntries(ctx, env)
	fmt.Printf("  · fleet: %s\n", fleetSizes(env.ARM.VMs()))
	fmt.Printf("  · %d pods Running after %s; %d creates refused for quota\n", res.running, res.tookToRunning.Round(100*time.Millisecond), res.refused)
	return res, nil
}

func manifest(replicas int) []byte {
	return fmt.Appendf(nil, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: app
          image: registry.k8s.io/pause:3.10
          resources:
            requests:
              cpu: %[3]s
              memory: %[4]s
`, app, replicas, podCPU, podMemory)
}

func runningPods(ctx context.Context, kube client.Client) (int, error) {
	list := &corev1.PodList{}
	if err := kube.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return 0, err
	}
	running := 0
	for _, pod := range list.Items {
		if pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
			running++
		}
	}
	return running, nil
}

// cheapestDFamilies are the n quota families of the catalog's amd64 D
// sizes with the lowest price per vCPU, spot or on-demand: the ones a plan
// reaches for first.
func cheapestDFamilies(cat *catalog.Catalog, n int) []string {
	best := map[string]float64{}
	for _, it := range cat.InstanceTypes {
		if it.Labels[catalog.LabelSKUFamily] != "D" || it.Architecture != "amd64" {
			continue
		}
		vcpus := float64(it.Capacity.Cpu().Value())
		for _, o := range it.Offerings {
			if !o.Available || vcpus == 0 {
				continue
			}
			family := offerings.QuotaFamily(it.Name)
			if perVCPU := o.Price / vcpus; best[family] == 0 || perVCPU < best[family] {
				best[family] = perVCPU
			}
		}
	}
	families := make([]string, 0, len(best))
	for family := range best {
		families = append(families, family)
	}
	sort.Slice(families, func(i, j int) bool {
		if best[families[i]] != best[families[j]] {
			return best[families[i]] < best[families[j]]
		}
		return families[i] < families[j]
	})
	return families[:min(n, len(families))]
}

// fleet is the vCPUs and hourly price of the VMs, each at its catalog
// price for its size, zone and capacity type.
func fleet(vms []*armcompute.VirtualMachine, cat *catalog.Catalog) (int64, float64) {
	var vcpus int64
	var price float64
	for _, vm := range vms {
		if vm.Properties == nil || vm.Properties.HardwareProfile == nil || vm.Properties.HardwareProfile.VMSize == nil {
			continue
		}
		it, ok := cat.Get(string(*vm.Properties.HardwareProfile.VMSize))
		if !ok {
			continue
		}
		capacityType := karpv1.CapacityTypeOnDemand
		if vm.Properties.Priority != nil && *vm.Properties.Priority == armcompute.VirtualMachinePriorityTypesSpot {
			capacityType = karpv1.CapacityTypeSpot
		}
		zone := ""
		if len(vm.Zones) == 1 && vm.Zones[0] != nil {
			zone = cat.Region + "-" + *vm.Zones[0]
		}
		vcpus += it.Capacity.Cpu().Value()
		for _, o := range it.Offerings {
			if o.CapacityType == capacityType && o.Zone == zone {
				price += o.Price
				break
			}
		}
	}
	return vcpus, price
}

// printQuotaEntries prints what refused creates taught the shared
// unavailable-offerings cache (its quota entries).
func printQuotaEntries(ctx context.Context, env *localenv.Env) {
	set, err := offerings.NewStore(env.Kube, localenv.Namespace, "", nil).Load(ctx)
	if err != nil {
		fmt.Printf("  · reading the unavailable offerings: %v\n", err)
		return
	}
	for _, entry := range set.Entries() {
		if strings.Contains(entry.Reason, "Quota") {
			fmt.Printf("  · cache: %s\n", entry)
		}
	}
}

// fleetSizes names the VMs' sizes and priorities, with counts.
func fleetSizes(vms []*armcompute.VirtualMachine) string {
	count := map[string]int{}
	for _, vm := range vms {
		if vm.Properties == nil || vm.Properties.HardwareProfile == nil || vm.Properties.HardwareProfile.VMSize == nil {
			continue
		}
		name := string(*vm.Properties.HardwareProfile.VMSize)
		if vm.Properties.Priority != nil && *vm.Properties.Priority == armcompute.VirtualMachinePriorityTypesSpot {
			name += " spot"
		}
		count[name]++
	}
	var out []string
	for name, n := range count {
		out = append(out, fmt.Sprintf("%d× %s", n, name))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
