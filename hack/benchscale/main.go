// Command benchscale measures karpfunc at AKS's limits on a real API server
// (`make bench-scale`): it starts the local control plane, creates a cluster
// of plain objects (Nodes with their NodeClaims, bound pods as the API
// server returns them once a kubelet has written their status, PDBs,
// pending pods marked Unschedulable; nothing runs them), then runs the
// Provision and Disruption passes as the handler does (the same
// provisioning.Provisioner and disruption/live.Controller, reading through
// the warm snapshot cache, launching against the ARM emulator), each in a
// fresh process ("a new instance"): the cold pass, then 100 changes, then
// the warm pass. Last it runs `karpfunc plan` on `kubectl get -o json` and
// `-o yaml` dumps of the same cluster.
//
//	go run ./hack/benchscale -nodes 500 -pods 15000 -pending 200   # quick
//	go run ./hack/benchscale                                      # AKS's limits
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

type config struct {
	shape
	changes              int
	pageSize             int64
	instance, kubeconfig string
	skipPlan             bool
	hold                 bool
	dir                  string
}

func parseFlags() (config, error) {
	var conf config
	flag.IntVar(&conf.nodes, "nodes", 5000, "Nodes (each with its NodeClaim)")
	flag.IntVar(&conf.pods, "pods", 150000, "bound pods")
	flag.IntVar(&conf.pending, "pending", 2000, "pending pods (marked Unschedulable)")
	flag.IntVar(&conf.namespaces, "namespaces", 50, "namespaces the pods spread over")
	flag.IntVar(&conf.workers, "workers", 64, "concurrent creators")
	flag.IntVar(&conf.changes, "changes", 100, "changes between the cold and the warm pass")
	flag.Int64Var(&conf.pageSize, "page-size", snapshot.DefaultPageSize, "the instances' snapshot cache: LIST page size of the kinds the client reads, and how often (in objects) the budget is checked while pods and nodes stream in")
	flag.BoolVar(&apiCompression, "api-compression", true, "the instances ask the API server for gzip, as the handler by default (KARPFUNC_API_COMPRESSION)")
	flag.IntVar(&listsAtOnce, "lists-at-once", snapshot.DefaultListsAtOnce, "the instances' PageReader: LISTs of a kind read in parts (pods, by namespace) at once; 1 reads pods in one LIST")
	flag.BoolVar(&plainList, "plain-list", false, "the instances' snapshot cache reads pods and nodes with the client's List, not a snapshot.PageReader")
	flag.StringVar(&conf.instance, "instance", "", "internal: run one instance's passes (provision or disruption) against -kubeconfig")
	flag.StringVar(&conf.kubeconfig, "instance-kubeconfig", "", "internal: the cluster of -instance")
	flag.BoolVar(&conf.skipPlan, "skip-plan", false, "do not run karpfunc plan on the dumps")
	flag.BoolVar(&conf.hold, "hold", false, "after the instances, keep the control plane up (until interrupted) for instances run by hand with -instance")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each pass to this path with the pass's name appended (.cold-provision, .warm-disruption, ...)")
	flag.IntVar(&controlPlaneParent, "control-plane-parent", os.Getppid(), "internal: the pid whose kube-apiserver and etcd children an instance's CPU figures count (the driver's)")
	flag.StringVar(&conf.dir, "dir", "", "where the dumps go (default: a temporary directory)")
	flag.Parse()
	if conf.nodes <= 0 || conf.pods < 0 || conf.pending < 0 || conf.namespaces <= 0 || conf.workers <= 0 || conf.changes < 0 {
		return conf, fmt.Errorf("-nodes, -namespaces and -workers must be positive; -pods, -pending and -changes not negative")
	}
	return conf, nil
}

func run() error {
	conf, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if conf.instance != "" {
		return runInstance(ctx, conf.instance, conf.kubeconfig, conf.shape, conf.changes, snapshot.CacheOptions{PageSize: conf.pageSize})
	}
	return drive(ctx, conf)
}

