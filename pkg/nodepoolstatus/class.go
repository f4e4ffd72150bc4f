package nodepoolstatus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// Condition reasons on an AKSNodeClass, the Azure provider's where it has
// one (Azure/karpenter-provider-azure pkg/controllers/nodeclass/status:
// subnet.go SubnetIDInvalid, images.go ImagesNotFound).
const (
	ReasonSubnetIDInvalid = "SubnetIDInvalid"
	ReasonImagesNotFound  = "ImagesNotFound"
	// ReasonImageFamilyUnsupported: AKS offers no image of the class's
	// family at the nodes' Kubernetes version (karpfunc's own reason; the
	// provider launches such images anyway).
	ReasonImageFamilyUnsupported     = "ImageFamilyUnsupportedAtKubernetesVersion"
	ReasonKubernetesVersionInvalid   = "KubernetesVersionInvalid"
	ReasonKubernetesVersionUnknown   = "KubernetesVersionUnknown"
	ReasonKubernetesVersionUnsupport = "KubernetesVersionUnsupported"
)

// LabelSKUHyperVGeneration is the Azure provider's instance-type label for
// the Hyper-V generation ("1", "2"), used in status.images requirements as
// the provider writes them (pkg/apis/v1beta1/labels.go).
const LabelSKUHyperVGeneration = v1beta1.Group + "/sku-hyperv-generation"

// ClassOptions is what an AKSNodeClass's status is resolved against: the
// cluster's settings, not the class.
type ClassOptions struct {
	// DefaultSubnetID is the cluster's node subnet (AZURE_SUBNET_ID), used
	// when the class sets none and to check a class's own subnet is in the
	// same VNet.
	DefaultSubnetID string
	// NodeResourceGroup is the cluster's node resource group (MC_…): a
	// cluster subnet in an AKS-managed VNet there admits no custom subnet.
	NodeResourceGroup string
	// KubernetesVersion is the version nodes run (KUBERNETES_VERSION, or
	// the API server's).
	KubernetesVersion string
	// ControlPlaneVersion is the API server's version.
	ControlPlaneVersion string
	// Versions, when set, is asked once per Sync for the nodes' and the
	// control plane's versions, in place of KubernetesVersion and
	// ControlPlaneVersion, so a warm instance sees a control-plane upgrade
	// (the launcher's cached reads). A failed read keeps those two.
	Versions func(ctx context.Context) (node, controlPlane string, err error)
	// Images resolves each image definition to the version launches
	// boot now (the launcher's community-gallery resolver: the pin, or
	// the gallery's latest). nil: ImageVersion for every definition.
	Images ImageResolver
	// ImageVersion is the version used when Images is nil (default
	// nodeimage.ExampleVersion): offline views and tests.
	ImageVersion string
	// RefuseStatic, when set, sets ValidationSucceeded=False
	// (staticcapacity.ReasonDisabled) on every NodePool that sets
	// spec.replicas: static capacity is turned off, and such a pool is
	// refused by name rather than silently left without nodes.
	RefuseStatic bool
}

// ImageResolver is what status asks for the image a class launches per
// architecture and Hyper-V generation (nodeimage.Resolver).
type ImageResolver interface {
	Resolve(ctx context.Context, want nodeimage.Want) (nodeimage.Image, error)
}

