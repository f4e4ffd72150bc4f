package testfixtures

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// PodOptions describe a pod; zero fields are left unset unless said.
type PodOptions struct {
	Name      string
	Namespace string // "default" when empty
	UID       string
	Labels    map[string]string
	// CPU and Memory are the one container's requests ("" for none).
	CPU, Memory string
	NodeName    string
	Phase       corev1.PodPhase
	Conditions  []corev1.PodCondition
}

// Pod builds a pod with one pause container.
func Pod(o PodOptions) *corev1.Pod {
	namespace := o.Namespace
	if namespace == "" {
		namespace = "default"
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: namespace, UID: types.UID(o.UID), Labels: o.Labels},
		Spec: corev1.PodSpec{
			NodeName:   o.NodeName,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: requests(o.CPU, o.Memory)}}},
		},
		Status: corev1.PodStatus{Phase: o.Phase, Conditions: o.Conditions},
	}
}

// Unschedulable is the condition kube-scheduler sets on a pod it could
// not place.
func Unschedulable() corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
}

// NodePoolOptions describe a karpenter.sh/v1 NodePool.
type NodePoolOptions struct {
	Name         string
	NodeClass    string // the AKSNodeClass; "default" when empty
	Requirements []karpv1.NodeSelectorRequirementWithMinValues
	Limits       corev1.ResourceList
	Weight       *int32
}

// NodePool builds a NodePool whose template names an AKSNodeClass.
func NodePool(o NodePoolOptions) *karpv1.NodePool {
	nodeClass := o.NodeClass
	if nodeClass == "" {
		nodeClass = "default"
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: o.Name}, Spec: karpv1.NodePoolSpec{Weight: o.Weight}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: nodeClass}
	np.Spec.Template.Spec.Requirements = o.Requirements
	if o.Limits != nil {
		np.Spec.Limits = karpv1.Limits(o.Limits)
	}
	return np
}

// NodeClaimOptions describe a NodeClaim and, through its labels, what it
// launched.
type NodeClaimOptions struct {
	Name, NodePool                   string
	InstanceType, Zone, CapacityType string
	ProviderID, NodeName             string
	// Allocatable is the status's ("" for unset).
	CPU, Memory string
}

// NodeClaim builds a NodeClaim labelled with its NodePool, instance type,
// zone and capacity type (each label only when given).
func NodeClaim(o NodeClaimOptions) *karpv1.NodeClaim {
	labels := map[string]string{}
	setLabel(labels, karpv1.NodePoolLabelKey, o.NodePool)
	setLabel(labels, corev1.LabelInstanceTypeStable, o.InstanceType)
	setLabel(labels, corev1.LabelTopologyZone, o.Zone)
	setLabel(labels, karpv1.CapacityTypeLabelKey, o.CapacityType)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels}}
	nc.Status.ProviderID = o.ProviderID
	nc.Status.NodeName = o.NodeName
	nc.Status.Allocatable = requests(o.CPU, o.Memory)
	return nc
}

// NodeOptions describe a Node.
type NodeOptions struct {
	Name, ProviderID string
	Labels           map[string]string
	CPU, Memory      string // allocatable and capacity ("" for unset)
	NotReady         bool
}

// Node builds a Node, Ready unless NotReady.
func Node(o NodeOptions) *corev1.Node {
	ready := corev1.ConditionTrue
	if o.NotReady {
		ready = corev1.ConditionFalse
	}
	resources := requests(o.CPU, o.Memory)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.Labels},
		Spec:       corev1.NodeSpec{ProviderID: o.ProviderID},
		Status: corev1.NodeStatus{Allocatable: resources, Capacity: resources.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

// Catalog is the embedded catalog of region; it fails the test if there
// is none.
func Catalog(t testing.TB, region string) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Default(region)
	if err != nil {
		t.Fatalf("embedded catalog for %s: %v", region, err)
	}
	return cat
}

func requests(cpu, memory string) corev1.ResourceList {
	if cpu == "" && memory == "" {
		return nil
	}
	out := corev1.ResourceList{}
	if cpu != "" {
		out[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		out[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return out
}

func setLabel(labels map[string]string, key, value string) {
	if value != "" {
		labels[key] = value
	}
}
