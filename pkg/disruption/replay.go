package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// Move is one command of a replay and the fleet price after it.
type Move struct {
	Command *Command
	// FleetPriceAfter is the $/hour of every managed node once the move
	// is done.
	FleetPriceAfter float64
}

// Replay answers "what would karpfunc do to my cluster?" offline: it
// decides, applies the command to a copy of the snapshot (candidates gone,
// their pods where the simulation put them, replacements as new Ready
// nodes), and decides again, up to maxMoves times or until nothing is
// left to do. Validation delays, consolidateAfter and budgets of nodes in
// flight are not waited for: every move is made at st.Now. last is the
// final decision: its refusals say why the remaining nodes stay.
func Replay(st State, maxMoves int) (moves []Move, fleetBefore float64, last Decision) {
	cluster := *st.Cluster
	cluster.Pods = append([]*corev1.Pod(nil), cluster.Pods...)
	cluster.Nodes = append([]*corev1.Node(nil), cluster.Nodes...)
	cluster.NodeClaims = append([]*karpv1.NodeClaim(nil), cluster.NodeClaims...)
	st.Cluster = &cluster
	fleetBefore = fleetPrice(NewEngine(st))
	for i := 0; ; i++ {
		last = Decide(st)
		if last.Command == nil || i == maxMoves {
			return moves, fleetBefore, last
		}
		apply(&cluster, last.Command, st, i)
		moves = append(moves, Move{Command: last.Command, FleetPriceAfter: fleetPrice(NewEngine(st))})
	}
}

func fleetPrice(e *Engine) float64 {
	var total float64
	for _, cost := range e.poolCost {
		total += cost
	}
	return total
}

// apply carries a command out on c.
func apply(c *snapshot.Cluster, cmd *Command, st State, move int) {
	gone := map[string]bool{}
	for _, cand := range cmd.Candidates {
		gone[cand.Node.Name] = true
	}
	dest := map[string]string{} // namespace/name -> node
	for _, pl := range cmd.Existing {
		for _, pod := range pl.Pods {
			dest[pod.Namespace+"/"+pod.Name] = pl.Node
		}
	}
	for i, replacement := range cmd.Replacements {
		name := fmt.Sprintf("replay-%d-%d", move, i)
		nc, node := fakeNode(name, replacement, st.Now)
		if nc == nil {
			continue
		}
		c.NodeClaims = append(c.NodeClaims, nc)
		c.Nodes = append(c.Nodes, node)
		for _, pod := range replacement.Pods {
			dest[pod.Namespace+"/"+pod.Name] = name
		}
	}
	pods := c.Pods[:0:0]
	for _, pod := range c.Pods {
		if !gone[pod.Spec.NodeName] {
			pods = append(pods, pod)
			continue
		}
		if snapshot.OwnedByDaemonSet(pod) {
			continue // DaemonSet pods go with their node
		}
		cp := *pod
		cp.Spec.NodeName = dest[pod.Namespace+"/"+pod.Name]
		if cp.Spec.NodeName == "" {
			// Not placed by the simulation (an in-flight NodeClaim took
			// it): pending, so the next decision waits for provisioning.
			cp.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}
		pods = append(pods, &cp)
	}
	c.Pods = pods
	nodes := c.Nodes[:0:0]
	for _, node := range c.Nodes {
		if !gone[node.Name] {
			nodes = append(nodes, node)
		}
	}
	c.Nodes = nodes
	ncs := c.NodeClaims[:0:0]
	for _, nc := range c.NodeClaims {
		if !gone[nc.Status.NodeName] {
			ncs = append(ncs, nc)
		}
	}
	c.NodeClaims = ncs
}

// fakeNode is the Node and NodeClaim a replacement would become, at its
// cheapest offering, settled (consolidatable) at now.
func fakeNode(name string, r *scheduler.NodeClaimPlan, now time.Time) (*karpv1.NodeClaim, *corev1.Node) {
	it, off := r.Cheapest()
	if it == nil {
		return nil, nil
	}
	labels := map[string]string{}
	for key, value := range it.Labels {
		labels[key] = value
	}
	for key, value := range r.NodePool.Spec.Template.Labels {
		labels[key] = value
	}
	labels[corev1.LabelInstanceTypeStable] = it.Name
	labels[corev1.LabelTopologyZone] = off.Zone
	labels[karpv1.CapacityTypeLabelKey] = off.CapacityType
	labels[karpv1.NodePoolLabelKey] = r.NodePool.Name
	labels[corev1.LabelHostname] = name
	var class *v1beta1.AKSNodeClass = r.NodeClass
	created := metav1.NewTime(now)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: HashAnnotations(r.NodePool, class), CreationTimestamp: created},
		Spec: karpv1.NodeClaimSpec{Taints: r.NodePool.Spec.Template.Spec.Taints, NodeClassRef: r.NodePool.Spec.Template.Spec.NodeClassRef,
			ExpireAfter: r.NodePool.Spec.Template.Spec.ExpireAfter},
		Status: karpv1.NodeClaimStatus{NodeName: name, ProviderID: "replay://" + name},
	}
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
	for i := range nc.Status.Conditions {
		nc.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now.Add(-24 * time.Hour))
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: r.NodePool.Spec.Template.Spec.Taints},
		Status: corev1.NodeStatus{Allocatable: it.Allocatable(), Capacity: it.Capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	return nc, node
}
