package armemulator

import (
	"fmt"
	"strings"
)

// ManagedCluster is the AKS cluster the emulated nodes join, as `az aks
// show` reports it (networkProfile): what a node's provisioning must fit.
// The zero value is what `az aks create` makes today: Azure CNI overlay
// (networkPlugin azure, networkPluginMode overlay), network policy none.
type ManagedCluster struct {
	// NetworkPlugin is azure or none ("" is azure).
	NetworkPlugin string
	// NetworkPluginMode is overlay or "" (the node subnet); with the zero
	// NetworkPlugin too, it is overlay.
	NetworkPluginMode string
	// NetworkDataplane is azure or cilium ("" is azure).
	NetworkDataplane string
}

// agentBakerNetworkPlugin is the NETWORK_PLUGIN a node of c must be
// provisioned with. AgentBaker installs the classic azure-vnet CNI and its
// conflist (10-azure.conflist: pod IPs are the NIC's secondary IP
// configurations) only for "azure" (Azure/AgentBaker@06836ee2
// parts/linux/cloud-init/artifacts/cse_config.sh:526-537 configureCNIIPTables,
// cse_install.sh:132-135 installNetworkPlugin); with "none" it installs no
// CNI configuration and leaves it to the cluster's own: azure-cns on
// overlay, the Cilium agent with the cilium dataplane. So only classic
// Azure CNI (plugin azure on the node subnet, azure dataplane) needs
// "azure"; the Azure provider sends "none" for overlay, Cilium on the
// node subnet and plugin none (Azure/karpenter-provider-azure@352646f5
// pkg/providers/launchtemplate/launchtemplate.go:204-210). Written here
// from those sources, not taken from pkg/azure, which it checks.
func (c ManagedCluster) agentBakerNetworkPlugin() string {
	plugin, mode, dataplane := c.NetworkPlugin, c.NetworkPluginMode, c.NetworkDataplane
	if plugin == "" {
		plugin = "azure"
		if mode == "" {
			mode = "overlay"
		}
	}
	if plugin == "azure" && mode == "" && dataplane != "cilium" {
		return "azure"
	}
	return "none"
}

// networkProblem says why a node of c provisioned with NETWORK_PLUGIN
// plugin gets no working pod network ("" when it does): with "azure" on a
// cluster whose pods are not on the NIC, the classic conflist hands pods
// NIC addresses the overlay or Cilium does not route; with "none" on
// classic Azure CNI nothing installs a CNI configuration, and the kubelet
// reports NetworkPluginNotReady.
func (c ManagedCluster) networkProblem(plugin string) string {
	want := c.agentBakerNetworkPlugin()
	if plugin == want {
		return ""
	}
	profile := c.describe()
	if plugin == "azure" {
		return "NETWORK_PLUGIN=azure installs the classic azure-vnet CNI configuration (pod IPs from the NIC), but the cluster runs " + profile +
			": its pods would get addresses its network does not route (want NETWORK_PLUGIN=none)"
	}
	return "NETWORK_PLUGIN=" + plugin + " installs no CNI configuration, but the cluster runs " + profile +
		", which needs the node's azure-vnet CNI (want NETWORK_PLUGIN=azure): the kubelet reports NetworkPluginNotReady"
}

func (c ManagedCluster) describe() string {
	plugin, mode, dataplane := c.NetworkPlugin, c.NetworkPluginMode, c.NetworkDataplane
	if plugin == "" {
		plugin = "azure"
		if mode == "" {
			mode = "overlay"
		}
	}
	if dataplane == "" {
		dataplane = "azure"
	}
	if mode == "" {
		mode = "node subnet"
	}
	return "networkPlugin " + plugin + ", " + mode + ", dataplane " + dataplane
}

// imageSupport is the Kubernetes minor versions AKS supports each node
// image's operating system at, by image definition prefix (Learn,
// "Upgrade operating system (OS) versions in AKS",
// https://learn.microsoft.com/azure/aks/upgrade-os-version, Supported OS
// versions: Ubuntu2204 1.25 to 1.33, Ubuntu2404 1.32 to 1.38, AzureLinux3
// 1.28 to 1.36). Azure Linux 2.0 (V2*) images were removed from AKS on
// 2026-03-31 (Learn, aks/auto-upgrade-node-os-image): no version.
var imageSupport = []struct {
	prefix, os         string
	minMinor, maxMinor int
}{
	{"2204", "Ubuntu 22.04", 25, 33},
	{"2404", "Ubuntu 24.04", 32, 38},
	{"V3", "Azure Linux 3.0", 28, 36},
	{"V2", "Azure Linux 2.0 (retired 2026-03-31)", 1, 0},
}

// imageProblem says why the node image definition (the community gallery
// image ID's definition) does not run Kubernetes minor ("" when it does,
// or the image is not one of AKS's).
func imageProblem(imageID string, minor int) string {
	segments := strings.Split(strings.Trim(imageID, "/"), "/")
	if len(segments) != 6 || !strings.EqualFold(segments[0], "CommunityGalleries") {
		return ""
	}
	definition := segments[3]
	for _, row := range imageSupport {
		if !strings.HasPrefix(definition, row.prefix) {
			continue
		}
		if minor >= row.minMinor && minor <= row.maxMinor {
			return ""
		}
		if row.maxMinor < row.minMinor {
			return fmt.Sprintf("node image %s is %s, which AKS supports at no Kubernetes version", definition, row.os)
		}
		return fmt.Sprintf("node image %s is %s, which AKS supports at Kubernetes 1.%d to 1.%d, not 1.%d (Learn: aks/upgrade-os-version)",
			definition, row.os, row.minMinor, row.maxMinor, minor)
	}
	return ""
}
