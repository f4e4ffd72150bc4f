package azure

import (
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// AKS node labels the node image's kubelet registers with.
const (
	LabelAKSRole                  = "kubernetes.azure.com/role"
	LabelAKSCluster               = "kubernetes.azure.com/cluster"
	LabelAKSMode                  = "kubernetes.azure.com/mode"
	LabelAKSOSSKU                 = "kubernetes.azure.com/os-sku"
	LabelAKSKubeletIdentity       = "kubernetes.azure.com/kubelet-identity-client-id"
	LabelAKSNetworkSubnet         = "kubernetes.azure.com/network-subnet"
	LabelAKSVNetGUID              = "kubernetes.azure.com/nodenetwork-vnetguid"
	LabelAKSAzureCNIOverlay       = "kubernetes.azure.com/azure-cni-overlay"
	LabelAKSPodNetworkType        = "kubernetes.azure.com/podnetwork-type"
	LabelAKSNetworkStatelessCNI   = "kubernetes.azure.com/network-stateless-cni"
	LabelAKSEBPFDataplane         = "kubernetes.azure.com/ebpf-dataplane"
	labelValueAgent, labelValueUs = "agent", "user"
)

// nodeLabels is KUBELET_NODE_LABELS: AKS's own node labels, overridden by
// the NodeClaim's, without those the kubelet may not set; "k=v" joined by
// commas, sorted by key.
func (b NodeBootstrap) nodeLabels(subnetName string, kv *version.Version) string {
	cluster := b.Cluster
	labels := map[string]string{
		LabelAKSRole:    labelValueAgent,
		LabelAKSCluster: ClusterLabelValue(b.ResourceGroup),
		LabelAKSMode:    labelValueUs,
		LabelAKSOSSKU:   osSKU(b.ImageFamily),
		// The kubelet registers the taints itself: registration must not
		// sync them again (they would race with startup taints removed by
		// then).
		karpv1.NodeDoNotSyncTaintsLabelKey: "true",
	}
	if cluster.KubeletIdentityClientID != "" {
		labels[LabelAKSKubeletIdentity] = cluster.KubeletIdentityClientID
	}
	if cluster.NetworkPlugin == NetworkPluginAzure && cluster.NetworkPluginMode == NetworkPluginModeOver {
		labels[LabelAKSNetworkSubnet] = subnetName
		labels[LabelAKSAzureCNIOverlay] = "true"
		labels[LabelAKSPodNetworkType] = NetworkPluginModeOver
		labels[LabelAKSNetworkStatelessCNI] = strconv.FormatBool(kv.Minor() >= 34)
		if cluster.VNetGUID != "" {
			labels[LabelAKSVNetGUID] = cluster.VNetGUID
		}
	}
	if cluster.NetworkDataplane == NetworkDataplaneCil {
		labels[LabelAKSEBPFDataplane] = NetworkDataplaneCil
	}
	for key, value := range b.Labels {
		labels[key] = value
	}
	keys := make([]string, 0, len(labels))
	for key := range labels {
		if KubeletCanSetLabel(key) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, key := range keys {
		parts[i] = key + "=" + labels[key]
	}
	return strings.Join(parts, ",")
}

func osSKU(family string) string {
	if family == v1beta1.ImageFamilyAzureLinux {
		return "AzureLinux"
	}
	return "Ubuntu"
}

// ClusterLabelValue is the kubernetes.azure.com/cluster label value for a
// node resource group: parentheses become dashes, at most 63 characters,
// and a trailing - _ or . is followed (or replaced, at 63) by z.
func ClusterLabelValue(nodeResourceGroup string) string {
	value := strings.NewReplacer("(", "-", ")", "-").Replace(nodeResourceGroup)
	if len(value) > 63 {
		value = value[:63]
	}
	if strings.HasSuffix(value, "-") || strings.HasSuffix(value, "_") || strings.HasSuffix(value, ".") {
		if len(value) > 62 {
			return value[:len(value)-1] + "z"
		}
		return value + "z"
	}
	return value
}

// kubeletLabels are the labels under kubernetes.io a kubelet may set on its
// own Node (NodeRestriction's allowlist); kubelet.kubernetes.io/ and
// node.kubernetes.io/ prefixes are allowed too.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

// KubeletCanSetLabel reports whether a kubelet may register its Node with
// label key: the kubelet refuses --node-labels under kubernetes.io or k8s.io
// off NodeRestriction's allowlist, and NodeRestriction refuses them too.
// Registration puts such labels on the Node instead.
func KubeletCanSetLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	ns = strings.ToLower(ns)
	if ns != "kubernetes.io" && !strings.HasSuffix(ns, ".kubernetes.io") && ns != "k8s.io" && !strings.HasSuffix(ns, ".k8s.io") {
		return true
	}
	if strings.HasPrefix(ns, "node-restriction.kubernetes.io") {
		return false
	}
	for _, allowed := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if ns == allowed || strings.HasSuffix(ns, "."+allowed) {
			return true
		}
	}
	return false
}
