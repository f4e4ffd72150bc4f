package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
)

// TestStatus: NodePool and AKSNodeClass status as Karpenter and the Azure
// provider keep them. The example NodePool and AKSNodeClass become Ready
// (images, Kubernetes version, NODES); a NodePool pointing at a missing
// AKSNodeClass, one whose AKSNodeClass's subnet is in another VNet and one
// whose AKSNodeClass asks for an image family AKS does not offer at the
// cluster's Kubernetes version (ImagesReady=False) are not Ready, with the reason, and nothing is launched for their pods, whose
// FailedScheduling events say why; once fixed they are Ready again and
// their pods run on nodes launched from them.
func TestStatus(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "status", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	waitClassReady(t, ctx, kube, "default")
	waitPoolReady(t, ctx, kube, "general", 0)

	// A subnet ID that is no ARM ID is refused by the CRD, as the
	// provider's; one in a VNet other than the cluster's is admitted and
	// made not Ready by status (the provider's SubnetIDInvalid).
	otherVNet := strings.Replace(localenv.SubnetID(), "/virtualNetworks/aks-vnet", "/virtualNetworks/elsewhere-vnet", 1)
	if err := kube.Create(ctx, aksNodeClass("malformed", "/subscriptions/x/subnets/y")); err == nil {
		t.Error("the API server admitted an AKSNodeClass whose vnetSubnetID is no subnet ID")
	}
	if err := kube.Create(ctx, aksNodeClass("wrongnet", otherVNet)); err != nil {
		t.Fatal(err)
	}
	// Ubuntu 22.04 is supported at Kubernetes 1.25 to 1.33 only (Learn,
	// aks/upgrade-os-version); the local control plane runs 1.37.
	jammy := aksNodeClass("jammy", "")
	family := v1beta1.ImageFamilyUbuntu2204
	jammy.Spec.ImageFamily = &family
	if err := kube.Create(ctx, jammy); err != nil {
		t.Fatal(err)
	}
	for _, np := range []*karpv1.NodePool{labelledPool("orphan", "missing"), labelledPool("wrongnet", "wrongnet"), labelledPool("jammy", "jammy")} {
		if err := kube.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
		d := deployment(np.Name, 1, "1", "1Gi")
		d.Spec.Template.Spec.NodeSelector = map[string]string{"pool": np.Name}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, ctx, kube, &v1beta1.AKSNodeClass{}, "wrongnet", v1beta1.ConditionTypeSubnetsReady, metav1.ConditionFalse,
		nodepoolstatus.ReasonSubnetIDInvalid, "does not match the cluster")
	waitCondition(t, ctx, kube, &karpv1.NodePool{}, "orphan", karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse,
		nodepoolstatus.ReasonNodeClassNotFound, "AKSNodeClass missing not found")
	waitCondition(t, ctx, kube, &karpv1.NodePool{}, "wrongnet", karpv1.ConditionTypeNodeClassReady, metav1.ConditionFalse,
		"UnhealthyDependents", "SubnetsReady=False (SubnetIDInvalid: vnetSubnetID does not match the cluster")
	waitCondition(t, ctx, kube, &v1beta1.AKSNodeClass{}, "jammy", v1beta1.ConditionTypeImagesReady, metav1.ConditionFalse,
		nodepoolstatus.ReasonImageFamilyUnsupported, "supports at Kubernetes 1.25 to 1.33 only")
	for _, name := range []string{"orphan", "wrongnet", "jammy"} {
		waitCondition(t, ctx, kube, &karpv1.NodePool{}, name, status.ConditionReady, metav1.ConditionFalse, "", "")
		waitPodEvent(t, ctx, kube, name, "NodePool "+name+" is not ready")
	}
	waitIdle(t, env)
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "general" {
			t.Errorf("NodeClaim %s launched from NodePool %s, which is not Ready", nc.Name, pool)
		}
	}

	// Fix both: the missing class appears, the subnet moves into the
	// cluster's VNet.
	if err := kube.Create(ctx, aksNodeClass("missing", "")); err != nil {
		t.Fatal(err)
	}
	wrong := &v1beta1.AKSNodeClass{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "wrongnet"}, wrong); err != nil {
		t.Fatal(err)
	}
	fixed := localenv.SubnetID()
	wrong.Spec.VNETSubnetID = &fixed
	if err := kube.Update(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orphan", "wrongnet"} {
		eventually(t, 3*time.Minute, name+" running", func() (bool, string) { return allRunning(ctx, kube, name, 1) })
		waitPoolReady(t, ctx, kube, name, 1)
	}
	waitClassReady(t, ctx, kube, "wrongnet")
}

