// Package localenv starts the whole karpfunc loop on this machine, from real
// parts: the local control plane (etcd, kube-apiserver, controller-manager,
// scheduler, kwok), the ARM emulator, the local Functions host running the
// real handler binary, and the relay as its own process. `make demo` and the
// end-to-end tests both stand on it, so what the demo shows is what is tested.
package localenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/entra"
	"github.com/karpfunc/karpfunc/internal/funchost"
	"github.com/karpfunc/karpfunc/internal/logwriter"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// DefaultSweepSchedule is the Sweep timer as infra/ deploys it.
const DefaultSweepSchedule = "0 */5 * * * *"

// Fixed identities of the local "Azure" the emulator serves.
const (
	SubscriptionID = "00000000-0000-0000-0000-00000000c0de"
	ResourceGroup  = "MC_karpfunc_local_eastus"
)

// Options configure Start.
type Options struct {
	// RepoRoot is the karpfunc checkout (default: found from the working dir).
	RepoRoot string
	// ClusterName is the cluster's name in messages and VM tags (default "local").
	ClusterName string
	// Region is the catalog region (default "eastus").
	Region string
	// OpDelay and BootDelay are the ARM emulator's operation time and the
	// time from VM Succeeded to Node (defaults 200ms and 2s).
	OpDelay, BootDelay time.Duration
	// VMCreateDelay is how long the emulator takes to create a VM
	// (default OpDelay); NICs and deletes take OpDelay.
	VMCreateDelay time.Duration
	// HostSettings are extra app settings for the Functions host, e.g.
	// funchost.FunctionTimeoutSetting.
	HostSettings map[string]string
	// MaxDeliveryCount and RetryDelay configure the local queues (defaults 10, 1s).
	MaxDeliveryCount int
	RetryDelay       time.Duration
	// BatchIdle and BatchMax are the relay's batch windows (defaults 1s, 10s).
	BatchIdle, BatchMax time.Duration
	// EvictionNotice is the ARM emulator's spot-eviction notice (default
	// 30 s, Azure's); EventGridSchema the schema its Event Grid deliveries
	// to the interruption queue use (default EventGridSchema).
	EvictionNotice  time.Duration
	EventGridSchema string
	// SweepSchedule is the Sweep timer's NCRONTAB schedule (default
	// DefaultSweepSchedule, Azure's).
	SweepSchedule string
	// Log receives every process's output (default: a file in the work dir).
	Log io.Writer
	// Progress receives one line per start step (nil: none).
	Progress io.Writer
	// OTLPEndpoint, when set, is the OTEL_EXPORTER_OTLP_ENDPOINT of the
	// handler and the relay (see OTLPEnv).
	OTLPEndpoint string
}

// OTLPEnv are the settings a process exports its telemetry to endpoint
// with: the standard OpenTelemetry settings, with short export intervals
// for the relay's batches (the Functions flush on every invocation) and a
// span queue that holds a burst's passes (a pass makes a request per
// NodeClaim and per pod it nominates; the SDK's default queue of 2,048
// drops the rest).
func OTLPEnv(endpoint string) []string {
	if endpoint == "" {
		return nil
	}
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_BSP_SCHEDULE_DELAY=500", "OTEL_METRIC_EXPORT_INTERVAL=2000",
		"OTEL_BSP_MAX_QUEUE_SIZE=65536"}
}

// Env is a running local environment. Stop it when done.
type Env struct {
	Options      Options
	Dir          string
	ControlPlane *controlplane.ControlPlane
	ARM          *armemulator.Server
	// Entra stands in for Microsoft Entra ID: the handler's managed
	// identity endpoint and the token issuer the API server trusts.
	Entra *entra.Server
	// RelayKubeconfig is the relay's kubeconfig: the chart's ServiceAccount.
	RelayKubeconfig string
	Host            *funchost.Host
	Kube            client.Client
	Catalog         *catalog.Catalog
	LogPath         string

	relay    *exec.Cmd
	relayOut io.Writer
	logFile  *os.File
	stops    []func() error
}

