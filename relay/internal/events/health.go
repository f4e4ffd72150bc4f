package events

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// NodeHealthy is the node condition AKS's Cluster Health Monitor writes
// after a node health check; node repair replaces a node where it is
// False (the Azure provider's repair policy, pkg/cloudprovider/cloudprovider.go:542
// @352646f5).
const NodeHealthy corev1.NodeConditionType = "kubernetes.azure.com/NodeHealthy"

// NodeHealth returns the node's NodeHealthy condition and whether it has one.
func NodeHealth(n *corev1.Node) (corev1.NodeCondition, bool) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == NodeHealthy {
			return cond, true
		}
	}
	return corev1.NodeCondition{}, false
}

// NodeHealth builds the event for a node whose NodeHealthy condition
// changed: one message per transition (triggers.NodeHealthChanged).
func (b Builder) NodeHealth(n *corev1.Node, now time.Time) (bus.Message, error) {
	cond, ok := NodeHealth(n)
	if !ok {
		return bus.Message{}, fmt.Errorf("events: node %s has no %s condition", n.Name, NodeHealthy)
	}
	ready, _ := NodeReady(n)
	return b.message(triggers.NodeHealthChanged(messages.Node{
		Cluster: b.Cluster, Name: n.Name, UID: string(n.UID), ProviderID: n.Spec.ProviderID, Ready: ready,
	}, string(cond.Type), string(cond.Status), cond.LastTransitionTime.Time, now))
}