// drive starts the control plane, creates the cluster, runs the instances
// and times karpfunc plan.
func drive(ctx context.Context, conf config) error {
	root, err := tools.RepoRoot()
	if err != nil {
		return err
	}
	binDir, err := tools.EnsureBinaries(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, InstallCRDs: true,
		// Creation at this rate is the benchmark's, not a Function's:
		// lift the in-flight limits so 64 creators are not throttled.
		ExtraAPIServerFlags: []string{"--max-requests-inflight=1000", "--max-mutating-requests-inflight=1000"}})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	fmt.Printf("control plane up in %s\n", time.Since(start).Round(time.Millisecond))
	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling while creating
	kube, err := client.New(cfg, client.Options{Scheme: apis.Scheme})
	if err != nil {
		return err
	}
	if err := createCluster(ctx, kube, cp.EtcdURL(), root, conf.shape); err != nil {
		return err
	}
	for _, which := range []string{"provision", "disruption"} {
		if err := child(ctx, which, cp.KubeconfigPath(), conf); err != nil {
			return err
		}
	}
	if conf.hold {
		fmt.Printf("holding; run instances with: %s -instance disruption -instance-kubeconfig %s -control-plane-parent %d -nodes %d -pods %d -pending %d\n",
			os.Args[0], cp.KubeconfigPath(), os.Getpid(), conf.nodes, conf.pods, conf.pending)
		<-ctx.Done()
		return nil
	}
	if conf.skipPlan {
		return nil
	}
	dir := conf.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "benchscale-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	return benchPlan(ctx, kube, root, dir)
}

// child runs one instance in a new process, so its peak RSS is its own.
func child(ctx context.Context, which, kubeconfig string, conf config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-instance", which, "-instance-kubeconfig", kubeconfig,
		"-nodes", fmt.Sprint(conf.nodes), "-pods", fmt.Sprint(conf.pods), "-pending", fmt.Sprint(conf.pending),
		"-namespaces", fmt.Sprint(conf.namespaces), "-changes", fmt.Sprint(conf.changes), "-page-size", fmt.Sprint(conf.pageSize),
		fmt.Sprintf("-plain-list=%t", plainList), "-lists-at-once", fmt.Sprint(listsAtOnce), fmt.Sprintf("-api-compression=%t", apiCompression), "-cpuprofile", cpuProfile)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// createCluster creates the namespaces, the NodePool, its AKSNodeClass and
// the PDBs through the API server, and loads the nodes, NodeClaims and
// pods straight into etcd (etcdLoader), then checks the API server serves
// every one of them.
func createCluster(ctx context.Context, kube client.Client, etcdURL, root string, s shape) error {
	if err := applyFile(ctx, kube, filepath.Join(root, "examples", "nodepool.yaml")); err != nil {
		return err
	}
	namespaces := []string{offerings.DefaultNamespace}
	for i := range s.namespaces {
		namespaces = append(namespaces, fmt.Sprintf("team-%02d", i))
	}
	for _, ns := range namespaces {
		if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
			return err
		}
	}
	if err := parallel(ctx, "PDBs", apps, 1, s.workers, eachOne(func(ctx context.Context, i int) error { return createPDB(ctx, kube, i, s) })); err != nil {
		return err
	}
	loader := newEtcdLoader(etcdURL)
	loadWorkers := min(s.workers, 8) // etcd applies one transaction at a time
	err := parallel(ctx, "nodes+nodeclaims", s.nodes, etcdTxnOps/2, loadWorkers, func(ctx context.Context, from, to int) error {
		objs := make([]client.Object, 0, 2*(to-from))
		for i := from; i < to; i++ {
			claim, node := nodeObjects(i)
			objs = append(objs, claim, node)
		}
		return loader.put(ctx, objs)
	})
	if err != nil {
		return err
	}
	for _, batch := range []struct {
		what     string
		from, to int
		pending  bool
	}{{"bound pods", 0, s.pods, false}, {"pending pods", s.pods, s.pods + s.pending, true}} {
		err := parallel(ctx, batch.what, batch.to-batch.from, etcdTxnOps, loadWorkers, func(ctx context.Context, from, to int) error {
			objs := make([]client.Object, 0, to-from)
			for i := from; i < to; i++ {
				objs = append(objs, storedPod(batch.from+i, s, batch.pending))
			}
			return loader.put(ctx, objs)
		})
		if err != nil {
			return err
		}
	}
	if err := waitForWatchCache(ctx, kube); err != nil {
		return err
	}
	return checkCounts(ctx, kube, map[string]int64{"nodes": int64(s.nodes), "nodeclaims": int64(s.nodes), "pods": int64(s.pods + s.pending)})
}

