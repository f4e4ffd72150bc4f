package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/disruption/live"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/interruption"
	"github.com/karpfunc/karpfunc/pkg/kubeauth"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/maintenance"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/repair"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

// App settings the handler reads, beyond pkg/azure's (AZURE_*, ARM_*).
const (
	// The cluster's API server: KUBECONFIG, or KARPFUNC_API_SERVER_URL and
	// KARPFUNC_API_SERVER_CA with the managed identity (see pkg/kubeauth).
	// EnvCatalogFile replaces the embedded instance-type catalog.
	EnvCatalogFile = "KARPFUNC_CATALOG_FILE"
	// EnvRegistrationTTL is the liveness timeout, a Go duration (default 15m).
	EnvRegistrationTTL = "KARPFUNC_REGISTRATION_TTL"
	// EnvGCGracePeriod is how old an orphaned VM or NIC must be before the
	// Sweep deletes it, a Go duration (default 2m).
	EnvGCGracePeriod = "KARPFUNC_GC_GRACE_PERIOD"
	// EnvLaunchCheckInterval is the first wait before a VM create is
	// looked at again, a Go duration (default 5s; doubling up to 4x).
	EnvLaunchCheckInterval = "KARPFUNC_LAUNCH_CHECK_INTERVAL"
	// EnvNamespace is where karpfunc keeps its state objects (the
	// unavailable-offerings ConfigMap): the namespace the karpfunc chart is
	// installed in, whose Role lets the handler write it. Default karpfunc.
	EnvNamespace = "KARPFUNC_NAMESPACE"
	// EnvSpotNotice is the notice assumed when a PreemptionScheduled
	// condition carries no readable deadline, a Go duration (default 30s).
	EnvSpotNotice = "KARPFUNC_SPOT_NOTICE"
	// EnvSpotToSpot allows consolidation to replace spot nodes with
	// cheaper spot nodes ("true"/"false", default false), Karpenter's
	// SpotToSpotConsolidation feature gate.
	EnvSpotToSpot = "KARPFUNC_SPOT_TO_SPOT_CONSOLIDATION"
	// EnvRebalance adds rebalancing consolidation, beyond Karpenter: a
	// group of nodes replaced by several cheaper nodes of other shapes
	// ("true"/"false", default false).
	EnvRebalance = "KARPFUNC_REBALANCE_CONSOLIDATION"
	// EnvStaticCapacity keeps static NodePools (spec.replicas) at their
	// replica count ("true"/"false", default true: the NodePool CRD offers
	// the field). Off, such a NodePool is refused by name: a
	// ValidationSucceeded=False condition and a Warning event.
	EnvStaticCapacity = "KARPFUNC_STATIC_CAPACITY"
	// EnvNodeOverlay applies NodeOverlays (karpenter.sh/v1alpha1) to
	// prices and capacities ("true"/"false", default true: their CRD is
	// installed). Off, every NodeOverlay is refused by name: a
	// ValidationSucceeded=False condition and a Warning event.
	EnvNodeOverlay = "KARPFUNC_NODE_OVERLAY"
	// EnvCapacityBuffers keeps the room of CapacityBuffers
	// (autoscaling.x-k8s.io/v1beta1; "true"/"false", default true:
	// capacitybuffer.Setting). Off, every buffer is refused by name:
	// ReadyForProvisioning=False and a Warning event.
	EnvCapacityBuffers = "KARPFUNC_CAPACITY_BUFFERS"
	// EnvAPICompression asks the API server for gzip-compressed responses
	// ("true"/"false", default true; see apiCompression).
	EnvAPICompression = "KARPFUNC_API_COMPRESSION"
	// EnvSnapshotCheckShared makes every pass prove it wrote no object its
	// snapshot shares with the warm cache ("true"/"false", default false;
	// snapshot.CacheOptions.CheckShared). A diagnostic: it copies the whole
	// cluster on every pass. The end-to-end tests turn it on.
	EnvSnapshotCheckShared = "KARPFUNC_SNAPSHOT_CHECK_SHARED"
	// EnvClusterResourceID is the AKS cluster's ARM resource ID
	// (/subscriptions/<sub>/resourceGroups/<rg>/providers/
	// Microsoft.ContainerService/managedClusters/<name>): drift
	// replacements start only inside its maintenance windows
	// (pkg/maintenance). Unset: maintenance windows are not read and drift
	// replaces nodes at any time, which the handler logs once.
	EnvClusterResourceID = "KARPFUNC_CLUSTER_RESOURCE_ID"
	// EnvQuotaAware makes provisioning read the subscription's compute
	// quota and plan no launch quota would refuse ("true"/"false", default
	// true; provisioning.Options.Quota). false leaves quota to launch
	// errors and the unavailable-offerings cache they fill.
	EnvQuotaAware = "KARPFUNC_QUOTA_AWARE"
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
	launcher            *azure.Launcher
	gcGrace             time.Duration
	kube                client.Client
	recorder            *events.Recorder
	interruptionCtrl    *interruption.Controller
	notice              time.Duration
	disruptionCtrl      *live.Controller
	repairCtrl          *repair.Controller
	pub                 bus.Publisher
	cluster             string
}

