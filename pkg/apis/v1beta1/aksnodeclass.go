package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, SchemeGroupVersion) }

// Image families karpfunc can boot. The names match the Azure provider's.
const (
	ImageFamilyUbuntu     = "Ubuntu"
	ImageFamilyUbuntu2204 = "Ubuntu2204"
	ImageFamilyUbuntu2404 = "Ubuntu2404"
	ImageFamilyAzureLinux = "AzureLinux"
)

// Defaults applied by the CRD (and by DefaultedSpec for objects read from
// files, which never went through the API server).
const (
	DefaultOSDiskSizeGB int32 = 128
	// DefaultImageFamily is the Azure provider's default (Ubuntu): its
	// operating system follows the cluster's Kubernetes version (22.04
	// before 1.34, 24.04 from 1.34; package nodeimage).
	DefaultImageFamily = ImageFamilyUbuntu
	// DefaultMaxPods is AKS's default for Azure CNI overlay, which NAP uses;
	// other networks pass theirs to DefaultedSpecFor.
	DefaultMaxPods int32 = 250
)

// AKSNodeClassSpec is the Azure-specific configuration of the nodes a NodePool
// launches.
//
// Fields the Azure provider has but karpfunc does not implement yet are kept
// in the schema so that a manifest setting them is rejected with a message
// that names the field, instead of being silently pruned by the API server.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fipsMode)",message="fipsMode is not supported by karpfunc yet; remove spec.fipsMode (FIPS images come with a later release)"
// +kubebuilder:validation:XValidation:rule="!has(self.security)",message="security is not supported by karpenter.azure.com/v1beta1 in karpfunc yet; remove spec.security"
// +kubebuilder:validation:XValidation:rule="!has(self.localDNS)",message="localDNS is not supported by karpfunc yet; remove spec.localDNS"
// +kubebuilder:validation:XValidation:rule="!has(self.artifactStreaming)",message="artifactStreaming is not supported by karpfunc yet; remove spec.artifactStreaming"
type AKSNodeClassSpec struct {
	// VNETSubnetID is the ARM ID of the subnet node NICs attach to. Empty means
	// the cluster's default node subnet.
	// +kubebuilder:validation:Pattern=`(?i)^/subscriptions/[^/]+/resourceGroups/[a-zA-Z0-9_\-().]{0,89}[a-zA-Z0-9_\-()]/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+$`
	// +optional
	VNETSubnetID *string `json:"vnetSubnetID,omitempty"`
	// OSDiskSizeGB is the size of the OS disk in GB.
	// +kubebuilder:default=128
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=2048
	// +optional
	OSDiskSizeGB *int32 `json:"osDiskSizeGB,omitempty"`
	// ImageFamily is the node image family. Ubuntu and AzureLinux follow
	// the cluster's Kubernetes version (Ubuntu 24.04 from 1.34, else 22.04;
	// Azure Linux 3.0 from 1.32); Ubuntu2204 and Ubuntu2404 are fixed, and
	// a family AKS does not support at the cluster's version makes the
	// class's ImagesReady False.
	// +kubebuilder:default=Ubuntu
	// +kubebuilder:validation:Enum:={Ubuntu,Ubuntu2204,Ubuntu2404,AzureLinux}
	// +optional
	ImageFamily *string `json:"imageFamily,omitempty"`
	// MaxPods is the most pods a node may run; it also sets the node's pod
	// capacity.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=250
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// Tags are added to every Azure resource launched for this class.
	// +kubebuilder:validation:XValidation:message="tag keys must not contain <, >, %, &, \\ or ? (an Azure restriction)",rule="self.all(k, !k.matches('[<>%&\\\\\\\\?]'))"
	// +kubebuilder:validation:MaxProperties=50
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet tunes the kubelet on the nodes.
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`

	// Unsupported upstream fields: present only so the CEL rules above can
	// reject them by name.

	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=boolean
	// +optional
	FIPSMode *bool `json:"fipsMode,omitempty"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Security *runtime.RawExtension `json:"security,omitempty"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	LocalDNS *runtime.RawExtension `json:"localDNS,omitempty"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	ArtifactStreaming *runtime.RawExtension `json:"artifactStreaming,omitempty"`
}

// KubeletConfiguration is the subset of kubelet settings the Azure provider
// exposes, with the same names.
// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ? self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true"
type KubeletConfiguration struct {
	// +kubebuilder:validation:Enum:={none,static}
	// +kubebuilder:default="none"
	// +optional
	CPUManagerPolicy string `json:"cpuManagerPolicy,omitempty"`
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
	// +optional
	CPUCFSQuotaPeriod metav1.Duration `json:"cpuCFSQuotaPeriod,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// +kubebuilder:validation:Enum:={restricted,best-effort,none,single-numa-node}
	// +kubebuilder:default="none"
	// +optional
	TopologyManagerPolicy string `json:"topologyManagerPolicy,omitempty"`
	// +optional
	AllowedUnsafeSysctls []string `json:"allowedUnsafeSysctls,omitempty"`
	// +kubebuilder:validation:Pattern=`^\d+(E|P|T|G|M|K|Ei|Pi|Ti|Gi|Mi|Ki)$`
	// +optional
	ContainerLogMaxSize string `json:"containerLogMaxSize,omitempty"`
	// +kubebuilder:validation:Minimum:=2
	// +optional
	ContainerLogMaxFiles *int32 `json:"containerLogMaxFiles,omitempty"`
	// +optional
	PodPidsLimit *int64 `json:"podPidsLimit,omitempty"`
}

// AKSNodeClass is the Schema for the AKSNodeClass API.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=aksnodeclasses,scope=Cluster,categories=karpenter,shortName={aksnc,aksncs}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageFamily",type="string",JSONPath=".spec.imageFamily"
type AKSNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AKSNodeClassSpec   `json:"spec,omitempty"`
	Status AKSNodeClassStatus `json:"status,omitempty"`
}

// AKSNodeClassList contains a list of AKSNodeClass.
// +kubebuilder:object:root=true
type AKSNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AKSNodeClass `json:"items"`
}

// DefaultedSpecFor is DefaultedSpec with defaultMaxPods as the max pods
// default: the cluster network's (AKS's 30 on the node subnet, 250 on
// overlay and plugin none; pkg/azure DefaultMaxPods). 0 is DefaultMaxPods.
func (in *AKSNodeClass) DefaultedSpecFor(defaultMaxPods int32) AKSNodeClassSpec {
	spec := in.DefaultedSpec()
	if in.Spec.MaxPods == nil && defaultMaxPods > 0 {
		spec.MaxPods = &defaultMaxPods
	}
	return spec
}

// DefaultedSpec returns the spec with the CRD's defaults filled in, for
// objects that did not come through the API server (plan input files).
func (in *AKSNodeClass) DefaultedSpec() AKSNodeClassSpec {
	spec := *in.Spec.DeepCopy()
	if spec.OSDiskSizeGB == nil {
		size := DefaultOSDiskSizeGB
		spec.OSDiskSizeGB = &size
	}
	if spec.ImageFamily == nil {
		family := DefaultImageFamily
		spec.ImageFamily = &family
	}
	if spec.MaxPods == nil {
		maxPods := DefaultMaxPods
		spec.MaxPods = &maxPods
	}
	return spec
}
