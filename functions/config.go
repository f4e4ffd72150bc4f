package main

import (
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// App settings the handler reads, beyond pkg/azure's (AZURE_*, ARM_*).
const (
	// EnvKubeconfig is the kubeconfig file for the cluster's API server.
	EnvKubeconfig = "KUBECONFIG"
	// EnvCatalogFile replaces the embedded instance-type catalog.
	EnvCatalogFile = "KARPFUNC_CATALOG_FILE"
)

// dependencies are built on first use and kept for the life of the process
// (one Functions worker serves many invocations). A failure is not cached:
// a setting fixed in the portal takes effect on the next invocation.
type dependencies struct {
	getenv func(string) string
	log    *slog.Logger

	mu                  sync.Mutex
	built               bool
	provisioner         *provisioning.Provisioner
	lifecycleController *lifecycle.Controller
}

func newDependencies(getenv func(string) string, log *slog.Logger) *dependencies {
	return &dependencies{getenv: getenv, log: log}
}

func (d *dependencies) get() (*provisioning.Provisioner, *lifecycle.Controller, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.built {
		return d.provisioner, d.lifecycleController, nil
	}
	kubeconfig := d.getenv(EnvKubeconfig)
	if kubeconfig == "" {
		return nil, nil, fmt.Errorf("app setting %s is not set; point it at a kubeconfig for the cluster", EnvKubeconfig)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig %s (app setting %s): %w", kubeconfig, EnvKubeconfig, err)
	}
	restConfig.QPS, restConfig.Burst = 50, 100
	kube, err := client.New(restConfig, client.Options{Scheme: apis.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	azOpts, err := azure.OptionsFromEnv()
	if err != nil {
		return nil, nil, err
	}
	launcher, err := azure.NewLauncher(azOpts)
	if err != nil {
		return nil, nil, err
	}
	var cat *catalog.Catalog
	if path := d.getenv(EnvCatalogFile); path != "" {
		cat, err = catalog.Load(path)
	} else {
		cat, err = catalog.Default(azOpts.Location)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("loading the instance-type catalog: %w", err)
	}
	clk := clock.RealClock{}
	d.provisioner = provisioning.New(provisioning.Options{Kube: kube, Launcher: launcher, Catalog: cat,
		ClusterName: azOpts.ClusterName, Clock: clk, Logger: d.log})
	d.lifecycleController = lifecycle.New(lifecycle.Options{Kube: kube, Deleter: launcher, Clock: clk, Logger: d.log})
	d.built = true
	return d.provisioner, d.lifecycleController, nil
}
