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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
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
	instance, kubeconfig string
	skipPlan             bool
	dir                  string
}

func parseFlags() (config, error) {
	var c config
	flag.IntVar(&c.nodes, "nodes", 5000, "Nodes (each with its NodeClaim)")
	flag.IntVar(&c.pods, "pods", 150000, "bound pods")
	flag.IntVar(&c.pending, "pending", 2000, "pending pods (marked Unschedulable)")
	flag.IntVar(&c.namespaces, "namespaces", 50, "namespaces the pods spread over")
	flag.IntVar(&c.workers, "workers", 64, "concurrent creators")
	flag.IntVar(&c.changes, "changes", 100, "changes between the cold and the warm pass")
	flag.StringVar(&c.instance, "instance", "", "internal: run one instance's passes (provision or disruption) against -kubeconfig")
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "internal: the cluster of -instance")
	flag.BoolVar(&c.skipPlan, "skip-plan", false, "do not run karpfunc plan on the dumps")
	flag.StringVar(&c.dir, "dir", "", "where the dumps go (default: a temporary directory)")
	flag.Parse()
	if c.nodes <= 0 || c.pods < 0 || c.pending < 0 || c.namespaces <= 0 || c.workers <= 0 || c.changes < 0 {
		return c, fmt.Errorf("-nodes, -namespaces and -workers must be positive; -pods, -pending and -changes not negative")
	}
	return c, nil
}

func run() error {
	c, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.instance != "" {
		return runInstance(ctx, c.instance, c.kubeconfig, c.shape, c.changes)
	}
	return drive(ctx, c)
}

// drive starts the control plane, creates the cluster, runs the instances
// and times karpfunc plan.
func drive(ctx context.Context, c config) error {
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
	if err := createCluster(ctx, kube, root, c.shape); err != nil {
		return err
	}
	for _, which := range []string{"provision", "disruption"} {
		if err := child(ctx, which, cp.KubeconfigPath(), c.shape, c.changes); err != nil {
			return err
		}
	}
	if c.skipPlan {
		return nil
	}
	dir := c.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "benchscale-"); err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }()
	}
	return benchPlan(ctx, kube, root, dir)
}

// child runs one instance in a new process, so its peak RSS is its own.
func child(ctx context.Context, which, kubeconfig string, s shape, changes int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-instance", which, "-kubeconfig", kubeconfig,
		"-nodes", fmt.Sprint(s.nodes), "-pods", fmt.Sprint(s.pods), "-pending", fmt.Sprint(s.pending),
		"-namespaces", fmt.Sprint(s.namespaces), "-changes", fmt.Sprint(changes))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func createCluster(ctx context.Context, kube client.Client, root string, s shape) error {
	if err := applyFile(ctx, kube, filepath.Join(root, "examples", "nodepool.yaml")); err != nil {
		return err
	}
	for i := range s.namespaces {
		ns := fmt.Sprintf("team-%02d", i)
		if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := kube.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}); err != nil {
			return err
		}
	}
	if err := parallel(ctx, "nodes+nodeclaims", s.nodes, s.workers, func(ctx context.Context, i int) error { return createNode(ctx, kube, i) }); err != nil {
		return err
	}
	if err := parallel(ctx, "PDBs", apps, s.workers, func(ctx context.Context, i int) error { return createPDB(ctx, kube, i, s) }); err != nil {
		return err
	}
	if err := parallel(ctx, "bound pods", s.pods, s.workers, func(ctx context.Context, i int) error { return createPod(ctx, kube, i, s, false) }); err != nil {
		return err
	}
	return parallel(ctx, "pending pods", s.pending, s.workers, func(ctx context.Context, i int) error { return createPod(ctx, kube, i, s, true) })
}

// applyFile creates the objects of a multi-document YAML file.
func applyFile(ctx context.Context, kube client.Client, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	docs := yaml.NewYAMLReader(bufio.NewReader(f))
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
