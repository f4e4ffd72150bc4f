package disruption

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Simulation is what pkg/scheduler says would happen to the candidates'
// pods if the candidates were gone.
type Simulation struct {
	Result scheduler.Result
	// Unplaced explains the first candidate pod nothing could take ("" if
	// all were placed).
	Unplaced string
}

// Simulate removes the candidates (and nodes already leaving) from the
// cluster and asks the scheduler where their pods would go.
func (e *Engine) Simulate(cands []*Candidate) Simulation {
	return simulation(scheduler.Solve(e.simInput(cands, e.withBuffers(movedPods(cands)))))
}

// simulateOnOne is Simulate packing new NodeClaims as Karpenter does
// (scheduler Input.PackLargest): Karpenter's methods replace candidates
// with at most one node, so the question is whether the pods that need a
// new node fit on one, not how the scheduler would best spread them over
// several.
func (e *Engine) simulateOnOne(cands []*Candidate) Simulation {
	in := e.simInput(cands, e.withBuffers(movedPods(cands)))
	in.PackLargest = true
	return simulation(scheduler.Solve(in))
}

// simulation reads res; a buffer's virtual pod that goes nowhere does not
// refuse the move, as Karpenter's AllNonPendingPodsScheduled ignores
// pending pods (its virtual pods are marked Unschedulable).
func simulation(res scheduler.Result) Simulation {
	sim := Simulation{Result: res}
	if pods := capacitybuffer.WithoutVirtual(res); len(pods.Unschedulable) > 0 {
		first := pods.Unschedulable[0]
		sim.Unplaced = fmt.Sprintf("pod %s/%s could not go anywhere else: %s", first.Pod.Namespace, first.Pod.Name, first.Reason)
	}
	return sim
}

// survivesSpread checks that cmd does not depend on the kube-scheduler
// packing the evicted pods as the simulation did: the kube-scheduler
// binds them one at a time to the least allocated node that fits, and a
// tight first-fit packing can leave the last pods nowhere to go, so that
// provisioning launches a node for them and the next pass consolidates
// again. The check places the candidates' pods smallest first (the order
// that spreads them thinnest) on the remaining nodes and the replacements
// at their cheapest type with the kube-scheduler model (scheduler
// Input.Spread). The string explains a refusal.
func (e *Engine) survivesSpread(cmd *Command) string {
	moved := movedPods(cmd.Candidates)
	if len(moved) == 0 {
		return ""
	}
	in := e.simInput(cmd.Candidates, smallestFirst(moved))
	in.Spread = true // simInput's NodeClaims are its own: the replacements go on the end
	for i, replacement := range cmd.Replacements {
		if nc := plannedClaim(fmt.Sprintf("replacement-%d", i), replacement); nc != nil {
			in.NodeClaims = append(in.NodeClaims, nc)
		}
	}
	res := scheduler.Solve(in)
	if len(res.Unschedulable) == 0 {
		return ""
	}
	first := res.Unschedulable[0]
	return fmt.Sprintf("its pods fit only as packed in the simulation: the kube-scheduler, placing them one at a time on the least allocated node, would leave pod %s/%s (and %d more) without room",
		first.Pod.Namespace, first.Pod.Name, len(res.Unschedulable)-1)
}

// smallestFirst orders pods by their share of the pods' total CPU plus
// their share of the total memory, smallest first, names breaking ties.
func smallestFirst(pods []*corev1.Pod) []*corev1.Pod {
	reqs := make(map[*corev1.Pod]res, len(pods))
	var total res
	for _, pod := range pods {
		reqs[pod] = podRequests(pod)
		total = total.add(reqs[pod])
	}
	size := func(p *corev1.Pod) float64 { return share(reqs[p].cpu, total.cpu) + share(reqs[p].mem, total.mem) }
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(size(a), size(b)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func share(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// plannedClaim is the in-flight NodeClaim a replacement would be at its
// cheapest type and offering, for the kube-scheduler model.
func plannedClaim(name string, r *scheduler.NodeClaimPlan) *karpv1.NodeClaim {
	it, off := r.Cheapest()
	if it == nil {
		return nil
	}
	reqs := scheduling.NewRequirements(r.Requirements.Values()...)
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, it.Name),
		scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, off.Zone),
		scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, off.CapacityType))
	labels := map[string]string{karpv1.NodePoolLabelKey: r.NodePool.Name}
	for key, value := range r.NodePool.Spec.Template.Labels {
		labels[key] = value
	}
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       karpv1.NodeClaimSpec{Requirements: reqs.NodeSelectorRequirements(), Taints: r.NodePool.Spec.Template.Spec.Taints},
	}
}

