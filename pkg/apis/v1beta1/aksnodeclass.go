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
// Every field of the Azure provider's AKSNodeClass v1beta1 is here with the
// provider's name and type (karpenter-provider-azure@352646f5
// pkg/apis/v1beta1/aksnodeclass.go), so a NAP manifest is never pruned: a
// field karpfunc implements takes effect, and a setting it does not
// implement is refused by a CEL rule whose message names the field
// ("spec.<path> ...") and says what to do. The schema test in package apis
// holds the provider's field list and fails on any provider field that is
// neither here nor refused.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fipsMode) || self.fipsMode != 'FIPS'",message="spec.fipsMode: FIPS is not supported by karpfunc: it boots no FIPS node images; remove spec.fipsMode or set it to Disabled, or use NAP for FIPS node pools"
// +kubebuilder:validation:XValidation:rule="!has(self.security) || !has(self.security.trustedLaunch) || !((has(self.security.trustedLaunch.vtpm) && self.security.trustedLaunch.vtpm) || (has(self.security.trustedLaunch.secureBoot) && self.security.trustedLaunch.secureBoot))",message="spec.security.trustedLaunch: Trusted Launch (vtpm, secureBoot) is not supported by karpfunc: it boots no Trusted Launch node images; remove spec.security.trustedLaunch or set vtpm and secureBoot to false"
// +kubebuilder:validation:XValidation:rule="!has(self.localDNS)",message="spec.localDNS is not supported by karpfunc: nodes use the cluster's DNS as configured by AKS; remove spec.localDNS"
// +kubebuilder:validation:XValidation:rule="!has(self.artifactStreaming) || !has(self.artifactStreaming.enabled) || !self.artifactStreaming.enabled",message="spec.artifactStreaming: artifact streaming is not supported by karpfunc; remove spec.artifactStreaming or set enabled to false"
// +kubebuilder:validation:XValidation:rule="!has(self.linuxOSConfig) || !has(self.linuxOSConfig.swapFileSize)",message="spec.linuxOSConfig.swapFileSize: swap files are not supported by karpfunc; remove spec.linuxOSConfig.swapFileSize"
// +kubebuilder:validation:XValidation:rule="!has(self.linuxOSConfig) || !has(self.linuxOSConfig.transparentHugePageEnabled)",message="spec.linuxOSConfig.transparentHugePageEnabled is not supported by karpfunc yet; remove it (spec.linuxOSConfig.sysctls is supported)"
// +kubebuilder:validation:XValidation:rule="!has(self.linuxOSConfig) || !has(self.linuxOSConfig.transparentHugePageDefrag)",message="spec.linuxOSConfig.transparentHugePageDefrag is not supported by karpfunc yet; remove it (spec.linuxOSConfig.sysctls is supported)"
// +kubebuilder:validation:XValidation:rule="!has(self.kubelet) || !has(self.kubelet.failSwapOn) || self.kubelet.failSwapOn",message="spec.kubelet.failSwapOn: false is not supported by karpfunc: nodes have no swap (spec.linuxOSConfig.swapFileSize is refused); remove spec.kubelet.failSwapOn or set it to true"
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
	// FIPSMode asks for FIPS node images. Only Disabled (the default) is
	// accepted: karpfunc boots no FIPS images.
	// +kubebuilder:validation:Enum:={FIPS,Disabled}
	// +optional
	FIPSMode *FIPSMode `json:"fipsMode,omitempty"`
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
	// Security holds the VM security settings: encryptionAtHost sets the
	// VM's securityProfile.encryptionAtHost; Trusted Launch is refused.
	// +optional
	Security *Security `json:"security,omitempty"`
	// LocalDNS configures a per-node DNS cache; refused (see the CEL rule).
	// +optional
	LocalDNS *LocalDNS `json:"localDNS,omitempty"`
	// GPU configures GPU driver management on GPU sizes: Driver (the
	// default) installs the NVIDIA driver and offers only GPU sizes AKS
	// installs a driver for; None installs no driver and offers every
	// supported GPU size (package gpu).
	// +optional
	GPU *GPU `json:"gpu,omitempty"`
	// ArtifactStreaming streams container images on demand; only
	// enabled=false is accepted.
	// +optional
	ArtifactStreaming *ArtifactStreaming `json:"artifactStreaming,omitempty"`
	// LinuxOSConfig is AKS's custom Linux OS configuration: sysctls are
	// written on the node at boot; transparent huge pages and swap are
	// refused.
	// +optional
	LinuxOSConfig *LinuxOSConfiguration `json:"linuxOSConfig,omitempty"`
}

