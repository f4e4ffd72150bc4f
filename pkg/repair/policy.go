// Package repair replaces nodes that stay unhealthy, with Karpenter
// v1.14.1's node repair semantics (sigs.k8s.io/karpenter
// pkg/controllers/node/health/controller.go) and the Azure provider's
// repair policies (karpenter-provider-azure
// pkg/cloudprovider/cloudprovider.go:528-557 @352646f5).
//
// A node is unhealthy while one of its conditions matches a Policy; it is
// repaired once that condition has held for the policy's toleration,
// counted from the condition's lastTransitionTime. When a node matches
// several policies, the one whose toleration ends first decides.
//
// Invariants:
//   - no NodeClaim is repaired while more than AllowedUnhealthy of its
//     NodePool's nodes are unhealthy (20 %, rounded up): the pool is
//     reported NodeRepairBlocked instead;
//   - a node is repaired only past its toleration, never before;
//   - the replacement is launched (a provisioning pass that treats the
//     node as leaving) before the broken NodeClaim is deleted;
//   - only NodeClaims karpfunc owns are repaired.
//
// The decision (Decide) is pure; Controller reads the cluster and acts.
package repair

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ConditionNodeHealthy is the node condition AKS's Cluster Health Monitor
// (On-Demand Monitor) writes after its node health check: False when the
// node failed its pod scheduling or pod networking check (Learn: "Use
// Cluster Health Monitor checker in AKS", section "Check node health
// status with On-Demand Monitor").
const ConditionNodeHealthy corev1.NodeConditionType = "kubernetes.azure.com/NodeHealthy"

// DefaultReadyToleration is how long Ready may stay False or Unknown
// before the node is repaired, the Azure provider's 10 minutes.
const DefaultReadyToleration = 10 * time.Minute

// Policy is one unhealthy condition and how long it is tolerated, as
// Karpenter's cloudprovider.RepairPolicy (pkg/cloudprovider/types.go).
type Policy struct {
	Condition  corev1.NodeConditionType
	Status     corev1.ConditionStatus
	Toleration time.Duration
}

// Policies are the Azure provider's repair policies, with readyToleration
// for the two Ready policies (DefaultReadyToleration when <= 0).
// PreemptionScheduled=True, the provider's fourth policy, is left to the
// interruption path, which replaces a preempted spot node at once.
func Policies(readyToleration time.Duration) []Policy {
	if readyToleration <= 0 {
		readyToleration = DefaultReadyToleration
	}
	return []Policy{
		{Condition: corev1.NodeReady, Status: corev1.ConditionFalse, Toleration: readyToleration},
		{Condition: corev1.NodeReady, Status: corev1.ConditionUnknown, Toleration: readyToleration},
		{Condition: ConditionNodeHealthy, Status: corev1.ConditionFalse, Toleration: 0},
	}
}

// Unhealthy is the condition that makes a node unhealthy and when its
// toleration ends.
type Unhealthy struct {
	Condition  corev1.NodeCondition
	Toleration time.Duration
	// Due is lastTransitionTime + toleration: the node is repaired from then.
	Due time.Time
}

// String is the condition for an event or a log line.
func (u Unhealthy) String() string {
	return fmt.Sprintf("%s=%s since %s", u.Condition.Type, u.Condition.Status, u.Condition.LastTransitionTime.UTC().Format(time.RFC3339))
}

// Find returns the condition of node matching one of policies whose
// toleration ends first, and false when the node is healthy.
func Find(node *corev1.Node, policies []Policy) (Unhealthy, bool) {
	var found Unhealthy
	ok := false
	for _, p := range policies {
		for _, cond := range node.Status.Conditions {
			if cond.Type != p.Condition || cond.Status != p.Status {
				continue
			}
			due := cond.LastTransitionTime.Add(p.Toleration)
			if !ok || due.Before(found.Due) {
				found, ok = Unhealthy{Condition: cond, Toleration: p.Toleration, Due: due}, true
			}
		}
	}
	return found, ok
}

// AllowedUnhealthyPercent is Karpenter's cap on a NodePool's unhealthy
// nodes (controller.go:53).
const AllowedUnhealthyPercent = 20

// AllowedUnhealthy is how many of nodes may be unhealthy with repair
// still going ahead: 20 % rounded up, as a PodDisruptionBudget's
// percentage (controller.go:228-255).
func AllowedUnhealthy(nodes int) int {
	return int(math.Ceil(float64(nodes) * AllowedUnhealthyPercent / 100))
}

// CountUnhealthy counts the nodes matching a policy, whatever their
// toleration (Karpenter counts them so: areNodesHealthy).
func CountUnhealthy(nodes []*corev1.Node, policies []Policy) int {
	n := 0
	for _, node := range nodes {
		if _, bad := Find(node, policies); bad {
			n++
		}
	}
	return n
}
