package v1beta1

import (
	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
)

// kubectl get aksnodeclasses prints the provider's columns
// (Azure/karpenter-provider-azure pkg/apis/v1beta1/aksnodeclass.go: Ready,
// Age, ImageFamily), the image family shown by default rather than only in
// -o wide (see the printcolumn markers on AKSNodeClass).

// Condition types of an AKSNodeClass, with the Azure provider's names
// (Azure/karpenter-provider-azure pkg/apis/v1beta1/aksnodeclass_status.go).
// Ready is True when all of them are.
const (
	// ConditionTypeImagesReady: status.images holds a node image for every
	// architecture and Hyper-V generation the class can launch.
	ConditionTypeImagesReady = "ImagesReady"
	// ConditionTypeKubernetesVersionReady: status.kubernetesVersion is the
	// version nodes of this class run, and the control plane supports it.
	ConditionTypeKubernetesVersionReady = "KubernetesVersionReady"
	// ConditionTypeSubnetsReady: spec.vnetSubnetID (or the cluster's
	// default subnet) is a subnet nodes may use.
	ConditionTypeSubnetsReady = "SubnetsReady"
)

// NodeImage is one node image the class launches, and the instance types
// it is for (the provider's status.images entry).
type NodeImage struct {
	// ID is the image's ARM ID, e.g. a community gallery image version
	// /CommunityGalleries/<gallery>/images/<definition>/versions/<version>.
	ID string `json:"id"`
	// Requirements an instance type meets to boot this image (architecture,
	// Hyper-V generation).
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// AKSNodeClassStatus is the resolved state of an AKSNodeClass, with the
// Azure provider's field names.
type AKSNodeClassStatus struct {
	// Images are the node images the class launches.
	// +optional
	Images []NodeImage `json:"images,omitempty"`
	// KubernetesVersion is the Kubernetes version of the class's nodes.
	// +optional
	KubernetesVersion *string `json:"kubernetesVersion,omitempty"`
	// Conditions: ImagesReady, KubernetesVersionReady, SubnetsReady and
	// Ready from them.
	// +optional
	Conditions []status.Condition `json:"conditions,omitempty"`
}

// StatusConditions returns the class's conditions, Ready derived from the
// provider's sub-conditions karpfunc checks.
func (in *AKSNodeClass) StatusConditions(opts ...status.ForOption) status.ConditionSet {
	return status.NewReadyConditions(ConditionTypeImagesReady, ConditionTypeKubernetesVersionReady, ConditionTypeSubnetsReady).For(in, opts...)
}

// GetConditions implements status.Object.
func (in *AKSNodeClass) GetConditions() []status.Condition { return in.Status.Conditions }

// SetConditions implements status.Object.
func (in *AKSNodeClass) SetConditions(conditions []status.Condition) {
	in.Status.Conditions = conditions
}
