package plan

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// compactObject drops, as each object is decoded, what the API server
// returns and no part of karpfunc reads: managedFields on every object, a
// pod's container states and image IDs, a node's image list. At 150,000 pods these are most of a dump's memory. What the
// engine does read stays: a pod's container statuses keep their name and
// resources (Karpenter counts a resized container's status resources, see
// resources.Ceiling), its conditions and phase stay whole.
func compactObject(obj any) {
	if meta, ok := obj.(metav1.Object); ok {
		meta.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		compactPodStatus(&o.Status)
	case *corev1.Node:
		o.Status.Images = nil
	}
}

// compactPodStatus keeps, of each container status, what requests are
// computed from.
func compactPodStatus(status *corev1.PodStatus) {
	for _, statuses := range [][]corev1.ContainerStatus{status.InitContainerStatuses, status.ContainerStatuses, status.EphemeralContainerStatuses} {
		for i, cs := range statuses {
			statuses[i] = corev1.ContainerStatus{Name: cs.Name, Ready: cs.Ready, RestartCount: cs.RestartCount, Started: cs.Started,
				Resources: cs.Resources, AllocatedResources: cs.AllocatedResources}
		}
	}
}