// FIPSMode is FIPS or Disabled, as the provider names them.
type FIPSMode string

const (
	FIPSModeFIPS     FIPSMode = "FIPS"
	FIPSModeDisabled FIPSMode = "Disabled"
)

// Security is the provider's security block.
type Security struct {
	// EncryptionAtHost encrypts the VM's temp and cache disks on the host.
	// +optional
	EncryptionAtHost *bool `json:"encryptionAtHost,omitempty"`
	// TrustedLaunch asks for Trusted Launch VMs; only false values are
	// accepted.
	// +optional
	TrustedLaunch *TrustedLaunch `json:"trustedLaunch,omitempty"`
}

// TrustedLaunch is the provider's Trusted Launch block.
type TrustedLaunch struct {
	// +optional
	VTPM *bool `json:"vtpm,omitempty"`
	// +optional
	SecureBoot *bool `json:"secureBoot,omitempty"`
}

// ArtifactStreaming is the provider's artifact streaming block.
type ArtifactStreaming struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// GPUMode is Driver or None, as the provider names them.
// +kubebuilder:validation:Enum:={Driver,None}
type GPUMode string

const (
	GPUModeDriver GPUMode = "Driver"
	GPUModeNone   GPUMode = "None"
)

// GPU is the provider's GPU block.
type GPU struct {
	// Mode is Driver (the node's provisioning installs the NVIDIA driver;
	// only NVIDIA GPU sizes are offered) or None (no driver is installed,
	// every supported GPU size is offered: bring the driver, for example
	// with a GPU operator). Unset is Driver. Either way the GPU device
	// plugin is the user's to run. Ignored on sizes without GPUs.
	// +optional
	Mode *GPUMode `json:"mode,omitempty"`
}

// LocalDNS has the provider's localDNS shape so a NAP manifest is refused
// by name rather than pruned; karpfunc does not configure local DNS.
type LocalDNS struct {
	// +kubebuilder:validation:Enum:={Preferred,Required,Disabled}
	// +optional
	Mode string `json:"mode,omitempty"`
	// +optional
	VnetDNSOverrides []LocalDNSZoneOverride `json:"vnetDNSOverrides,omitempty"`
	// +optional
	KubeDNSOverrides []LocalDNSZoneOverride `json:"kubeDNSOverrides,omitempty"`
}

// LocalDNSZoneOverride is one zone of a LocalDNS override list.
type LocalDNSZoneOverride struct {
	// +optional
	Zone string `json:"zone,omitempty"`
	// +kubebuilder:validation:Enum:={Error,Log}
	// +optional
	QueryLogging string `json:"queryLogging,omitempty"`
	// +kubebuilder:validation:Enum:={PreferUDP,ForceTCP}
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// +kubebuilder:validation:Enum:={ClusterCoreDNS,VnetDNS}
	// +optional
	ForwardDestination string `json:"forwardDestination,omitempty"`
	// +kubebuilder:validation:Enum:={Sequential,RoundRobin,Random}
	// +optional
	ForwardPolicy string `json:"forwardPolicy,omitempty"`
	// +optional
	MaxConcurrent *int32 `json:"maxConcurrent,omitempty"`
	// +optional
	CacheDuration *string `json:"cacheDuration,omitempty"`
	// +optional
	ServeStaleDuration *string `json:"serveStaleDuration,omitempty"`
	// +kubebuilder:validation:Enum:={Verify,Immediate,Disable}
	// +optional
	ServeStale string `json:"serveStale,omitempty"`
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
	// FailSwapOn makes the kubelet refuse to start with swap on; only true
	// (the kubelet's default) is accepted, as karpfunc nodes have no swap.
	// +optional
	FailSwapOn *bool `json:"failSwapOn,omitempty"`
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
