package disruption

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

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
	var moved []*corev1.Pod
	for _, c := range cands {
		moved = append(moved, c.unbound()...)
	}
	return simulation(scheduler.Solve(e.simInput(cands, moved)))
}

func simulation(res scheduler.Result) Simulation {
	sim := Simulation{Result: res}
	if len(res.Unschedulable) > 0 {
		u := res.Unschedulable[0]
		sim.Unplaced = fmt.Sprintf("pod %s/%s could not go anywhere else: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
	}
	return sim
}

// simInput is the scheduler input with cands gone and moved (some or all
// of their pods) pending.
func (e *Engine) simInput(cands []*Candidate, moved []*corev1.Pod) scheduler.Input {
	gone := make(map[string]bool, len(cands))
	goneClaims := make(map[string]bool, len(cands))
	for _, c := range cands {
		gone[c.Node.Name] = true
		goneClaims[c.NodeClaim.Name] = true
	}
	in := e.base
	in.Pods = moved
	// Nodes without room for the smallest moved pod cannot take any; when
	// no placement depends on other nodes' pods (no spread or pod
	// (anti-)affinity on the moved pods, no required anti-affinity in the
	// cluster), they are left out, which keeps a simulation on a large,
	// packed fleet small. Their NodeClaims still count against limits.
	roomy := func(string) bool { return true }
	if !e.interPod && !anyInterPod(moved) {
		f := e.fleet()
		smallest := res{math.MaxInt64, math.MaxInt64}
		for _, p := range moved {
			r := podRequests(p)
			smallest = res{min(smallest.cpu, r.cpu), min(smallest.mem, r.mem)}
		}
		roomy = func(node string) bool { return smallest.fitsIn(f.free[node]) }
	}
	skip := func(node string) bool { return gone[node] || e.unusable[node] || !roomy(node) }
	in.Nodes = make([]*corev1.Node, 0, len(e.base.Nodes))
	for _, n := range e.base.Nodes {
		if !skip(n.Name) && !n.Spec.Unschedulable {
			in.Nodes = append(in.Nodes, n)
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
	for _, p := range e.base.BoundPods {
		if !skip(p.Spec.NodeName) {
			in.BoundPods = append(in.BoundPods, p)
		}
	}
	return in
}

// unbound are copies of the candidate's pods without nodeName, made once
// so that every simulation passes the scheduler the same pods (its Memo
// then computes their requests once).
func (c *Candidate) unbound() []*corev1.Pod {
	if c.moved == nil {
		c.moved = make([]*corev1.Pod, len(c.Pods))
		for i, p := range c.Pods {
			cp := *p
			cp.Spec.NodeName = ""
			c.moved[i] = &cp
		}
	}
	return c.moved
}

func sumPrice(cs []*Candidate) float64 {
	var s float64
	for _, c := range cs {
		s += c.Price
	}
	return s
}

func replacementPrice(plans []*scheduler.NodeClaimPlan) float64 {
	var s float64
	for _, p := range plans {
		if _, off := p.Cheapest(); off.Price > 0 {
			s += off.Price
		}
	}
	return s
}

// interPod: the pod's placement depends on where other pods are.
func interPod(p *corev1.Pod) bool {
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		return true
	}
	a := p.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

func anyInterPod(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if interPod(p) {
			return true
		}
	}
	return false
}

// requiredAntiAffinity: the pod keeps others away from its domain.
func requiredAntiAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}
