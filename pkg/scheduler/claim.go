package scheduler

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// claim is a new NodeClaim being packed.
type claim struct {
	pool     *pool
	reqs     scheduling.Requirements
	options  []*poolType // instance types that still fit every pod
	pods     []*corev1.Pod
	requests corev1.ResourceList // pods only; daemon overhead is in each option's room
	// absorbed holds the affinity terms already merged into reqs: a pod with
	// the same term cannot narrow the options by requirements.
	absorbed map[string]bool
	// maxRoom is the component-wise largest room among options, a cheap
	// first test before checking each option.
	maxRoom corev1.ResourceList
	// charge is what this claim holds against its pool's limits.
	charge corev1.ResourceList
}

// add puts p on this claim if some option still fits everything.
func (c *claim) add(p *podInfo) bool {
	total := resources.Merge(c.requests, p.requests)
	if !resources.Fits(total, c.maxRoom) {
		return false
	}
	if c.pool.taints.ToleratesPod(p.pod) != nil {
		return false
	}
	for i, t := range p.terms {
		reqs, narrowed := c.reqs, false
		if !c.absorbed[p.termKeys[i]] {
			if c.reqs.Compatible(t, allowWellKnown) != nil {
				continue
			}
			reqs = copyRequirements(c.reqs)
			reqs.Add(t.Values()...)
			narrowed = true
		}
		var options []*poolType
		for _, o := range c.options {
			if !resources.Fits(total, o.room) {
				continue
			}
			if narrowed && (o.reqs.Intersects(reqs) != nil || !hasOffering(o.it, reqs)) {
				continue
			}
			options = append(options, o)
		}
		if len(options) == 0 {
			continue
		}
		c.reqs, c.options, c.requests = reqs, options, total
		c.pods = append(c.pods, p.pod)
		c.absorbed[p.termKeys[i]] = true
		c.refresh()
		return true
	}
	return false
}

// refresh recomputes what depends on the options.
func (c *claim) refresh() {
	rooms := make([]corev1.ResourceList, len(c.options))
	capacities := make([]corev1.ResourceList, len(c.options))
	for i, o := range c.options {
		rooms[i], capacities[i] = o.room, o.it.Capacity
	}
	c.maxRoom = resources.MaxResources(rooms...)
	if c.pool.limits == nil {
		return
	}
	// Like Karpenter, charge the largest option: the claim might launch it.
	charge := corev1.ResourceList{}
	for name, q := range resources.MaxResources(capacities...) {
		if _, limited := c.pool.limits[name]; limited {
			charge[name] = q
		}
	}
	resources.SubtractFrom(c.pool.planned, c.charge)
	resources.MergeInto(c.pool.planned, charge)
	c.charge = charge
}

func (c *claim) plan() *NodeClaimPlan {
	reqs := copyRequirements(c.reqs)
	types := make([]*catalog.InstanceType, len(c.options))
	names := make([]string, len(c.options))
	for i, o := range c.options {
		types[i], names[i] = o.it, o.it.Name
	}
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	sortByPrice(types, reqs)
	return &NodeClaimPlan{
		NodePool:      c.pool.np,
		NodeClass:     c.pool.class,
		Pods:          c.pods,
		Requirements:  reqs,
		InstanceTypes: types,
		Requests:      resources.Merge(c.requests, c.pool.daemon),
	}
}

// explain says why this pool cannot take p on a new claim; taint reports
// whether the reason is an untolerated taint.
func (pl *pool) explain(p *podInfo) (reason string, taint bool) {
	if pl.invalid != "" {
		return pl.invalid, false
	}
	if err := pl.taints.ToleratesPod(p.pod); err != nil {
		return fmt.Sprintf("NodePool %s: %v", pl.np.Name, err), true
	}
	var compatible []scheduling.Requirements
	var firstErr error
	for _, t := range p.terms {
		if err := pl.reqs.Compatible(t, allowWellKnown); err != nil {
			firstErr = err
			continue
		}
		m := copyRequirements(pl.reqs)
		m.Add(t.Values()...)
		compatible = append(compatible, m)
	}
	if len(compatible) == 0 {
		return fmt.Sprintf("NodePool %s: the pod's node selector/affinity conflicts with the NodePool's requirements: %v", pl.np.Name, firstErr), false
	}
	var allowed []*poolType
	for _, t := range pl.types {
		for _, reqs := range compatible {
			if t.reqs.Intersects(reqs) == nil && hasOffering(t.it, reqs) {
				allowed = append(allowed, t)
				break
			}
		}
	}
	if len(allowed) == 0 {
		return fmt.Sprintf("NodePool %s: no instance type in the catalog matches both the NodePool's and the pod's requirements (%s)", pl.np.Name, compatible[0]), false
	}
	var fitting []*poolType
	for _, t := range allowed {
		if resources.Fits(p.requests, t.room) {
			fitting = append(fitting, t)
		}
	}
	if len(fitting) == 0 {
		return pl.tooBig(p, allowed), false
	}
	if remaining := pl.remaining(); remaining != nil {
		return fmt.Sprintf("NodePool %s: launching another node would exceed its limits (%s; %s already held or planned)",
			pl.np.Name, resources.String(pl.limits), resources.String(resources.Merge(pl.used, pl.planned))), false
	}
	return fmt.Sprintf("NodePool %s: no instance type fits the pod", pl.np.Name), false
}

// tooBig names the first requested resource no allowed type has enough of.
func (pl *pool) tooBig(p *podInfo, allowed []*poolType) string {
	for _, name := range orderedNames(p.requests) {
		want := p.requests[name]
		var best *poolType
		var bestRoom resource.Quantity
		for _, t := range allowed {
			if room := t.room[name]; best == nil || room.Cmp(bestRoom) > 0 {
				best, bestRoom = t, room
			}
		}
		if want.Cmp(bestRoom) <= 0 {
			continue
		}
		if name == corev1.ResourcePods {
			return fmt.Sprintf("NodePool %s: its nodes take at most %s pods (AKSNodeClass maxPods) after daemonsets", pl.np.Name, bestRoom.String())
		}
		capacity := best.it.Capacity[name]
		return fmt.Sprintf("requests %s; the largest allowed SKU in NodePool %s (%s) has %s, %s after AKS reservations and daemonsets",
			describe(name, want), pl.np.Name, best.it.Name, describe(name, capacity), describe(name, bestRoom))
	}
	return fmt.Sprintf("requests %s together; no allowed SKU in NodePool %s has all of it after AKS reservations and daemonsets",
		resources.String(p.requests), pl.np.Name)
}

// orderedNames lists cpu, memory, then other resources alphabetically.
func orderedNames(rl corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := rl[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range rl {
		if n != corev1.ResourceCPU && n != corev1.ResourceMemory {
			rest = append(rest, string(n))
		}
	}
	slices.Sort(rest)
	for _, n := range rest {
		names = append(names, corev1.ResourceName(n))
	}
	return names
}
