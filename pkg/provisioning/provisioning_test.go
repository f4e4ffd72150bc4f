package provisioning

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

const testCatalog = `{"region":"eastus","zones":["eastus-1","eastus-2"],"instanceTypes":[
 {"name":"small","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.10,"available":true},
               {"zone":"eastus-1","capacityType":"spot","price":0.02,"available":true},
               {"zone":"eastus-2","capacityType":"on-demand","price":0.09,"available":true}]},
 {"name":"large","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.40,"available":true},
               {"zone":"eastus-2","capacityType":"spot","price":0.08,"available":false}]}]}`

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func pod(uid string, conds ...corev1.PodCondition) *corev1.Pod {
	return testfixtures.Pod(testfixtures.PodOptions{Name: "p-" + uid, UID: uid, Phase: corev1.PodPending, Conditions: conds})
}

func TestNodeClaimFor(t *testing.T) {
	cat, err := catalog.Parse([]byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", UID: "np-uid"}}
	np.Spec.Template.Labels = map[string]string{"team": "a"}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: NodeClassGroup, Kind: NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
	reqs := scheduling.NewRequirements(
		scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"),
		// A pod may carry hostname; the NodeClaim CRD forbids it.
		scheduling.NewRequirement(corev1.LabelHostname, corev1.NodeSelectorOpIn, "x"),
	)
	plan := &scheduler.NodeClaimPlan{NodePool: np, Pods: []*corev1.Pod{pod("a")}, Requirements: reqs,
		InstanceTypes: cat.InstanceTypes, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	nc := NodeClaimFor(plan)

	if nc.Labels[karpv1.NodePoolLabelKey] != "general" || nc.Labels["team"] != "a" {
		t.Errorf("labels %v; want the template's plus karpenter.sh/nodepool", nc.Labels)
	}
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != karpv1.TerminationFinalizer {
		t.Errorf("finalizers %v; want %s", nc.Finalizers, karpv1.TerminationFinalizer)
	}
	if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].UID != "np-uid" || nc.OwnerReferences[0].Kind != "NodePool" {
		t.Errorf("owner references %v; want the NodePool", nc.OwnerReferences)
	}
	keys := map[string][]string{}
	for _, r := range nc.Spec.Requirements {
		keys[r.Key] = r.Values
	}
	if _, ok := keys[corev1.LabelHostname]; ok {
		t.Errorf("requirements carry the restricted key %s", corev1.LabelHostname)
	}
	if got := strings.Join(keys[corev1.LabelInstanceTypeStable], ","); got != "large,small" {
		t.Errorf("instance-type options %q; want large,small (a sorted set)", got)
	}
	if got := strings.Join(keys[karpv1.CapacityTypeLabelKey], ","); got != "spot" {
		t.Errorf("capacity type %q; want spot", got)
	}
	if len(nc.Spec.Taints) != 1 || len(nc.Spec.StartupTaints) != 1 || nc.Spec.NodeClassRef.Name != "default" {
		t.Errorf("template spec not carried over: taints %v, startup %v, class %v", nc.Spec.Taints, nc.Spec.StartupTaints, nc.Spec.NodeClassRef)
	}
	if q := nc.Spec.Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("requests cpu %s; want 1", q.String())
	}
}

func TestIsProvisionable(t *testing.T) {
	unschedulable := testfixtures.Unschedulable()
	now := metav1.Now()
	tests := []struct {
		name string
		pod  func() *corev1.Pod
		want bool
	}{
		{"marked unschedulable", func() *corev1.Pod { return pod("a", unschedulable) }, true},
		{"not yet tried by kube-scheduler", func() *corev1.Pod { return pod("a") }, false},
		{"bound", func() *corev1.Pod { p := pod("a", unschedulable); p.Spec.NodeName = "n"; return p }, false},
		{"terminating", func() *corev1.Pod { p := pod("a", unschedulable); p.DeletionTimestamp = &now; return p }, false},
		{"daemonset pod", func() *corev1.Pod {
			p := pod("a", unschedulable)
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
			return p
		}, false},
		{"finished", func() *corev1.Pod { p := pod("a", unschedulable); p.Status.Phase = corev1.PodSucceeded; return p }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsProvisionable(tt.pod()); got != tt.want {
				t.Errorf("IsProvisionable = %t, want %t", got, tt.want)
			}
		})
	}
}