func aksNodeClass(name, subnet string) *v1beta1.AKSNodeClass {
	c := &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if subnet != "" {
		c.Spec.VNETSubnetID = &subnet
	}
	return c
}

// labelledPool is a NodePool whose nodes carry pool=<name>, on class.
func labelledPool(name, class string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = map[string]string{"pool": name}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: "karpenter.azure.com/sku-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"D"}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	return np
}

type conditioned interface {
	client.Object
	GetConditions() []status.Condition
}

// waitCondition waits for typ on the named object to have st, reason (""
// any) and a message containing msg.
func waitCondition(t *testing.T, ctx context.Context, kube client.Client, obj conditioned, name, typ string, st metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	kind := fmt.Sprintf("%T", obj)
	eventually(t, 90*time.Second, fmt.Sprintf("%s %s %s=%s %s", kind, name, typ, st, reason), func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return false, err.Error()
		}
		for _, c := range obj.GetConditions() {
			if c.Type == typ {
				ok := c.Status == st && (reason == "" || c.Reason == reason) && strings.Contains(c.Message, msg)
				return ok, fmt.Sprintf("%s=%s reason %q message %q", typ, c.Status, c.Reason, c.Message)
			}
		}
		return false, "no " + typ + " condition"
	})
}

// waitClassReady waits for the class to be Ready with its images and
// Kubernetes version resolved.
func waitClassReady(t *testing.T, ctx context.Context, kube client.Client, name string) {
	t.Helper()
	class := &v1beta1.AKSNodeClass{}
	waitCondition(t, ctx, kube, class, name, status.ConditionReady, metav1.ConditionTrue, "", "")
	if len(class.Status.Images) == 0 || class.Status.KubernetesVersion == nil || *class.Status.KubernetesVersion == "" {
		t.Errorf("AKSNodeClass %s Ready with images %v and kubernetesVersion %v; want both resolved", name, class.Status.Images, class.Status.KubernetesVersion)
	}
}

// waitPoolReady waits for the NodePool to be Ready with status.nodes the
// number of its Nodes.
func waitPoolReady(t *testing.T, ctx context.Context, kube client.Client, name string, nodes int64) {
	t.Helper()
	np := &karpv1.NodePool{}
	waitCondition(t, ctx, kube, np, name, status.ConditionReady, metav1.ConditionTrue, "", "")
	eventually(t, 60*time.Second, fmt.Sprintf("NodePool %s status.nodes = %d", name, nodes), func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
			return false, err.Error()
		}
		var list corev1.NodeList
		if err := kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
			return false, err.Error()
		}
		got := int64(-1)
		if np.Status.Nodes != nil {
			got = *np.Status.Nodes
		}
		return got == nodes && int64(len(list.Items)) == nodes, fmt.Sprintf("status.nodes %d, %d Nodes", got, len(list.Items))
	})
}

// waitPodEvent waits for a FailedScheduling event on a pod of app whose
// message contains msg.
func waitPodEvent(t *testing.T, ctx context.Context, kube client.Client, app, msg string) {
	t.Helper()
	eventually(t, 90*time.Second, "FailedScheduling on "+app+" saying "+msg, func() (bool, string) {
		pods, err := podsWithLabel(ctx, kube, "app", app)
		if err != nil || len(pods) == 0 {
			return false, fmt.Sprintf("pods of %s: %v", app, err)
		}
		var list corev1.EventList
		if err := kube.List(ctx, &list, client.InNamespace("default")); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.UID == pods[0].UID && e.Reason == "FailedScheduling" {
				if strings.Contains(e.Message, msg) {
					return true, ""
				}
				seen = append(seen, e.Message)
			}
		}
		return false, fmt.Sprintf("events: %q", seen)
	})
}
