package watch

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/relay/internal/events"
)

// The transforms shrink what the informers keep in memory to what the relay
// reads. They must be idempotent (client-go may apply them to an object
// already transformed) and pass through anything that is not their type, such
// as cache.DeletedFinalStateUnknown.

// TransformPod keeps a pod's identity, binding, phase and PodScheduled
// condition; everything else, including managedFields and the whole spec
// except nodeName, is dropped.
func TransformPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: slimMeta(pod.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status:     corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			out.Status.Conditions = append(out.Status.Conditions, cond)
		}
	}
	return out, nil
}

// TransformNode keeps a node's identity, providerID, taints, extended
// resources' allocatable (what initialization waits for), and its Ready,
// PreemptionScheduled and NodeHealthy conditions.
func TransformNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta:   node.TypeMeta,
		ObjectMeta: slimMeta(node.ObjectMeta),
		Spec:       corev1.NodeSpec{ProviderID: node.Spec.ProviderID, Taints: node.Spec.Taints},
	}
	for name, quantity := range node.Status.Allocatable {
		if events.ExtendedResource(name) {
			if out.Status.Allocatable == nil {
				out.Status.Allocatable = corev1.ResourceList{}
			}
			out.Status.Allocatable[name] = quantity
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady || cond.Type == events.PreemptionScheduled || cond.Type == events.NodeHealthy {
			out.Status.Conditions = append(out.Status.Conditions, cond)
		}
	}
	return out, nil
}

// TransformMetadata drops managedFields and annotations from a metadata-only
// object (NodeClaims); annotations can be large (last-applied-configuration)
// and the relay reads none.
func TransformMetadata(obj any) (any, error) {
	meta, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := meta.DeepCopy()
	out.ManagedFields = nil
	out.Annotations = nil
	return out, nil
}

// slimMeta keeps identity and lifecycle fields; labels and annotations are
// not read by the relay.
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}