func (o *Options) defaults() error {
	if o.RepoRoot == "" {
		root, err := tools.RepoRoot()
		if err != nil {
			return err
		}
		o.RepoRoot = root
	}
	if o.ClusterName == "" {
		o.ClusterName = "local"
	}
	if o.Region == "" {
		o.Region = "eastus"
	}
	if o.OpDelay == 0 {
		o.OpDelay = 200 * time.Millisecond
	}
	if o.BootDelay == 0 {
		o.BootDelay = 2 * time.Second
	}
	if o.MaxDeliveryCount == 0 {
		o.MaxDeliveryCount = 10
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = time.Second
	}
	if o.BatchIdle == 0 {
		o.BatchIdle = time.Second
	}
	if o.BatchMax == 0 {
		o.BatchMax = 10 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.SweepSchedule == "" {
		o.SweepSchedule = DefaultSweepSchedule
	}
	return nil
}

// Start builds what is missing and starts everything. On error, whatever
// started is stopped again.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "karpfunc-local-")
	if err != nil {
		return nil, err
	}
	env = &Env{Options: opts, Dir: dir}
	env.stops = append(env.stops, func() error { return os.RemoveAll(dir) })
	defer func() {
		if err != nil {
			_ = env.Stop()
			env = nil
		}
	}()
	logw, err := env.openLog()
	if err != nil {
		return env, err
	}
	phases := []func(context.Context, io.Writer) error{env.startControlPlane, env.startARM, env.startHost, env.startClusterSide}
	for _, phase := range phases {
		if err := phase(ctx, logw); err != nil {
			return env, err
		}
	}
	return env, nil
}

// openLog returns Options.Log, or a new log file (LogPath) when it is nil.
func (e *Env) openLog() (io.Writer, error) {
	if e.Options.Log != nil {
		return e.Options.Log, nil
	}
	e.LogPath = filepath.Join(os.TempDir(), "karpfunc-local-"+filepath.Base(e.Dir)+".log")
	logFile, err := os.Create(e.LogPath)
	if err != nil {
		return nil, err
	}
	e.logFile = logFile
	return logFile, nil
}

func (e *Env) step(format string, args ...any) {
	fmt.Fprintf(e.Options.Progress, "  · "+format+"\n", args...)
}

// startControlPlane builds the binaries, starts the Entra ID stand-in and
// the control plane, and opens a client and the region's catalog.
func (e *Env) startControlPlane(ctx context.Context, logw io.Writer) error {
	binDir, err := tools.EnsureBinaries(ctx, e.Options.RepoRoot, e.Options.Progress)
	if err != nil {
		return err
	}
	e.step("building the handler and relay")
	if err := BuildBinaries(ctx, e.Options.RepoRoot, e.Dir); err != nil {
		return err
	}
	authnFlags, err := e.startEntra()
	if err != nil {
		return fmt.Errorf("starting the local Entra ID stand-in: %w", err)
	}
	start := time.Now()
	e.ControlPlane, err = controlplane.Start(ctx, controlplane.Options{
		BinDir: binDir, Log: logw, Kwok: true, ControllerManager: true, Scheduler: true, InstallCRDs: true,
		ExtraAPIServerFlags: authnFlags,
	})
	if err != nil {
		return fmt.Errorf("starting the local control plane: %w", err)
	}
	e.stops = append(e.stops, e.ControlPlane.Stop)
	e.step("control plane up in %s (etcd, kube-apiserver, controller-manager, scheduler, kwok)", time.Since(start).Round(100*time.Millisecond))
	e.Kube, err = client.New(e.ControlPlane.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		return err
	}
	e.Catalog, err = catalog.Default(e.Options.Region)
	return err
}

// startARM starts the ARM emulator and writes its CA certificate to
// armCAFile.
func (e *Env) startARM(ctx context.Context, logw io.Writer) error {
	var err error
	e.ARM, err = armemulator.Start(ctx, e.armOptions(logw))
	if err != nil {
		return fmt.Errorf("starting the ARM emulator: %w", err)
	}
	e.stops = append(e.stops, e.ARM.Close)
	e.step("ARM emulator at %s", e.ARM.URL())
	return os.WriteFile(e.armCAFile(), e.ARM.CACertPEM(), 0o600)
}

