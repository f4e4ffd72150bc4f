package snapshot

import (
	"reflect"
	"strconv"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
)

// TestCompactorKnowsWhatItHandedOut: compacting a part the Compactor
// handed out skips its key (a PageReader's pods arrive with their parts
// shared by their bytes), and only while the table it came from is kept:
// once the table starts over, the part is keyed by its contents again.
func TestCompactorKnowsWhatItHandedOut(t *testing.T) {
	var c Compactor
	pod := everyPartPod()
	c.Compact(pod)
	spec := &pod.Spec
	parts := []struct {
		name    string
		address unsafe.Pointer
	}{
		{"labels", mapAddress(pod.Labels)},
		{"annotations", mapAddress(pod.Annotations)},
		{"owner references", sliceAddress(pod.OwnerReferences)},
		{"containers", sliceAddress(spec.Containers)},
		{"tolerations", sliceAddress(spec.Tolerations)},
		{"node selector", mapAddress(spec.NodeSelector)},
		{"affinity", unsafe.Pointer(spec.Affinity)},
		{"spread constraints", sliceAddress(spec.TopologySpreadConstraints)},
	}
	for _, part := range parts {
		if part.address == nil {
			t.Fatalf("the fixture pod has no %s", part.name)
		}
		if !c.alreadyShared(part.address) {
			t.Errorf("%s: handed out, but not known as shared", part.name)
		}
	}
	again := pod.DeepCopy()
	c.Compact(again)
	if !reflect.DeepEqual(again, pod) {
		t.Errorf("compacting a compacted pod changed it:\n got %+v\nwant %+v", again, pod)
	}
	for i := len(c.shared); i <= maxShared; i++ {
		c.intern(strconv.Itoa(i))
	}
	for _, part := range parts {
		if c.alreadyShared(part.address) {
			t.Errorf("%s: still known as shared after the table started over", part.name)
		}
	}
}

// everyPartPod is a pod with every part compaction shares.
func everyPartPod() *corev1.Pod {
	pod := testfixtures.Pod(testfixtures.PodOptions{Name: "web-0", Namespace: "team", CPU: "1", Memory: "1Gi", NodeName: "n",
		Labels: map[string]string{"app": "web"}})
	pod.Annotations = map[string]string{"team": "a"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "u"}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}}
	pod.Spec.NodeSelector = map[string]string{"pool": "general"}
	pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
		{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	return pod
}
