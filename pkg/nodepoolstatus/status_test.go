package nodepoolstatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

const clusterSubnet = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"

func class(family, subnet string) *v1beta1.AKSNodeClass {
	c := &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}
	if family != "" {
		c.Spec.ImageFamily = &family
	}
	if subnet != "" {
		c.Spec.VNETSubnetID = &subnet
	}
	return c
}

func condition(conds []status.Condition, typ string) status.Condition {
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	return status.Condition{Type: typ, Status: "absent"}
}

// TestClassStatus: each check of the Azure provider's status controller
// karpfunc makes, True and False, and Ready from them.
func TestClassStatus(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	good := ClassOptions{DefaultSubnetID: clusterSubnet, NodeResourceGroup: "MC_rg", KubernetesVersion: "1.33.2", ControlPlaneVersion: "v1.33.2"}
	for _, c := range []struct {
		name      string
		class     *v1beta1.AKSNodeClass
		opts      ClassOptions
		falseType string // "" = Ready
		reason    string
		images    int
	}{
		{name: "defaults", class: class("", ""), opts: good, images: 3},
		{name: "azure linux", class: class(v1beta1.ImageFamilyAzureLinux, ""), opts: good, images: 3},
		{name: "subnet in the cluster's vnet", class: class("", strings.Replace(clusterSubnet, "/nodes", "/other", 1)), opts: good, images: 3},
		{name: "subnet in another vnet", class: class("", strings.Replace(clusterSubnet, "/vnet/", "/elsewhere/", 1)), opts: good,
			falseType: v1beta1.ConditionTypeSubnetsReady, reason: ReasonSubnetIDInvalid, images: 3},
		{name: "subnet id that does not parse", class: class("", "/subscriptions/sub/resourceGroups/rg/subnets/x"), opts: good,
			falseType: v1beta1.ConditionTypeSubnetsReady, reason: ReasonSubnetIDInvalid, images: 3},
		{name: "custom subnet in the AKS-managed vnet",
			class: class("", "/subscriptions/sub/resourceGroups/MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/mine"),
			opts: ClassOptions{DefaultSubnetID: "/subscriptions/sub/resourceGroups/MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet",
				NodeResourceGroup: "MC_rg", KubernetesVersion: "1.33.2"},
			falseType: v1beta1.ConditionTypeSubnetsReady, reason: ReasonSubnetIDInvalid, images: 3},
		{name: "unknown family", class: class("Windows2022", ""), opts: good,
			falseType: v1beta1.ConditionTypeImagesReady, reason: ReasonImagesNotFound},
		{name: "image version not an AKS one", class: class("", ""), opts: ClassOptions{KubernetesVersion: "1.33.2", ImageVersion: "latest"},
			falseType: v1beta1.ConditionTypeImagesReady, reason: ReasonImagesNotFound},
		{name: "no kubernetes version", class: class("", ""), opts: ClassOptions{},
			falseType: v1beta1.ConditionTypeKubernetesVersionReady, reason: ReasonKubernetesVersionUnknown},
		// Learn's support table (aks/upgrade-os-version): Ubuntu 22.04 at
		// 1.25-1.33, Azure Linux 3.0 at 1.28-1.36; Ubuntu follows the version.
		{name: "Ubuntu2204 at 1.37", class: class(v1beta1.ImageFamilyUbuntu2204, ""), opts: ClassOptions{KubernetesVersion: "1.37.2", ControlPlaneVersion: "1.37.2"},
			falseType: v1beta1.ConditionTypeImagesReady, reason: ReasonImageFamilyUnsupported},
		{name: "AzureLinux at 1.37", class: class(v1beta1.ImageFamilyAzureLinux, ""), opts: ClassOptions{KubernetesVersion: "1.37.2", ControlPlaneVersion: "1.37.2"},
			falseType: v1beta1.ConditionTypeImagesReady, reason: ReasonImageFamilyUnsupported},
		{name: "Ubuntu at 1.37", class: class(v1beta1.ImageFamilyUbuntu, ""), opts: ClassOptions{KubernetesVersion: "1.37.2", ControlPlaneVersion: "1.37.2"}, images: 3},
		{name: "node minor newer than the control plane", class: class("", ""), opts: ClassOptions{KubernetesVersion: "1.34.0", ControlPlaneVersion: "1.33.2"},
			falseType: v1beta1.ConditionTypeKubernetesVersionReady, reason: ReasonKubernetesVersionUnsupport, images: 3},
		{name: "node four minors behind", class: class("", ""), opts: ClassOptions{KubernetesVersion: "1.29.0", ControlPlaneVersion: "1.33.2"},
			falseType: v1beta1.ConditionTypeKubernetesVersionReady, reason: ReasonKubernetesVersionUnsupport, images: 3},
		{name: "node three minors behind", class: class("", ""), opts: ClassOptions{KubernetesVersion: "1.30.9", ControlPlaneVersion: "1.33.2"}, images: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ClassStatus(context.Background(), c.class, c.opts, clk)
			if len(got.Images) != c.images {
				t.Errorf("%d images, want %d: %+v", len(got.Images), c.images, got.Images)
			}
			ready := condition(got.Conditions, status.ConditionReady)
			if c.falseType == "" {
				if ready.Status != metav1.ConditionTrue {
					t.Fatalf("Ready=%s (%s: %s), want True; conditions %+v", ready.Status, ready.Reason, ready.Message, got.Conditions)
				}
				if got.KubernetesVersion == nil || *got.KubernetesVersion != c.opts.KubernetesVersion {
					t.Errorf("kubernetesVersion %v, want %s", got.KubernetesVersion, c.opts.KubernetesVersion)
				}
				return
			}
			sub := condition(got.Conditions, c.falseType)
			if sub.Status != metav1.ConditionFalse || sub.Reason != c.reason || sub.Message == "" {
				t.Errorf("%s=%s reason %q message %q, want False with reason %s and a message", c.falseType, sub.Status, sub.Reason, sub.Message, c.reason)
			}
			// Ready as operatorpkg derives it, as on the provider's classes.
			if ready.Status != metav1.ConditionFalse || ready.Reason != "UnhealthyDependents" || !strings.Contains(ready.Message, c.falseType+"=False") {
				t.Errorf("Ready=%s reason %q message %q, want False, UnhealthyDependents, naming %s", ready.Status, ready.Reason, ready.Message, c.falseType)
			}
		})
	}
}