func (e *Env) armCAFile() string { return filepath.Join(e.Dir, "arm-ca.pem") }

func (e *Env) armOptions(logw io.Writer) armemulator.Options {
	opts := e.Options
	return armemulator.Options{
		SubscriptionIDs: []string{SubscriptionID}, OpDelay: opts.OpDelay, BootDelay: opts.BootDelay, EvictionNotice: opts.EvictionNotice,
		VMCreateDelay: opts.VMCreateDelay,
		SKUs:          ResourceSKUs(e.Catalog), Subnets: []string{SubnetID()},
		// The cluster's kubelet identity, on which the Functions identity
		// holds Managed Identity Operator (infra/modules/kubelet-identity-access.bicep).
		Identities: []armemulator.Identity{{ResourceID: KubeletIdentityID(), ClientID: KubeletIdentityClientID,
			PrincipalID: KubeletIdentityPrincipalID, CallerMayAssign: true}},
		CallerObjectID: FunctionsPrincipalID,
		// The cluster whose maintenance configurations tests set.
		ManagedClusters: []string{e.ClusterID()},
		// The node resource group AKS creates for outboundType loadBalancer:
		// its subnet is private, so a node reaches the API server only
		// through the load balancer's outbound pool.
		Network: armemulator.AKSNetwork(SubscriptionID, ResourceGroup, opts.Region),
		// The cluster's network profile, as the handler's defaults take it
		// (Azure CNI overlay with Cilium): nodes must be provisioned for it.
		Cluster: armemulator.ManagedCluster{NetworkPlugin: azure.NetworkPluginAzure, NetworkPluginMode: azure.NetworkPluginModeOver,
			NetworkDataplane: azure.NetworkDataplaneCil},
		Kube: e.ControlPlane.RESTConfig(),
		// The VNet resolves the API server's FQDN to the local API server.
		DNS:           map[string]string{e.ControlPlane.APIServerFQDN(): e.ControlPlane.APIServerAddr()},
		Logger:        slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "arm-emulator"),
		NodeResources: catalogNodeResources(e.Catalog),
	}
}

// catalogNodeResources answers the emulator's Node capacity from the
// catalog, with maxPods applied when set: the capacity the engine assumes
// for the size is the one the emulated guest reports. Allocatable is the
// emulated kubelet's own, from the reservations in its flags.
func catalogNodeResources(cat *catalog.Catalog) func(string, int32) (corev1.ResourceList, string, bool) {
	return func(sku string, maxPods int32) (corev1.ResourceList, string, bool) {
		it, ok := cat.Get(sku)
		if !ok {
			return nil, "", false
		}
		if maxPods > 0 {
			it = it.WithMaxPods(maxPods)
		}
		return it.Capacity.DeepCopy(), it.Architecture, true
	}
}

// startHost starts the local Functions host running the handler, and
// routes the emulator's Event Grid events to its bus.
func (e *Env) startHost(ctx context.Context, logw io.Writer) error {
	handlerEnv, err := e.hostHandlerEnv()
	if err != nil {
		return err
	}
	opts := e.Options
	settings := map[string]string{
		bus.EnvProvisionQueue: bus.QueueProvision, bus.EnvLifecycleQueue: bus.QueueLifecycle,
		bus.EnvInterruptionQueue: bus.QueueInterruption, bus.EnvDisruptionQueue: bus.QueueDisruption,
		"SWEEP_SCHEDULE": opts.SweepSchedule,
	}
	maps.Copy(settings, opts.HostSettings)
	e.Host, err = funchost.Start(ctx, funchost.Options{
		AppRoot: opts.RepoRoot, FunctionsDir: "functions", Executable: filepath.Join(e.Dir, "handler"),
		Env:              handlerEnv,
		Settings:         settings,
		MaxDeliveryCount: opts.MaxDeliveryCount, RetryDelay: opts.RetryDelay, Log: logw,
		// The deployment's role assignments: each identity may send and
		// receive only where infra/ grants it.
		Rights: bus.QueueRights,
	})
	if err != nil {
		return fmt.Errorf("starting the local Functions host: %w", err)
	}
	e.stops = append(e.stops, func() error { e.Host.Stop(); return nil })
	// Event Grid's system topic subscription: preemption annotations go to
	// the interruption queue, as infra/ deploys it, sent with the system
	// topic's identity.
	e.ARM.SetEventGrid(armemulator.EventGrid{Publisher: e.Host.Bus().As(bus.IdentityEventGrid), Queue: bus.QueueInterruption,
		Schema: opts.EventGridSchema, Subscription: "karpfunc-interruption"})
	e.step("Functions host serving %d functions, bus at %s", len(e.Host.Functions()), e.Host.BusURL())
	return nil
}