// ClassStatus returns class's status as the Azure provider's status
// controller would write it, for what karpfunc checks: the node images of
// its family for every architecture and Hyper-V generation, the Kubernetes
// version, the subnet. Pure: the class is not modified.
func ClassStatus(ctx context.Context, class *v1beta1.AKSNodeClass, opts ClassOptions, clk clock.Clock) v1beta1.AKSNodeClassStatus {
	out := class.DeepCopy()
	conds := out.StatusConditions(status.WithClock(clk))
	images, err := classImages(ctx, *out.DefaultedSpec().ImageFamily, opts)
	var unsupported *nodeimage.UnsupportedVersionError
	switch {
	case errors.As(err, &unsupported):
		out.Status.Images = nil
		conds.SetFalse(v1beta1.ConditionTypeImagesReady, ReasonImageFamilyUnsupported, err.Error())
	case err != nil:
		out.Status.Images = nil
		conds.SetFalse(v1beta1.ConditionTypeImagesReady, ReasonImagesNotFound, err.Error())
	default:
		out.Status.Images = images
		conds.SetTrue(v1beta1.ConditionTypeImagesReady)
	}
	if reason, msg := checkKubernetesVersion(opts.KubernetesVersion, opts.ControlPlaneVersion); reason != "" {
		out.Status.KubernetesVersion = nil
		conds.SetFalse(v1beta1.ConditionTypeKubernetesVersionReady, reason, msg)
	} else {
		kubeVersion := opts.KubernetesVersion
		out.Status.KubernetesVersion = &kubeVersion
		conds.SetTrue(v1beta1.ConditionTypeKubernetesVersionReady)
	}
	if msg := checkSubnet(out.Spec.VNETSubnetID, opts); msg != "" {
		conds.SetFalse(v1beta1.ConditionTypeSubnetsReady, ReasonSubnetIDInvalid, msg)
	} else {
		conds.SetTrue(v1beta1.ConditionTypeSubnetsReady)
	}
	return out.Status
}

// imageTargets are the architectures and Hyper-V generations an
// AKSNodeClass can launch, in the provider's preference order (Gen2 first).
var imageTargets = []struct{ arch, gen, hyperV string }{
	{"amd64", nodeimage.GenerationV2, "2"},
	{"amd64", nodeimage.GenerationV1, "1"},
	{"arm64", nodeimage.GenerationV2, "2"},
	{"arm64", nodeimage.GenerationV1, "1"},
}

// classImages lists family's node images at the nodes' Kubernetes version,
// one per architecture and generation it has one for; an error when AKS
// does not offer the family at that version (*nodeimage.UnsupportedVersionError),
// it has no image at all, or the version is not a node image version.
func classImages(ctx context.Context, family string, opts ClassOptions) ([]v1beta1.NodeImage, error) {
	if _, err := nodeimage.CheckVersion(family, opts.KubernetesVersion); err != nil {
		return nil, err
	}
	var out []v1beta1.NodeImage
	for _, target := range imageTargets {
		img, err := resolveImage(ctx, family, target.arch, target.gen, opts)
		var noImage *nodeimage.NoImageError
		switch {
		case errors.As(err, &noImage):
			continue // e.g. Arm64 Gen1: the family has none, as in AKS
		case err != nil:
			return nil, fmt.Errorf("image family %s: %w", family, err)
		}
		out = append(out, v1beta1.NodeImage{ID: img.ID(), Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{target.arch}},
			{Key: LabelSKUHyperVGeneration, Operator: corev1.NodeSelectorOpIn, Values: []string{target.hyperV}},
		}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image family %s has no node image for any architecture and Hyper-V generation", family)
	}
	return out, nil
}

// resolveImage is the image family boots on arch and generation gen now.
func resolveImage(ctx context.Context, family, arch, gen string, opts ClassOptions) (nodeimage.Image, error) {
	want := nodeimage.Want{Family: family, Architecture: arch, Generations: []string{gen}, KubernetesVersion: opts.KubernetesVersion}
	if opts.Images != nil {
		return opts.Images.Resolve(ctx, want)
	}
	version := opts.ImageVersion
	if version == "" {
		version = nodeimage.ExampleVersion
	}
	return nodeimage.Select(want, version)
}

