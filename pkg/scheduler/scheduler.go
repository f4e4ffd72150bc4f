// Package scheduler decides where pending pods go: onto existing nodes and
// in-flight NodeClaims first, then onto new NodeClaims packed first-fit
// decreasing. It is pure: a snapshot in, a plan out, no I/O.
//
// This first engine honours resource requests, nodeSelector, required node
// affinity (OR of terms), tolerations against NodePool taints, NodePool
// requirements, weights and (roughly) limits, and the AKSNodeClass's maxPods.
// It is built on Karpenter's scheduling.Requirements and Taints algebra so
// topology spread, pod (anti-)affinity, preferences and minValues can be
// added without changing its shape. Preferred node affinity is ignored.
package scheduler

import (
	"cmp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Input is a snapshot of the cluster.
type Input struct {
	Pods        []*corev1.Pod // pending pods to place
	Nodes       []*corev1.Node
	BoundPods   []*corev1.Pod // pods already bound to Nodes (consume capacity)
	NodeClaims  []*karpv1.NodeClaim
	NodePools   []*karpv1.NodePool
	NodeClasses []*v1beta1.AKSNodeClass
	DaemonSets  []*appsv1.DaemonSet
	Catalog     *catalog.Catalog
	// Volumes: a pending pod's PVCs pin it to where their bound PVs live
	// (PV node affinity) or where their StorageClass may provision
	// (allowedTopologies).
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
}

// Result is the plan: every input pod appears exactly once across Existing,
// NewNodeClaims and Unschedulable.
type Result struct {
	Existing      []Placement
	NewNodeClaims []*NodeClaimPlan
	Unschedulable []Unschedulable
}

// Placement puts pods on an existing Node or an in-flight NodeClaim. Node is
// empty for a NodeClaim that has no Node yet; NodeClaim is empty for a Node
// Karpenter does not manage.
type Placement struct {
	Node      string
	NodeClaim string
	Pods      []*corev1.Pod
}

// NodeClaimPlan is one NodeClaim to create.
type NodeClaimPlan struct {
	NodePool  *karpv1.NodePool
	NodeClass *v1beta1.AKSNodeClass
	Pods      []*corev1.Pod
	// Requirements are the NodePool's requirements narrowed by the pods', plus
	// node.kubernetes.io/instance-type In InstanceTypes.
	Requirements scheduling.Requirements
	// InstanceTypes fit all Pods plus daemonset overhead, cheapest first. They
	// carry the pods capacity of the AKSNodeClass's maxPods.
	InstanceTypes []*catalog.InstanceType
	// Requests are the pods' requests plus the daemonset overhead.
	Requests corev1.ResourceList
}

// Cheapest returns the cheapest available (instance type, offering) that
// Requirements allow; spot wins whenever it is allowed and cheaper. It
// returns nil when nothing is offered.
func (p *NodeClaimPlan) Cheapest() (*catalog.InstanceType, catalog.Offering) {
	var best *catalog.InstanceType
	var bestOffering catalog.Offering
	for _, it := range p.InstanceTypes {
		if !p.Requirements.Get(corev1.LabelInstanceTypeStable).Has(it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if offeringAllowed(o, p.Requirements) && (best == nil || o.Price < bestOffering.Price) {
				best, bestOffering = it, o
			}
		}
	}
	return best, bestOffering
}

// Unschedulable is a pod no NodePool can take, with a reason a person can act on.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// Solve places in.Pods. It never fails: problems with the input become
// Unschedulable reasons.
func Solve(in Input) Result {
	s := newSolver(in)
	var res Result
	for _, p := range s.pods {
		if s.placeOnExisting(p) {
			continue
		}
		if s.placeOnNewClaim(p) {
			continue
		}
		res.Unschedulable = append(res.Unschedulable, Unschedulable{Pod: p.pod, Reason: s.explain(p)})
	}
	for _, e := range s.existing {
		if len(e.placed) > 0 {
			res.Existing = append(res.Existing, Placement{Node: e.node, NodeClaim: e.claim, Pods: e.placed})
		}
	}
	for _, c := range s.claims {
		res.NewNodeClaims = append(res.NewNodeClaims, c.plan())
	}
	return res
}

func offeringAllowed(o catalog.Offering, reqs scheduling.Requirements) bool {
	return o.Available && reqs.Get(corev1.LabelTopologyZone).Has(o.Zone) && reqs.Get(karpv1.CapacityTypeLabelKey).Has(o.CapacityType)
}

func hasOffering(it *catalog.InstanceType, reqs scheduling.Requirements) bool {
	return slices.ContainsFunc(it.Offerings, func(o catalog.Offering) bool { return offeringAllowed(o, reqs) })
}

// cheapestPrice is the lowest allowed offering price, for sorting options.
func cheapestPrice(it *catalog.InstanceType, reqs scheduling.Requirements) (float64, bool) {
	price, found := 0.0, false
	for _, o := range it.Offerings {
		if offeringAllowed(o, reqs) && (!found || o.Price < price) {
			price, found = o.Price, true
		}
	}
	return price, found
}

func sortByPrice(types []*catalog.InstanceType, reqs scheduling.Requirements) {
	prices := make(map[string]float64, len(types))
	for _, it := range types {
		prices[it.Name], _ = cheapestPrice(it, reqs)
	}
	slices.SortStableFunc(types, func(a, b *catalog.InstanceType) int {
		return cmp.Or(cmp.Compare(prices[a.Name], prices[b.Name]), cmp.Compare(a.Name, b.Name))
	})
}