// hostHandlerEnv is the handler's environment in the Functions host.
func (e *Env) hostHandlerEnv() ([]string, error) {
	// One SSH key per environment, as AKS has one per cluster; nobody
	// keeps its private half, so no one can log in to the local "VMs".
	sshKey, err := azure.GenerateSSHPublicKey("karpfunc-local")
	if err != nil {
		return nil, err
	}
	// The handler reaches the API server as it does in AKS: with a token
	// for its managed identity, under the chart's ClusterRole.
	handlerEnv := append(e.handlerEnv(),
		azure.EnvSSHPublicKey+"="+sshKey,
		azure.EnvSubscriptionID+"="+SubscriptionID,
		azure.EnvResourceGroup+"="+ResourceGroup,
		azure.EnvLocation+"="+e.Options.Region,
		azure.EnvClusterName+"="+e.Options.ClusterName,
		azure.EnvSubnetID+"="+SubnetID(),
		azure.EnvEndpoint+"="+e.ARM.URL(),
		azure.EnvCAFile+"="+e.armCAFile(),
		azure.EnvToken+"="+e.ARM.Token(),
		// Nodes reach the API server by its FQDN, as on AKS; the cluster DNS
		// service sits at .10 of the service range.
		azure.EnvClusterEndpoint+"=https://"+e.ControlPlane.APIServerFQDN()+":443",
		azure.EnvDNSServiceIP+"="+ClusterDNSIP,
		// The kubelet identity, named in customData and carried by the VMs,
		// as the preprovision hook sets them from identityProfile.kubeletidentity.
		azure.EnvKubeletIdentityClientID+"="+KubeletIdentityClientID,
		azure.EnvNodeIdentities+"="+KubeletIdentityID(),
		// The managed cluster whose maintenance windows drift waits for
		// (functions' KARPFUNC_CLUSTER_RESOURCE_ID).
		"KARPFUNC_CLUSTER_RESOURCE_ID="+e.ClusterID(),
	)
	return append(handlerEnv, OTLPEnv(e.Options.OTLPEndpoint)...), nil
}

// startClusterSide applies the chart's RBAC and starts the relay.
func (e *Env) startClusterSide(ctx context.Context, logw io.Writer) error {
	var err error
	// The relay runs as the chart's ServiceAccount, with the chart's
	// read-only ClusterRole.
	e.RelayKubeconfig, err = e.installChart(ctx, e.Host.BusURL())
	if err != nil {
		return fmt.Errorf("installing the cluster chart's RBAC: %w", err)
	}
	e.step("chart RBAC applied: handler as user %s, relay as ServiceAccount %s/…", FunctionsPrincipalID, Namespace)
	e.relayOut = logwriter.NewLines(logwriter.NewSynced(logw), "relay | ", 0)
	if err := e.startRelay(); err != nil {
		return err
	}
	e.stops = append(e.stops, func() error { return stopProcess(e.relay, 10*time.Second) })
	e.step("relay watching the cluster")
	return nil
}

