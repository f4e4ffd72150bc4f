package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

var allowWellKnown = scheduling.AllowUndefinedWellKnownLabels

// pool is a NodePool ready for packing.
type pool struct {
	np      *karpv1.NodePool
	class   *v1beta1.AKSNodeClass
	maxPods int32
	// invalid says why the pool can take no pod at all (e.g. missing class).
	invalid string
	reqs    scheduling.Requirements
	taints  scheduling.Taints
	types   []*poolType
	// daemon is the requests of the daemonsets that would run on its nodes.
	daemon corev1.ResourceList
	// limits are the NodePool's limits; used is what existing NodeClaims
	// hold, planned what open claims could grow to (their largest option).
	limits, used corev1.ResourceList
	planned      corev1.ResourceList
}

// poolType is an instance type as this pool would launch it.
type poolType struct {
	it   *catalog.InstanceType
	reqs scheduling.Requirements
	// room is allocatable minus daemonset overhead: what pending pods can use.
	room corev1.ResourceList
}

func newPools(in Input) []*pool {
	classes := map[string]*v1beta1.AKSNodeClass{}
	for _, c := range in.NodeClasses {
		classes[c.Name] = c
	}
	nps := slices.Clone(in.NodePools)
	slices.SortStableFunc(nps, func(a, b *karpv1.NodePool) int {
		return cmp.Or(-cmp.Compare(ptrOr(a.Spec.Weight, 0), ptrOr(b.Spec.Weight, 0)), cmp.Compare(a.Name, b.Name))
	})
	var pools []*pool
	for _, np := range nps {
		if np.DeletionTimestamp != nil {
			continue
		}
		pools = append(pools, newPool(np, classes, in))
	}
	return pools
}

func newPool(np *karpv1.NodePool, classes map[string]*v1beta1.AKSNodeClass, in Input) *pool {
	pl := &pool{np: np, maxPods: v1beta1.DefaultMaxPods}
	ref := np.Spec.Template.Spec.NodeClassRef
	switch {
	case ref == nil:
		pl.invalid = fmt.Sprintf("NodePool %s has no nodeClassRef; point it at an AKSNodeClass (group karpenter.azure.com)", np.Name)
		return pl
	case ref.Group != v1beta1.SchemeGroupVersion.Group || ref.Kind != "AKSNodeClass":
		pl.invalid = fmt.Sprintf("NodePool %s references %s %q in group %q; karpfunc launches only AKSNodeClass (group karpenter.azure.com)", np.Name, ref.Kind, ref.Name, ref.Group)
		return pl
	case classes[ref.Name] == nil:
		pl.invalid = fmt.Sprintf("NodePool %s references AKSNodeClass %q which does not exist", np.Name, ref.Name)
		return pl
	}
	pl.class = classes[ref.Name]
	pl.maxPods = *pl.class.DefaultedSpec().MaxPods
	if in.Catalog == nil {
		pl.invalid = "no instance-type catalog was given to the scheduler"
		return pl
	}

	// As Karpenter's NodeClaimTemplate: template requirements, template
	// labels and the nodepool label.
	pl.reqs = scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	pl.reqs.Add(scheduling.NewLabelRequirements(np.Spec.Template.Labels).Values()...)
	pl.reqs.Add(scheduling.NewRequirement(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, np.Name))
	pl.taints = np.Spec.Template.Spec.Taints

	var daemonPods []*corev1.Pod
	for _, ds := range in.DaemonSets {
		pod := &corev1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: ds.Spec.Template.Spec}
		if pl.taints.ToleratesPod(pod) != nil {
			continue
		}
		if slices.ContainsFunc(newPodInfo(pod).terms, func(t scheduling.Requirements) bool { return pl.reqs.Compatible(t, allowWellKnown) == nil }) {
			daemonPods = append(daemonPods, pod)
		}
	}
	pl.daemon = corev1.ResourceList{}
	if len(daemonPods) > 0 {
		pl.daemon = resources.RequestsForPods(daemonPods...)
	}

	for _, it := range in.Catalog.InstanceTypes {
		it = it.WithMaxPods(pl.maxPods)
		reqs := it.Requirements()
		if reqs.Intersects(pl.reqs) != nil || !hasOffering(it, pl.reqs) {
			continue
		}
		pl.types = append(pl.types, &poolType{it: it, reqs: reqs, room: resources.Subtract(it.Allocatable(), pl.daemon)})
	}

	if len(np.Spec.Limits) > 0 {
		pl.limits = corev1.ResourceList(np.Spec.Limits).DeepCopy()
		pl.planned = corev1.ResourceList{}
		var held []corev1.ResourceList
		for _, nc := range in.NodeClaims {
			if nc.Labels[karpv1.NodePoolLabelKey] == np.Name {
				held = append(held, claimCapacity(nc, in.Catalog, pl.maxPods))
			}
		}
		pl.used = resources.Merge(held...)
	}
	return pl
}

// claimCapacity is what a NodeClaim counts against its pool's limits: the
// launched capacity, else the largest instance type it could become.
func claimCapacity(nc *karpv1.NodeClaim, c *catalog.Catalog, maxPods int32) corev1.ResourceList {
	if len(nc.Status.Capacity) > 0 {
		return nc.Status.Capacity
	}
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	var caps []corev1.ResourceList
	for _, name := range reqs.Get(corev1.LabelInstanceTypeStable).Values() {
		if it, ok := c.Get(name); ok {
			caps = append(caps, it.WithMaxPods(maxPods).Capacity)
		}
	}
	return resources.MaxResources(caps...)
}

// remaining is how much more capacity the pool may launch, or nil if unlimited.
func (pl *pool) remaining() corev1.ResourceList {
	if pl.limits == nil {
		return nil
	}
	left := corev1.ResourceList{}
	for name, limit := range pl.limits {
		limit = limit.DeepCopy()
		if q, ok := pl.used[name]; ok {
			limit.Sub(q)
		}
		if q, ok := pl.planned[name]; ok {
			limit.Sub(q)
		}
		left[name] = limit
	}
	return left
}

// admits returns each of the pod's affinity terms this pool can satisfy,
// merged with the pool's requirements.
func (pl *pool) admits(p *podInfo) []scheduling.Requirements {
	if pl.invalid != "" || pl.taints.ToleratesPod(p.pod) != nil {
		return nil
	}
	var merged []scheduling.Requirements
	for _, t := range p.terms {
		if pl.reqs.Compatible(t, allowWellKnown) != nil {
			continue
		}
		m := copyRequirements(pl.reqs)
		m.Add(t.Values()...)
		merged = append(merged, m)
	}
	return merged
}

// open starts a new claim for p, or returns nil if the pool cannot take it.
func (pl *pool) open(p *podInfo) *claim {
	remaining := pl.remaining()
	for i, reqs := range pl.admits(p) {
		var options []*poolType
		for _, t := range pl.types {
			if remaining != nil && !fitsLimits(t.it.Capacity, remaining) {
				continue
			}
			if resources.Fits(p.requests, t.room) && t.reqs.Intersects(reqs) == nil && hasOffering(t.it, reqs) {
				options = append(options, t)
			}
		}
		if len(options) == 0 {
			continue
		}
		c := &claim{pool: pl, reqs: reqs, options: options, requests: p.requests.DeepCopy(), pods: []*corev1.Pod{p.pod},
			absorbed: map[string]bool{p.termKeys[i]: true}}
		c.refresh()
		return c
	}
	return nil
}

func copyRequirements(r scheduling.Requirements) scheduling.Requirements {
	out := make(scheduling.Requirements, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