// TestPoolStatus: NodeClassReady mirrors the class, ValidationSucceeded is
// Karpenter's runtime validation, Ready is both, and the counts.
func TestPoolStatus(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	readyClass := class("", "")
	readyClass.Status = ClassStatus(context.Background(), readyClass, ClassOptions{KubernetesVersion: "1.33.2"}, clk)
	brokenClass := class("", "/subscriptions/sub/resourceGroups/rg/subnets/x")
	brokenClass.Status = ClassStatus(context.Background(), brokenClass, ClassOptions{KubernetesVersion: "1.33.2"}, clk)
	unresolved := class("", "")
	deleting := class("", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	pool := func(ref string) *karpv1.NodePool {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", Generation: 2}}
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: ref}
		return np
	}
	restricted := pool("default")
	restricted.Spec.Template.Labels = map[string]string{karpv1.NodePoolLabelKey: "other"}
	claim := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}}}
	for _, c := range []struct {
		name    string
		np      *karpv1.NodePool
		class   *v1beta1.AKSNodeClass
		reason  string // of the False condition; "" = Ready
		message string
	}{
		{name: "ready", np: pool("default"), class: readyClass},
		{name: "class missing", np: pool("absent"), class: readyClass, reason: ReasonNodeClassNotFound, message: "AKSNodeClass absent not found"},
		{name: "class not ready", np: pool("default"), class: brokenClass, reason: ReasonSubnetIDInvalid, message: "vnetSubnetID"},
		{name: "class never resolved", np: pool("default"), class: unresolved, reason: ReasonNodeClassReadinessUnknown},
		{name: "class deleting", np: pool("default"), class: deleting, reason: ReasonNodeClassTerminating},
		{name: "restricted label", np: restricted, class: readyClass, reason: ReasonNodePoolValidationFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.np.DeepCopy()
			got.Status = PoolStatus(context.Background(), c.np, map[string]*v1beta1.AKSNodeClass{c.class.Name: c.class}, []karpv1.NodeClaim{claim}, clk)
			if got.Status.Nodes == nil || *got.Status.Nodes != 1 {
				t.Errorf("status.nodes %v, want 1", got.Status.Nodes)
			}
			if _, ok := got.Status.Resources["cpu"]; !ok {
				t.Errorf("status.resources %v has no cpu (Karpenter writes it, zero when none)", got.Status.Resources)
			}
			why := NotReadyReason(got)
			switch {
			case c.reason == "" && why != "":
				t.Fatalf("not ready: %s", why)
			case c.reason != "" && (!strings.Contains(why, c.reason) || !strings.Contains(why, c.message)):
				t.Fatalf("not ready because %q; want reason %s and %q", why, c.reason, c.message)
			}
		})
	}
}