// startRelay starts the relay process.
func (e *Env) startRelay() error {
	e.relay = exec.Command(filepath.Join(e.Dir, "relay"),
		"--kubeconfig", e.RelayKubeconfig, "--cluster-name", e.Options.ClusterName,
		"--batch-idle-duration", e.Options.BatchIdle.String(), "--batch-max-duration", e.Options.BatchMax.String(),
		"--health-probe-bind-address", "127.0.0.1:0")
	// The relay names its queues through the same settings as the
	// handler and the triggers, as in Azure, and sends with its own
	// identity's credential.
	e.relay.Env = append(os.Environ(), bus.EnvLocalBusURL+"="+e.Host.BusURL(),
		bus.EnvLocalBusCredential+"="+e.Host.Bus().Credential(bus.IdentityRelay),
		bus.EnvProvisionQueue+"="+bus.QueueProvision, bus.EnvLifecycleQueue+"="+bus.QueueLifecycle,
		bus.EnvInterruptionQueue+"="+bus.QueueInterruption, bus.EnvDisruptionQueue+"="+bus.QueueDisruption)
	e.relay.Env = append(e.relay.Env, OTLPEnv(e.Options.OTLPEndpoint)...)
	e.relay.Stdout = e.relayOut
	e.relay.Stderr = e.relayOut
	setPdeathsig(e.relay)
	if err := e.relay.Start(); err != nil {
		return fmt.Errorf("starting the relay: %w", err)
	}
	return nil
}

// KillRelay kills the relay process at once (SIGKILL: whatever batch it
// was collecting is lost, as when its pod is evicted or its node dies) and
// starts a new one, which announces the pods still pending from its first
// list. It returns when the new process has started.
func (e *Env) KillRelay() error {
	if e.relay == nil || e.relay.Process == nil {
		return fmt.Errorf("the relay is not running")
	}
	_ = e.relay.Process.Kill()
	_ = e.relay.Wait()
	return e.startRelay()
}

// ClusterDNSIP is the cluster DNS service address in the local service range.
const ClusterDNSIP = "10.96.0.10"

// The local cluster's kubelet identity, as AKS creates it (<cluster>-agentpool
// in the node resource group).
const (
	KubeletIdentityClientID    = "0000c0de-0000-4000-8000-0000000c1e47"
	KubeletIdentityPrincipalID = "0000c0de-0000-4000-8000-0000000c1e48"
)

// KubeletIdentityID is the kubelet identity's resource ID.
func KubeletIdentityID() string {
	return "/subscriptions/" + SubscriptionID + "/resourceGroups/" + ResourceGroup +
		"/providers/Microsoft.ManagedIdentity/userAssignedIdentities/karpfunc-local-agentpool"
}

// ClusterResourceGroup is the local AKS cluster's own resource group (its
// nodes are in ResourceGroup).
const ClusterResourceGroup = "karpfunc-local"

// ClusterID is the local AKS cluster's resource ID: the ARM emulator
// serves its maintenance configurations.
func (e *Env) ClusterID() string {
	return "/subscriptions/" + SubscriptionID + "/resourceGroups/" + ClusterResourceGroup +
		"/providers/Microsoft.ContainerService/managedClusters/" + e.Options.ClusterName
}

// SubnetID is the node subnet the local NodeClaims use: the one of the VNet
// AKS manages (aks-vnet-<id>/aks-subnet), private.
func SubnetID() string { return armemulator.AKSSubnetID(SubscriptionID, ResourceGroup) }

// Stop stops everything in reverse order of start and removes the work dir.
// It is safe to call more than once.
func (e *Env) Stop() error {
	var errs []error
	for i := len(e.stops) - 1; i >= 0; i-- {
		if err := e.stops[i](); err != nil {
			errs = append(errs, err)
		}
	}
	e.stops = nil
	if e.logFile != nil {
		errs = append(errs, e.logFile.Close())
		e.logFile = nil
	}
	return errors.Join(errs...)
}

// BuildBinaries builds the handler and relay into dir with `go build`; with
// a warm build cache this takes seconds.
func BuildBinaries(ctx context.Context, repoRoot, dir string) error {
	for _, binary := range []struct{ out, pkg string }{{"handler", "./functions"}, {"relay", "./relay"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, binary.out), binary.pkg)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", binary.pkg, err, out)
		}
	}
	return nil
}
