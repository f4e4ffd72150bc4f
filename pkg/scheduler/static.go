package scheduler

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// StaticPlan is the NodeClaim a static NodePool (spec.replicas) launches to
// reach its replica count: no pods, the pool's requirements, every instance
// type the pool can launch (cheapest first) and the pool's DaemonSet
// overhead as requests, as Karpenter's static provisioning creates a
// NodeClaim from the NodePool's template alone
// (pkg/controllers/static/provisioning/controller.go:109-115). in.Pods is
// ignored. It returns "" and the plan, or why the pool can launch nothing.
func StaticPlan(in Input, np *karpv1.NodePool) (*NodeClaimPlan, string) {
	dynamic := np.DeepCopy()
	dynamic.Spec.Replicas = nil
	in.Pods, in.NodePools = nil, []*karpv1.NodePool{dynamic}
	s := newSolver(in, false)
	if len(s.pools) != 1 {
		return nil, "NodePool " + np.Name + " is being deleted"
	}
	pl := s.pools[0]
	if pl.invalid != "" {
		return nil, pl.invalid
	}
	type option struct {
		t     *ptype
		price float64
	}
	opts := make([]option, 0, len(pl.types))
	for _, instType := range pl.types {
		if price, ok := instType.cheapest(^uint64(0)); ok {
			opts = append(opts, option{instType, price})
		}
	}
	if len(opts) == 0 {
		return nil, "NodePool " + np.Name + " allows no instance type with an available offering"
	}
	slices.SortFunc(opts, func(a, b option) int {
		return cmp.Or(cmp.Compare(a.price, b.price), cmp.Compare(a.t.it.Name, b.t.it.Name))
	})
	types := make([]*catalog.InstanceType, len(opts))
	names := make([]string, len(opts))
	for i, opt := range opts {
		types[i], names[i] = opt.t.it, opt.t.it.Name
	}
	reqs := copyRequirements(pl.reqs)
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	return &NodeClaimPlan{NodePool: np, NodeClass: pl.class, Requirements: reqs, InstanceTypes: types,
		Requests: opts[0].t.daemon.DeepCopy()}, ""
}
