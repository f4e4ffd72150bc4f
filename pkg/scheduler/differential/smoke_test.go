package differential

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestSmoke(t *testing.T) {
	cat := testCatalog(t)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}})
	}
	sc := &scenario{NodePools: []*karpv1.NodePool{np}, Pods: pods}
	k, err := runKarpenter(sc, cat)
	if err != nil {
		t.Fatal(err)
	}
	f := runKarpfunc(sc, cat)
	for _, p := range []*plan{k, f} {
		if len(p.Pending) > 0 || len(p.Invalid) > 0 || len(p.Placed()) != 3 {
			t.Errorf("three 1-CPU pods on an open NodePool: want all placed\n%s", p)
		}
	}
}