// waitForWatchCache waits until the API server's watch cache of every
// loaded kind holds etcd's current revision: loading 150,000 pods leaves
// it decoding them for minutes, and a pass measured then would measure
// that (a LIST's later pages are served at its first page's
// resourceVersion and wait for the cache). A LIST at resourceVersion R,
// NotOlderThan, is answered from the watch cache once it reaches R, with
// a timeout error before.
func waitForWatchCache(ctx context.Context, kube client.Client) error {
	start := time.Now()
	current := &corev1.NamespaceList{}
	if err := kube.List(ctx, current, client.Limit(1)); err != nil {
		return err
	}
	for kind, list := range map[string]client.ObjectList{"nodes": &corev1.NodeList{}, "nodeclaims": &karpv1.NodeClaimList{}, "pods": &corev1.PodList{}} {
		for {
			err := kube.List(ctx, list, client.Limit(1), &client.ListOptions{Raw: &metav1.ListOptions{
				ResourceVersion: current.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}})
			if err == nil {
				break
			}
			if ctx.Err() != nil || time.Since(start) > 15*time.Minute {
				return fmt.Errorf("the API server's watch cache of %s did not reach resourceVersion %s: %w", kind, current.ResourceVersion, err)
			}
			time.Sleep(time.Second)
		}
	}
	fmt.Printf("the API server's watch cache holds everything after %s\n", time.Since(start).Round(time.Millisecond))
	settle(ctx)
	return nil
}

// settle waits (at most settleLimit) until the API server is idle, using
// under a tenth of a core for settleQuiet: a cluster's API server at rest,
// not one still digesting the load, is what a pass meets.
func settle(ctx context.Context) {
	const (
		settleLimit = 3 * time.Minute
		settleQuiet = 3 * time.Second
	)
	start := time.Now()
	before := siblingCPUOf(os.Getpid(), "kube-apiserver")
	used, quiet := before, time.Duration(0)
	for quiet < settleQuiet && time.Since(start) < settleLimit && ctx.Err() == nil {
		time.Sleep(time.Second)
		now := siblingCPUOf(os.Getpid(), "kube-apiserver")
		if now-used < 100*time.Millisecond {
			quiet += time.Second
		} else {
			quiet = 0
		}
		used = now
	}
	fmt.Printf("the API server settled after %s (%.1f CPU-s meanwhile)\n", time.Since(start).Round(time.Second), (used - before).Seconds())
}

// countsSettle bounds how long checkCounts waits for the API server to
// serve every object loaded. Right after a small load (15,200 pods) the
// first count came up a few pods short (15,139-15,196) at a
// resourceVersion just before the loader's last writes, and was whole
// a few seconds later: a count is only wrong when it stays wrong.
const countsSettle = 30 * time.Second

// checkCounts asks the API server (a LIST of one, which reports how many
// remain) whether it serves every object loaded, until countsSettle.
func checkCounts(ctx context.Context, kube client.Client, want map[string]int64) error {
	lists := map[string]client.ObjectList{"nodes": &corev1.NodeList{}, "nodeclaims": &karpv1.NodeClaimList{}, "pods": &corev1.PodList{}}
	deadline := time.Now().Add(countsSettle)
	for kind, list := range lists {
		for {
			served, err := countServed(ctx, kube, list)
			if err != nil {
				return fmt.Errorf("counting %s: %w", kind, err)
			}
			if served == want[kind] {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the API server serves %d %s, want %d (after %s): the etcd loader's keys or encoding are wrong", served, kind, want[kind], countsSettle)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

// countServed is how many objects of list's kind the API server serves.
func countServed(ctx context.Context, kube client.Client, list client.ObjectList) (int64, error) {
	if err := kube.List(ctx, list, client.Limit(1)); err != nil {
		return 0, err
	}
	served := int64(meta.LenList(list))
	if remaining := list.GetRemainingItemCount(); remaining != nil {
		served += *remaining
	}
	return served, nil
}

// applyFile creates the objects of a multi-document YAML file.
func applyFile(ctx context.Context, kube client.Client, path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	docs := yaml.NewYAMLReader(bufio.NewReader(file))
	decoder := serializer.NewCodecFactory(apis.Scheme).UniversalDeserializer()
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := kube.Create(ctx, obj.(client.Object)); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}
