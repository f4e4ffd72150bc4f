package provisioning

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

type evacuatingKey struct{}

// Evacuate runs one provisioning pass in which the nodes named are already
// leaving (a spot interruption): their reschedulable pods count as pending,
// the nodes and their NodeClaims are not capacity. The replacement
// NodeClaims are created before any of those pods is evicted, so the pods
// find a node on its way instead of waiting for a pass after the eviction.
//
// It is as idempotent as Provision: the replacement is named from the pods
// it is for, and once it exists it is in-flight capacity, so a second
// Evacuate for the same node places the pods on it and creates nothing.
func (p *Provisioner) Evacuate(ctx context.Context, nodes ...string) (Result, error) {
	return p.Provision(context.WithValue(ctx, evacuatingKey{}, nodes))
}

// evacuate turns the reschedulable pods bound to the evacuating nodes (from
// ctx, see Evacuate) into pending ones and drops those nodes and their
// NodeClaims from the snapshot. Pods already terminating are left out:
// their replacements are new pods, pending on their own, and counting both
// would ask for twice the capacity.
func evacuate(ctx context.Context, c *snapshot.Cluster, now time.Time) {
	nodes, _ := ctx.Value(evacuatingKey{}).([]string)
	if len(nodes) == 0 {
		return
	}
	leaving := func(name string) bool { return name != "" && slices.Contains(nodes, name) }
	pods := make([]*corev1.Pod, 0, len(c.Pods))
	for _, pod := range c.Pods {
		if !leaving(pod.Spec.NodeName) {
			pods = append(pods, pod)
			continue
		}
		if !Reschedulable(pod) {
			continue
		}
		cp := pod.DeepCopy()
		cp.Spec.NodeName = ""
		// Pending from now on, as kube-scheduler would mark it, for the
		// pass's accounting (a pod that ran for hours is not stuck the
		// moment its node is preempted).
		cp.Status.Phase = corev1.PodPending
		cp.Status.Conditions = slices.DeleteFunc(cp.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
		cp.Status.Conditions = append(cp.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "its node's VM is being preempted", LastTransitionTime: metav1.NewTime(now)})
		pods = append(pods, cp)
	}
	c.Pods = pods
	c.Nodes = slices.DeleteFunc(c.Nodes, func(n *corev1.Node) bool { return leaving(n.Name) })
	c.NodeClaims = slices.DeleteFunc(c.NodeClaims, func(nc *karpv1.NodeClaim) bool { return leaving(nc.Status.NodeName) })
}

// Reschedulable reports whether a pod on a node that goes away needs a place
// elsewhere, as Karpenter decides it: not terminal, not terminating, not a
// DaemonSet pod (the DaemonSet follows the nodes), not a mirror or
// node-owned pod.
func Reschedulable(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" || (ref.Kind == "Node" && ref.APIVersion == "v1") {
			return false
		}
	}
	return true
}
