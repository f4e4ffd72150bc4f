package disruption

import (
	"fmt"

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
	gone := make(map[string]bool, len(cands))
	goneClaims := make(map[string]bool, len(cands))
	var moved []*corev1.Pod
	for _, c := range cands {
		gone[c.Node.Name] = true
		goneClaims[c.NodeClaim.Name] = true
		for _, p := range c.Pods {
			cp := *p
			cp.Spec.NodeName = ""
			moved = append(moved, &cp)
		}
	}
	in := e.base
	in.Pods = moved
	in.Nodes = make([]*corev1.Node, 0, len(e.base.Nodes))
	for _, n := range e.base.Nodes {
		if !gone[n.Name] && !e.unusable[n.Name] && n.Spec.Unschedulable == false {
			in.Nodes = append(in.Nodes, n)
		}
	}
	in.NodeClaims = make([]*karpv1.NodeClaim, 0, len(e.base.NodeClaims))
	for _, nc := range e.base.NodeClaims {
		if !goneClaims[nc.Name] && !e.unusable[nc.Status.NodeName] {
			in.NodeClaims = append(in.NodeClaims, nc)
		}
	}
	in.BoundPods = make([]*corev1.Pod, 0, len(e.base.BoundPods))
	for _, p := range e.base.BoundPods {
		if !gone[p.Spec.NodeName] && !e.unusable[p.Spec.NodeName] {
			in.BoundPods = append(in.BoundPods, p)
		}
	}
	res := scheduler.Solve(in)
	sim := Simulation{Result: res}
	if len(res.Unschedulable) > 0 {
		u := res.Unschedulable[0]
		sim.Unplaced = fmt.Sprintf("pod %s/%s could not go anywhere else: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
	}
	return sim
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