// kubeClient is the Kubernetes client once built (nil before the first
// successful get).
func (d *dependencies) kubeClient() client.Client {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kube
}

// publisher sends the continuations once the dependencies are built (nil
// before).
func (d *dependencies) publisher() bus.Publisher {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pub
}

// eventRecorder writes events once the dependencies are built.
func (d *dependencies) eventRecorder() *events.Recorder {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.recorder
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
	// Refuse before touching anything when NAP runs the nodes.
	if err := checkNodeProvisioningMode(d.getenv); err != nil {
		return nil, nil, err
	}
	restConfig, err := handlerRESTConfig(d.getenv)
	if err != nil {
		return nil, nil, err
	}
	kube, err := client.NewWithWatch(restConfig, client.Options{Scheme: apis.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	snapKube, err := d.cachedKube(kube, restConfig)
	if err != nil {
		return nil, nil, err
	}
	azOpts, err := azure.OptionsFromEnv()
	if err != nil {
		return nil, nil, err
	}
	regTTL, err := d.duration(EnvRegistrationTTL, lifecycle.DefaultRegistrationTTL)
	if err != nil {
		return nil, nil, err
	}
	var kubeVersion *kubernetesVersion
	if azOpts.Bootstrap, azOpts.BootstrapTokens, kubeVersion, err = nodeBootstrap(restConfig, kube, d.getenv, regTTL, d.log); err != nil {
		return nil, nil, err
	}
	azOpts.KubernetesVersion = kubeVersion.Get
	// The max pods of a node whose AKSNodeClass sets none, by the cluster's
	// network: the scheduler plans with it and the node is launched with it.
	maxPods := azure.DefaultMaxPods(*azOpts.Bootstrap)
	launcher, err := azure.NewLauncher(azOpts)
	if err != nil {
		return nil, nil, err
	}
	// Both settings are read before either error is returned: a bad
	// static-capacity setting and a bad catalog are reported together.
	static, staticErr := boolSetting(d.getenv, EnvStaticCapacity, true)
	overlayOn, overlayErr := boolSetting(d.getenv, EnvNodeOverlay, true)
	buffers, buffersErr := boolSetting(d.getenv, EnvCapacityBuffers, true)
	cat, err := loadCatalog(d.getenv, azOpts.Location)
	if err = errors.Join(staticErr, overlayErr, buffersErr, err); err != nil {
		return nil, nil, err
	}
	// What AKSNodeClass status is resolved against (nodepoolstatus).
	statusOpts := &nodepoolstatus.ClassOptions{DefaultSubnetID: azOpts.SubnetID, NodeResourceGroup: azOpts.ResourceGroup,
		KubernetesVersion: azOpts.Bootstrap.KubernetesVersion, Versions: kubeVersion.Status, Images: launcher.Images(),
		RefuseStatic: !static}
	waits, err := d.waits()
	if err != nil {
		return nil, nil, err
	}
	pub, err := continuationPublisher()
	if err != nil {
		return nil, nil, err
	}
	clk := clock.RealClock{}
	rec := decisionRecorder(d.getenv, d.log)
	overlays := nodeoverlay.NewSource(nodeoverlay.SourceOptions{Kube: kube, Disabled: !overlayOn, Clock: clk, Logger: d.log})
	unavailable := offerings.NewStore(kube, d.getenv(EnvNamespace), "", clk)
	d.provisioner = provisioning.New(provisioning.Options{Kube: snapKube, Catalog: cat, ClusterName: azOpts.ClusterName, Clock: clk,
		Logger: d.log, Offerings: unavailable, Quota: quotaReader(waits.quotaAware, launcher), Namespace: d.getenv(EnvNamespace), Status: statusOpts, DefaultMaxPods: maxPods,
		DisableStaticCapacity: !static, Overlays: overlays, DisableCapacityBuffers: !buffers})
	evictor, err := lifecycle.NewEvictor(restConfig)
	if err != nil {
		return nil, nil, err
	}
	// Lifecycle launches (its first reconciler) through the provider
	// contract; only this wiring knows the contract is Azure's.
	d.lifecycleController = lifecycle.New(lifecycle.Options{Kube: kube, Deleter: launcher, Evictor: evictor, Clock: clk, Logger: d.log,
		ClusterName: azOpts.ClusterName, Publisher: pub, RegistrationTTL: regTTL, Namespace: d.getenv(EnvNamespace),
		Launch: &lifecycle.LaunchOptions{Creator: launcher, Catalog: cat, Offerings: unavailable, CheckInterval: waits.launchCheck, Decisions: rec,
			DefaultMaxPods: maxPods, Overlays: overlays}})
	d.launcher = launcher
	d.gcGrace = waits.gcGrace
	d.notice = waits.notice
	d.kube, d.recorder = kube, events.NewRecorder(kube, clk)
	d.interruptionCtrl = interruption.New(interruption.Options{Kube: kube, Lifecycle: d.lifecycleController, Evacuator: d.provisioner,
		Offerings: unavailable, Clock: clk, Logger: d.log,
		ClusterName: azOpts.ClusterName, Decisions: rec})
	// A bad repair setting and a bad disruption setting are reported together.
	repairCtrl, repairErr := d.repairController(kube, azOpts.ClusterName, clk)
	engine, windows, err := d.disruptionSettings(launcher, clk)
	engine.DefaultMaxPods = maxPods
	if err = errors.Join(repairErr, err); err != nil {
		return nil, nil, err
	}
	d.disruptionCtrl = live.New(live.Options{Kube: snapKube, Catalog: cat, Replacer: d.provisioner,
		ClusterName: azOpts.ClusterName, Clock: clk, Logger: d.log, Decisions: rec, Engine: engine, Status: statusOpts,
		Versions: live.NodeVersions{Images: launcher.Images(), Kubernetes: kubeVersion.Get}, Maintenance: windows, Overlays: overlays, DisableCapacityBuffers: !buffers})
	d.pub, d.cluster, d.repairCtrl = pub, azOpts.ClusterName, repairCtrl
	d.built = true
	return d.provisioner, d.lifecycleController, nil
}

// disruptionSettings are the disruption engine's options and the
// maintenance windows drift waits for.
func (d *dependencies) disruptionSettings(launcher *azure.Launcher, clk clock.PassiveClock) (disruption.Options, live.MaintenanceSource, error) {
	engine, err := disruptionOptions(d.getenv)
	if err != nil {
		return engine, nil, err
	}
	windows, err := d.maintenanceWindows(launcher, clk)
	return engine, windows, err
}

// maintenanceWindows reads the cluster's maintenance configurations named
// by KARPFUNC_CLUSTER_RESOURCE_ID (nil when unset, said once in the log).
func (d *dependencies) maintenanceWindows(launcher *azure.Launcher, clk clock.PassiveClock) (live.MaintenanceSource, error) {
	id := d.getenv(EnvClusterResourceID)
	if id == "" {
		d.log.Info("maintenance windows are not read: drift replaces nodes at any time", "setting", EnvClusterResourceID)
		return nil, nil
	}
	sub, rg, name, err := maintenance.ParseClusterID(id)
	if err != nil {
		return nil, fmt.Errorf("app setting %s: %w", EnvClusterResourceID, err)
	}
	client, err := launcher.MaintenanceConfigurations(sub)
	if err != nil {
		return nil, err
	}
	return maintenance.NewReader(maintenance.Options{Lister: maintenance.ARMLister{Client: client, ResourceGroup: rg, Cluster: name},
		Clock: clk, Logger: d.log}), nil
}

// loadCatalog is the instance-type catalog: KARPFUNC_CATALOG_FILE, or the
// embedded one for location.
func loadCatalog(getenv func(string) string, location string) (*catalog.Catalog, error) {
	var cat *catalog.Catalog
	var err error
	if path := getenv(EnvCatalogFile); path != "" {
		cat, err = catalog.Load(path)
	} else {
		cat, err = catalog.Default(location)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the instance-type catalog: %w", err)
	}
	return cat, nil
}

// continuationPublisher sends the continuations the Functions ask for
// (liveness checks, drain retries, passes); they continue the trace of
// the message that asked.
func continuationPublisher() (bus.Publisher, error) {
	pub, err := bus.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("the Functions send themselves scheduled messages (liveness checks, drain retries): %w", err)
	}
	return telemetry.TracingPublisher(pub), nil
}

// disruptionOptions are the disruption engine's settings.
func disruptionOptions(getenv func(string) string) (disruption.Options, error) {
	engine := disruption.Options{TimeLimit: time.Minute}
	for _, setting := range []struct {
		name string
		to   *bool
	}{{EnvSpotToSpot, &engine.SpotToSpot}, {EnvRebalance, &engine.Rebalance}} {
		enabled, err := boolSetting(getenv, setting.name, false)
		if err != nil {
			return engine, err
		}
		*setting.to = enabled
	}
	return engine, nil
}

// handlerRESTConfig is how the handler reaches the API server: its
// rate limit, compression setting and a span per call.
func handlerRESTConfig(getenv func(string) string) (*rest.Config, error) {
	restConfig, err := kubeauth.RESTConfig(getenv, nil)
	if err != nil {
		return nil, err
	}
	restConfig.QPS, restConfig.Burst = 50, 100
	compress, err := apiCompression(getenv)
	if err != nil {
		return nil, err
	}
	restConfig.DisableCompression = !compress
	restConfig.Wrap(telemetry.WrapKubeTransport) // a span per API call
	return restConfig, nil
}

// cachedKube is kube with the passes' snapshots coming from a cache kept
// for the instance's life (listed once, then watched; fresh as of each
// pass: package snapshot).
func (d *dependencies) cachedKube(kube client.WithWatch, restConfig *rest.Config) (*snapshot.Cached, error) {
	opts, err := d.cacheOptions(restConfig)
	if err != nil {
		return nil, err
	}
	return snapshot.WithCache(kube, snapshot.NewCache(kube, opts)), nil
}

// cacheOptions are the warm cache's options: pods and nodes read by a
// PageReader, and KARPFUNC_SNAPSHOT_CHECK_SHARED.
func (d *dependencies) cacheOptions(restConfig *rest.Config) (snapshot.CacheOptions, error) {
	pages, err := snapshot.NewPageReader(restConfig)
	if err != nil {
		return snapshot.CacheOptions{}, err
	}
	checkShared, err := boolSetting(d.getenv, EnvSnapshotCheckShared, false)
	if err != nil {
		return snapshot.CacheOptions{}, err
	}
	return snapshot.CacheOptions{Logger: d.log, Pages: pages, CheckShared: checkShared}, nil
}

// apiCompression: whether the handler asks the API server for gzip
// (KARPFUNC_API_COMPRESSION, default true, client-go's default).
// kube-apiserver gzips every response over 128 KB at level 1 when asked
// (k8s.io/apiserver pkg/endpoints/handlers/responsewriters/writers.go,
// defaultGzipContentEncodingLevel). Kubernetes advises turning it off on
// ample links: rest.Config.DisableCompression is "recommended when
// clients communicate primarily over high bandwidth / low latency
// networks" (kubernetes/kubernetes PR #80919), kubectl
// --disable-compression "can help improve list call latencies
// significantly when client-server network bandwidth is ample (>30MB/s)
// or if the server is CPU-constrained" (kubernetes/kubernetes PR #112580).
// It stays on by default because pods compress about 20 to 1: writing a
// LIST whole over HTTP/2 and TLS costs the API server more than gzip does,
// the instance spends on TLS records and HTTP/2 frames what it saves on
// gunzip, and a cold pass moves a twentieth of the bytes over a real link
// (docs/performance.md). false is there for a cluster whose objects
// compress less.
func apiCompression(getenv func(string) string) (bool, error) {
	return boolSetting(getenv, EnvAPICompression, true)
}

// boolSetting reads a "true"/"false" app setting, def when unset.
func boolSetting(getenv func(string) string, name string, def bool) (bool, error) {
	value := getenv(name)
	if value == "" {
		return def, nil
	}
	enabled, err := strconv.ParseBool(value)
	if err != nil {
		return def, fmt.Errorf("app setting %s=%q is not true or false", name, value)
	}
	return enabled, nil
}

// quotaReader is what provisioning reads the subscription's quota
// through: the launcher, or nil (no quota awareness) when aware is false.
func quotaReader(aware bool, launcher *azure.Launcher) provisioning.UsageReader {
	if !aware {
		return nil
	}
	return launcher
}

// waitSettings are the app settings that say how long to wait, and
// whether provisioning reads the subscription's quota.
type waitSettings struct {
	gcGrace, launchCheck, notice time.Duration
	quotaAware                   bool
}

// waits reads KARPFUNC_GC_GRACE_PERIOD, KARPFUNC_LAUNCH_CHECK_INTERVAL,
// KARPFUNC_SPOT_NOTICE and KARPFUNC_QUOTA_AWARE.
func (d *dependencies) waits() (waitSettings, error) {
	var waits waitSettings
	var err error
	if waits.quotaAware, err = boolSetting(d.getenv, EnvQuotaAware, true); err != nil {
		return waits, err
	}
	if waits.gcGrace, err = d.duration(EnvGCGracePeriod, lifecycle.DefaultGCGracePeriod); err != nil {
		return waits, err
	}
	if waits.launchCheck, err = d.duration(EnvLaunchCheckInterval, lifecycle.DefaultLaunchCheckInterval); err != nil {
		return waits, err
	}
	waits.notice, err = d.duration(EnvSpotNotice, interruption.DefaultNotice)
	return waits, err
}

// duration reads a Go duration app setting, def when unset.
func (d *dependencies) duration(name string, def time.Duration) (time.Duration, error) {
	value := d.getenv(name)
	if value == "" {
		return def, nil
	}
	dur, err := time.ParseDuration(value)
	if err != nil || dur <= 0 {
		return 0, fmt.Errorf("app setting %s=%q is not a positive Go duration (e.g. 15m, 90s)", name, value)
	}
	return dur, nil
}

// nodeBootstrap is what every launched VM needs to join: the cluster side
// of its customData (app settings, the API server's CA and version),
// karpfunc's own TLS bootstrap tokens, valid for longer than a VM may take
// to register, and the cluster's Kubernetes version as it changes.
func nodeBootstrap(restConfig *rest.Config, kube client.Client, getenv func(string) string, regTTL time.Duration, log *slog.Logger) (*azure.ClusterBootstrap, azure.TokenSource, *kubernetesVersion, error) {
	ca := restConfig.CAData
	if len(ca) == 0 && restConfig.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(restConfig.CAFile); err != nil {
			return nil, nil, nil, fmt.Errorf("reading the cluster CA %s: %w", restConfig.CAFile, err)
		}
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("building the discovery client: %w", err)
	}
	kv := &kubernetesVersion{setting: strings.TrimSpace(getenv(azure.EnvKubernetesVersion)), disco: disco, now: time.Now}
	v, err := disco.ServerVersion()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the API server's version (nodes run the same kubelet version): %w", err)
	}
	cb, err := azure.ClusterBootstrapFromEnv(getenv, ca, v.GitVersion)
	if err != nil {
		return nil, nil, nil, err
	}
	minValid := max(bootstraptoken.DefaultMinValid, regTTL+15*time.Minute)
	tokens, err := bootstraptoken.New(bootstraptoken.Options{Kube: kube, MinValidity: minValid, TTL: 2 * minValid, Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	kv.version, kv.until = strings.TrimPrefix(v.GitVersion, "v"), time.Now().Add(KubernetesVersionTTL) // the read above
	return &cb, tokens, kv, nil
}

// interruption returns the interruption controller.
func (d *dependencies) interruption() (*interruption.Controller, error) {
	if _, _, err := d.get(); err != nil {
		return nil, err
	}
	return d.interruptionCtrl, nil
}

// disruption returns the disruption controller.
func (d *dependencies) disruption() (*live.Controller, error) {
	if _, _, err := d.get(); err != nil {
		return nil, err
	}
	return d.disruptionCtrl, nil
}

// kube returns the Kubernetes client.
func (d *dependencies) readyKube() (client.Client, error) {
	if _, _, err := d.get(); err != nil {
		return nil, err
	}
	return d.kubeClient(), nil
}

func (d *dependencies) now() time.Time { return time.Now() }
