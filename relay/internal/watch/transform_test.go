package watch

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestUnschedulable(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	cond := func(s corev1.ConditionStatus, reason string) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse},
			{Type: corev1.PodScheduled, Status: s, Reason: reason}}
	}
	tests := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "marked unschedulable", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}, want: true},
		{name: "not yet tried by the scheduler", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}},
		{name: "scheduling gated", pod: corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse, corev1.PodReasonSchedulingGated)}}},
		{name: "scheduled", pod: corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionTrue, "")}}},
		{name: "bound though condition is stale", pod: corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}},
		{name: "terminating", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}},
		{name: "failed", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: cond(corev1.ConditionFalse, corev1.PodReasonUnschedulable)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Unschedulable(&tt.pod); got != tt.want {
				t.Fatalf("Unschedulable() = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestTransforms(t *testing.T) {
	ts := metav1.NewTime(time.Unix(100, 0))
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	fullMeta := metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2, CreationTimestamp: ts,
		DeletionTimestamp: &ts, Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "..."}, ManagedFields: managed,
		Finalizers: []string{"karpenter.sh/termination"}}
	slim := metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u", ResourceVersion: "7", Generation: 2, CreationTimestamp: ts, DeletionTimestamp: &ts}
	sched := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes"}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: ts}
	preempt := corev1.NodeCondition{Type: "PreemptionScheduled", Status: corev1.ConditionTrue, Reason: "SpotEvictionIncoming",
		Message: "Preempt Scheduled: Tue, 01 Dec 2026 10:00:30 GMT.", LastTransitionTime: ts}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: &corev1.Pod{}}

	tests := []struct {
		name string
		tf   cache.TransformFunc
		in   any
		want any
	}{
		{name: "pod", tf: TransformPod,
			in: &corev1.Pod{ObjectMeta: fullMeta,
				Spec:   corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}, sched}, Message: "m"}},
			want: &corev1.Pod{ObjectMeta: slim, Spec: corev1.PodSpec{NodeName: "n"},
				Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{sched}}}},
		{name: "node", tf: TransformNode,
			in: &corev1.Node{ObjectMeta: fullMeta, Spec: corev1.NodeSpec{ProviderID: "azure:///vm", PodCIDR: "10.0.0.0/24"},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeDiskPressure}, ready, preempt}, Images: []corev1.ContainerImage{{Names: []string{"i"}}}}},
			want: &corev1.Node{ObjectMeta: slim, Spec: corev1.NodeSpec{ProviderID: "azure:///vm"},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready, preempt}}}},
		{name: "metadata", tf: TransformMetadata,
			in: &metav1.PartialObjectMetadata{ObjectMeta: fullMeta},
			want: &metav1.PartialObjectMetadata{ObjectMeta: func() metav1.ObjectMeta {
				m := *fullMeta.DeepCopy()
				m.ManagedFields, m.Annotations = nil, nil
				return m
			}()}},
		{name: "pod transform passes tombstones through", tf: TransformPod, in: tombstone, want: tombstone},
		{name: "node transform passes other types through", tf: TransformNode, in: &corev1.Pod{}, want: &corev1.Pod{}},
		{name: "metadata transform passes other types through", tf: TransformMetadata, in: tombstone, want: tombstone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.tf(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("transform =\n%#v\nwant\n%#v", got, tt.want)
			}
			again, err := tt.tf(got) // client-go may transform twice
			if err != nil || !reflect.DeepEqual(again, tt.want) {
				t.Fatalf("transform is not idempotent: %#v, %v", again, err)
			}
		})
	}
}
