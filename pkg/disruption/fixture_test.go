package disruption

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

var (
	catOnce sync.Once
	cat     *catalog.Catalog
	catErr  error
)

func eastus(t testing.TB) *catalog.Catalog {
	catOnce.Do(func() { cat, catErr = catalog.Default("eastus") })
	if catErr != nil {
		t.Fatal(catErr)
	}
	return cat
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t   testing.TB
	c   *snapshot.Cluster
	cat *catalog.Catalog
	np  *karpv1.NodePool
	// opts for Decide
	opts Options
}

func newFixture(t testing.TB) *fixture {
	after := time.Minute
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "general"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: "default"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: "karpenter.azure.com/sku-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"D"}},
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				},
			}},
			Disruption: karpv1.Disruption{ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter: karpv1.MustParseNillableDuration(after.String()),
				Budgets:          []karpv1.Budget{{Nodes: "100%"}}},
		},
	}
	family := "Ubuntu2204"
	class := &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1beta1.AKSNodeClassSpec{ImageFamily: &family}}
	return &fixture{t: t, cat: eastus(t), np: np,
		c: &snapshot.Cluster{NodePools: []*karpv1.NodePool{np}, NodeClasses: []*v1beta1.AKSNodeClass{class}}}
}

// node adds a Ready, Initialized, consolidatable node of type typ.
func (f *fixture) node(name, typ, ct string, mutate ...func(*karpv1.NodeClaim, *corev1.Node)) *karpv1.NodeClaim {
	it, ok := f.cat.Get(typ)
	if !ok {
		f.t.Fatalf("no instance type %s", typ)
	}
	zone := "eastus-1"
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	labels[corev1.LabelInstanceTypeStable] = typ
	labels[corev1.LabelTopologyZone] = zone
	labels[karpv1.CapacityTypeLabelKey] = ct
	labels[karpv1.NodePoolLabelKey] = f.np.Name
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelOSStable] = "linux"
	providerID := "azure:///vm/" + name
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: HashAnnotations(f.np, f.c.NodeClasses[0]), CreationTimestamp: created},
		Spec:       karpv1.NodeClaimSpec{NodeClassRef: f.np.Spec.Template.Spec.NodeClassRef, ExpireAfter: karpv1.MustParseNillableDuration("720h")},
		Status:     karpv1.NodeClaimStatus{NodeName: name, ProviderID: providerID},
	}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable(), Capacity: it.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(nc, node)
	}
	f.c.NodeClaims = append(f.c.NodeClaims, nc)
	f.c.Nodes = append(f.c.Nodes, node)
	return nc
}

func (f *fixture) pod(name, node, cpu, mem string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)}},
	}
	for _, m := range mutate {
		m(p)
	}
	f.c.Pods = append(f.c.Pods, p)
	return p
}

func (f *fixture) pods(prefix, node string, n int, cpu, mem string) {
	for i := 0; i < n; i++ {
		f.pod(fmt.Sprintf("%s-%d", prefix, i), node, cpu, mem)
	}
}

func (f *fixture) decide() Decision {
	return Decide(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: f.opts})
}

func refusalOf(d Decision, name string) string {
	for _, r := range d.Refusals {
		if r.NodeClaim == name {
			return r.Reason
		}
	}
	return ""
}

func names(cs []*Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name()
	}
	return out
}
