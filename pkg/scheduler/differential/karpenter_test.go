package differential

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/awslabs/operatorpkg/status"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kcp "sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	kscheduling "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/options"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func init() {
	// Karpenter resolves a NodePool's nodeClassRef through client-go's
	// scheme (utils/nodepool.IsManaged): the AKSNodeClass is registered
	// there so the same NodePools, unchanged, are managed by the cloud
	// provider below.
	if err := v1beta1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	crlog.SetLogger(logr.Discard())
}

// cloudProvider is Karpenter's cloud provider interface over the test
// catalog: every NodePool gets the same instance types; nothing is ever
// launched (the scheduler only asks for instance types).
type cloudProvider struct {
	types []*kcp.InstanceType
}

var errNotLaunching = errors.New("the differential test only schedules")

func (c *cloudProvider) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, errNotLaunching
}
func (c *cloudProvider) Delete(context.Context, *karpv1.NodeClaim) error { return errNotLaunching }
func (c *cloudProvider) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, errNotLaunching
}
func (c *cloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, nil }
func (c *cloudProvider) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*kcp.InstanceType, error) {
	return c.types, nil
}
func (c *cloudProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (kcp.DriftReason, error) {
	return "", nil
}
func (c *cloudProvider) RepairPolicies() []kcp.RepairPolicy { return nil }
func (c *cloudProvider) Name() string                       { return "differential" }
func (c *cloudProvider) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&v1beta1.AKSNodeClass{}}
}

// karpenterOptions are Karpenter's defaults (pkg/operator/options): one
// CPU, preferences respected, minValues strict, DRA ignored.
func karpenterOptions() *options.Options {
	return &options.Options{
		CPURequests:       1000,
		PreferencePolicy:  options.PreferencePolicyRespect,
		MinValuesPolicy:   options.MinValuesPolicyStrict,
		IgnoreDRARequests: true,
		FeatureGates:      options.FeatureGates{ReservedCapacity: true},
	}
}

// runKarpenter schedules the scenario's pending pods as Karpenter's
// provisioner does one scheduling loop (Provisioner.Schedule): its
// NewScheduler (NodePools listed, ordered by weight, their instance types,
// topology, DaemonSet pods) over the cluster state of the scenario's
// nodes, Solve, then TruncateInstanceTypes.
func runKarpenter(sc *scenario, cat *catalog.Catalog) (*plan, error) {
	sc = sc.deepCopy()
	opts := karpenterOptions()
	ctx := options.ToContext(context.Background(), opts)
	kube := fakeClient(sc)
	cp := &cloudProvider{types: karpenterTypes(cat)}
	clk := clock.RealClock{}
	cluster := state.NewCluster(clk, kube, cp)
	for _, nc := range sc.NodeClaims {
		cluster.UpdateNodeClaim(nc)
	}
	for _, n := range sc.Nodes {
		if err := cluster.UpdateNode(ctx, n); err != nil {
			return nil, fmt.Errorf("karpenter state: node %s: %w", n.Name, err)
		}
	}
	for _, p := range sc.Bound {
		if err := cluster.UpdatePod(ctx, p); err != nil {
			return nil, fmt.Errorf("karpenter state: pod %s: %w", p.Name, err)
		}
	}
	prov := provisioning.NewProvisioner(kube, events.NewRecorder(&record.FakeRecorder{}), cp, cluster, clk, nil, nil)
	schedOpts := []kscheduling.Options{
		kscheduling.DisableReservedCapacityFallback,
		kscheduling.NumConcurrentReconciles(1),
		kscheduling.MinValuesPolicy(opts.MinValuesPolicy),
	}
	s, err := prov.NewScheduler(ctx, sc.Pods, cluster.DeepCopyNodes().Active(), sets.New[types.UID](), schedOpts...)
	out := &plan{Who: "karpenter", OnExisting: map[string][]*corev1.Pod{}, Pending: map[string]string{}}
	if errors.Is(err, provisioning.ErrNodePoolsNotFound) {
		for _, p := range sc.Pods {
			out.Pending[p.Name] = "no dynamic nodepools found"
		}
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("karpenter NewScheduler: %w", err)
	}
	res, err := s.Solve(ctx, sc.Pods)
	if err != nil {
		return nil, fmt.Errorf("karpenter Solve: %w", err)
	}
	res = res.TruncateInstanceTypes(ctx, kscheduling.MaxInstanceTypes)
	for _, nc := range res.NewNodeClaims {
		var names []string
		for _, it := range nc.InstanceTypeOptions {
			names = append(names, it.Name)
		}
		sort.Strings(names)
		out.addNew(cat, nc.NodePoolName, names, nc.Requirements, nc.Pods)
	}
	for _, n := range res.ExistingNodes {
		if len(n.Pods) > 0 {
			out.OnExisting[n.Name()] = append(out.OnExisting[n.Name()], n.Pods...)
		}
	}
	for p, err := range res.PodErrors {
		out.Pending[p.Name] = err.Error()
	}
	out.account(sc)
	return out, nil
}

// fakeClient is a controller-runtime fake client holding the scenario's
// objects, with the field indexes Karpenter's cluster state and
// provisioner list by (as Karpenter's test environment registers them).
func fakeClient(sc *scenario) client.Client {
	var objs []client.Object
	for _, np := range sc.NodePools {
		markReady(np)
		objs = append(objs, np)
	}
	objs = append(objs, &v1beta1.AKSNodeClass{ObjectMeta: objectMeta("default")})
	for _, ds := range sc.DaemonSets {
		objs = append(objs, ds)
	}
	for _, n := range sc.Nodes {
		objs = append(objs, n)
	}
	for _, nc := range sc.NodeClaims {
		objs = append(objs, nc)
	}
	for _, p := range sc.Bound {
		objs = append(objs, p)
	}
	for _, p := range sc.Pods {
		objs = append(objs, p)
	}
	return fakecr.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&karpv1.NodeClaim{}, "status.providerID", func(o client.Object) []string { return []string{o.(*karpv1.NodeClaim).Status.ProviderID} }).
		Build()
}

// markReady sets the NodePool's conditions as Karpenter's NodePool
// controllers do for a valid NodePool whose node class is ready.
func markReady(np *karpv1.NodePool) {
	np.StatusConditions().SetTrue(karpv1.ConditionTypeValidationSucceeded)
	np.StatusConditions().SetTrue(karpv1.ConditionTypeNodeClassReady)
}
