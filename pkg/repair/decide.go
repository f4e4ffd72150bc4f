package repair

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Action is what a node needs now.
type Action string

// The actions Decide returns.
const (
	// Healthy: no condition matches a policy.
	Healthy Action = "Healthy"
	// Wait: unhealthy, inside its toleration; look again at Decision.Due.
	Wait Action = "Wait"
	// Blocked: past its toleration, but too many of its NodePool's nodes
	// are unhealthy; look again after BlockedRecheck.
	Blocked Action = "Blocked"
	// Repair: replace the node now.
	Repair Action = "Repair"
)

// BlockedRecheck is how long a blocked repair waits before it looks
// again, Karpenter's requeue (controller.go:145).
const BlockedRecheck = 5 * time.Minute

// Decision is what Decide found for one node.
type Decision struct {
	Action    Action
	Unhealthy Unhealthy
	// PoolNodes and PoolUnhealthy count the nodes of the node's NodePool
	// and how many of them are unhealthy; Allowed is AllowedUnhealthy of
	// PoolNodes. Set for Blocked and Repair.
	PoolNodes, PoolUnhealthy, Allowed int
}

// Decide says what node needs at now. poolNodes are the nodes of the
// node's NodePool (the node included), or of the whole cluster for a
// NodeClaim without a NodePool, as Karpenter counts them.
func Decide(node *corev1.Node, poolNodes []*corev1.Node, policies []Policy, now time.Time) Decision {
	u, bad := Find(node, policies)
	if !bad {
		return Decision{Action: Healthy}
	}
	d := Decision{Action: Wait, Unhealthy: u}
	if now.Before(u.Due) {
		return d
	}
	d.PoolNodes, d.PoolUnhealthy, d.Allowed = len(poolNodes), CountUnhealthy(poolNodes, policies), AllowedUnhealthy(len(poolNodes))
	if d.PoolUnhealthy > d.Allowed {
		d.Action = Blocked
		return d
	}
	d.Action = Repair
	return d
}