// simInput is the scheduler input with cands gone and moved (some or all
// of their pods) pending.
func (e *Engine) simInput(cands []*Candidate, moved []*corev1.Pod) scheduler.Input {
	gone := make(map[string]bool, len(cands))
	goneClaims := make(map[string]bool, len(cands))
	for _, candidate := range cands {
		gone[candidate.Node.Name] = true
		goneClaims[candidate.NodeClaim.Name] = true
	}
	in := e.base
	in.Pods = moved
	// Nodes without room for the smallest moved pod cannot take any; when
	// no placement depends on other nodes' pods (no spread or pod
	// (anti-)affinity on the moved pods, no required anti-affinity in the
	// cluster), they are left out, which keeps a simulation on a large,
	// packed fleet small. Their NodeClaims still count against limits.
	roomy := e.roomyFor(moved)
	skip := func(node string) bool { return gone[node] || e.unusable[node] || !roomy(node) }
	// Cordoned nodes stay in: the scheduler takes no pod there, but they
	// are nodes the kube-scheduler counts for hostname spread, and their
	// NodeClaims are not claims still to launch.
	in.Nodes = make([]*corev1.Node, 0, len(e.base.Nodes))
	for _, node := range e.base.Nodes {
		if !skip(node.Name) {
			in.Nodes = append(in.Nodes, node)
		}
	}
	in.NodeClaims = make([]*karpv1.NodeClaim, 0, len(e.base.NodeClaims))
	in.HeldNodeClaims = nil
	for _, nc := range e.base.NodeClaims {
		switch {
		case goneClaims[nc.Name] || e.unusable[nc.Status.NodeName]:
		case nc.Status.NodeName != "" && !roomy(nc.Status.NodeName):
			in.HeldNodeClaims = append(in.HeldNodeClaims, nc)
		default:
			in.NodeClaims = append(in.NodeClaims, nc)
		}
	}
	in.BoundPods = make([]*corev1.Pod, 0, len(e.base.BoundPods))
	for _, pod := range e.base.BoundPods {
		if !skip(pod.Spec.NodeName) {
			in.BoundPods = append(in.BoundPods, pod)
		}
	}
	return in
}

// roomyFor says which nodes may take one of moved (see simInput): every
// node, unless no placement depends on other nodes' pods.
func (e *Engine) roomyFor(moved []*corev1.Pod) func(node string) bool {
	if e.interPod || anyInterPod(moved) {
		return func(string) bool { return true }
	}
	free := e.fleet().free
	smallest := res{math.MaxInt64, math.MaxInt64}
	for _, pod := range moved {
		requests := podRequests(pod)
		smallest = res{min(smallest.cpu, requests.cpu), min(smallest.mem, requests.mem)}
	}
	return func(node string) bool { return smallest.fitsIn(free[node]) }
}

// movedPods are the pods the candidates' removal moves (see unbound).
func movedPods(cands []*Candidate) []*corev1.Pod {
	var moved []*corev1.Pod
	for _, candidate := range cands {
		moved = append(moved, candidate.unbound()...)
	}
	return moved
}

// unbound are copies of the candidate's pods without nodeName, made once
// so that every simulation passes the scheduler the same pods (its Memo
// then computes their requests once).
func (c *Candidate) unbound() []*corev1.Pod {
	if c.moved == nil {
		c.moved = make([]*corev1.Pod, len(c.Pods))
		for i, pod := range c.Pods {
			cp := *pod
			cp.Spec.NodeName = ""
			c.moved[i] = &cp
		}
	}
	return c.moved
}

func sumPrice(cs []*Candidate) float64 {
	var total float64
	for _, candidate := range cs {
		total += candidate.Price
	}
	return total
}

func replacementPrice(plans []*scheduler.NodeClaimPlan) float64 {
	var total float64
	for _, plan := range plans {
		if _, off := plan.Cheapest(); off.Price > 0 {
			total += off.Price
		}
	}
	return total
}

// interPod: the pod's placement depends on where other pods are.
func interPod(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	affinity := p.Spec.Affinity
	return affinity != nil && (affinity.PodAffinity != nil || affinity.PodAntiAffinity != nil)
}

func anyInterPod(pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if interPod(pod) {
			return true
		}
	}
	return false
}

// requiredAntiAffinity: the pod keeps others away from its domain.
func requiredAntiAffinity(p *corev1.Pod) bool {
	affinity := p.Spec.Affinity
	return affinity != nil && affinity.PodAntiAffinity != nil && len(affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}