// checkKubernetesVersion applies the Azure provider's rules for a node
// Kubernetes version against the control plane's (pkg/controllers/
// nodeclass/status/kubernetesversion.go validateK8sVersion): same major,
// minor not newer and at most three behind, patch not newer on the same
// minor. It returns a reason and message, or "" when the version is good.
func checkKubernetesVersion(node, controlPlane string) (string, string) {
	if node == "" {
		return ReasonKubernetesVersionUnknown, "the Kubernetes version of the nodes is not known (app setting KUBERNETES_VERSION, or the API server's version)"
	}
	nv, err := version.ParseSemantic(strings.TrimPrefix(node, "v"))
	if err != nil {
		return ReasonKubernetesVersionInvalid, fmt.Sprintf("Kubernetes version %q is not a version like 1.33.2: %v", node, err)
	}
	if controlPlane == "" {
		return "", ""
	}
	cv, err := version.ParseGeneric(strings.TrimPrefix(controlPlane, "v"))
	if err != nil {
		return ReasonKubernetesVersionInvalid, fmt.Sprintf("control plane version %q is not a version: %v", controlPlane, err)
	}
	switch {
	case nv.Major() != cv.Major():
		return ReasonKubernetesVersionUnsupport, fmt.Sprintf("Kubernetes version %s: major differs from the control plane's %s", node, controlPlane)
	case nv.Minor() > cv.Minor():
		return ReasonKubernetesVersionUnsupport, fmt.Sprintf("Kubernetes version %s is newer than the control plane's %s", node, controlPlane)
	case cv.Minor()-nv.Minor() > 3:
		return ReasonKubernetesVersionUnsupport, fmt.Sprintf("Kubernetes version %s is more than three minor versions behind the control plane's %s", node, controlPlane)
	case nv.Minor() == cv.Minor() && nv.Patch() > cv.Patch():
		return ReasonKubernetesVersionUnsupport, fmt.Sprintf("Kubernetes version %s is a newer patch than the control plane's %s", node, controlPlane)
	}
	return "", ""
}

// subnetID is a parsed subnet ARM ID.
type subnetID struct{ subscription, resourceGroup, vnet, subnet string }

func (s subnetID) sameVNet(o subnetID) bool {
	return strings.EqualFold(s.subscription, o.subscription) && strings.EqualFold(s.resourceGroup, o.resourceGroup) &&
		strings.EqualFold(s.vnet, o.vnet)
}

// parseSubnetID reads a subnet ARM ID as the Azure provider does
// (pkg/utils GetVnetSubnetIDComponents): eleven /-separated segments that
// rebuild, case-insensitively, into the same ID.
func parseSubnetID(id string) (subnetID, bool) {
	segments := strings.Split(id, "/")
	if len(segments) != 11 {
		return subnetID{}, false
	}
	subnet := subnetID{subscription: segments[2], resourceGroup: segments[4], vnet: segments[8], subnet: segments[10]}
	rebuilt := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
		subnet.subscription, subnet.resourceGroup, subnet.vnet, subnet.subnet)
	return subnet, strings.EqualFold(rebuilt, id) && subnet.subscription != "" && subnet.resourceGroup != "" && subnet.vnet != "" && subnet.subnet != ""
}

// managedVNet is the name AKS gives the VNet it manages (provider's
// pkg/utils IsAKSManagedVNET: aks-vnet-<8 digits>, subnet aks-subnet, in
// the node resource group).
var managedVNet = regexp.MustCompile(`(?i)^aks-vnet-\d{8}$`)

// checkSubnet applies the Azure provider's subnet rules (pkg/controllers/
// nodeclass/status/subnet.go): the ID parses; a subnet other than the
// cluster's must be in the cluster's VNet, and that VNet must not be the
// one AKS manages. It returns the reason's message, or "" when good.
// Whether the subnet exists is ARM's answer at the NIC PUT (karpfunc
// makes no subnet GET).
func checkSubnet(id *string, opts ClassOptions) string {
	if id == nil {
		return ""
	}
	own, ok := parseSubnetID(*id)
	if !ok {
		return fmt.Sprintf("Failed to parse vnetSubnetID %s", *id)
	}
	if opts.DefaultSubnetID == "" || strings.EqualFold(*id, opts.DefaultSubnetID) {
		return ""
	}
	cluster, ok := parseSubnetID(opts.DefaultSubnetID)
	if !ok {
		return "" // the cluster's own setting is checked where it is read
	}
	managed := managedVNet.MatchString(cluster.vnet) && strings.EqualFold(cluster.resourceGroup, opts.NodeResourceGroup) &&
		strings.EqualFold(cluster.subnet, "aks-subnet")
	switch {
	case managed && cluster.sameVNet(own):
		return "custom subnet cannot be in the same VNet as cluster managed VNet: " + *id
	case !cluster.sameVNet(own):
		return "vnetSubnetID does not match the cluster subscription, resource group, or virtual network: " + *id
	}
	return ""
}
