package azure

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// A node's NIC IP configurations. On classic Azure CNI (NETWORK_PLUGIN azure
// without overlay) the CNI hands pods the NIC's secondary IP addresses, so
// the NIC carries as many IP configurations as the kubelet's --max-pods: the
// primary (the node's address) and maxPods-1 secondaries, as the Azure
// provider's NIC build does (pkg/providers/instance/vminstance.go; like it,
// no addresses are held back for host-network pods). On overlay and
// network plugin none the NIC has the primary only.

// maxIPConfigurationsPerNIC is Azure's limit of private IP addresses per
// network interface (azure-docs includes/azure-virtual-network-limits.md,
// "Private IP addresses per network interface: 256").
const maxIPConfigurationsPerNIC = 256

// DefaultMaxPods is --max-pods when the AKSNodeClass sets none, by the
// cluster's network as AKS and the Azure provider default it
// (Azure/karpenter-provider-azure@352646f5 pkg/utils/utils.go:159-176
// GetMaxPods, pkg/consts/consts.go:37-42): 250 with plugin none and on
// Azure CNI overlay, 30 on the node subnet (classic Azure CNI and Cilium
// without overlay: every pod IP is a NIC IP configuration), 110 otherwise.
func DefaultMaxPods(c ClusterBootstrap) int32 {
	switch {
	case c.NetworkPlugin == NetworkPluginNone:
		return 250
	case c.NetworkPlugin == NetworkPluginAzure && c.NetworkPluginMode == NetworkPluginModeOver:
		return 250
	case c.NetworkPlugin == NetworkPluginAzure && c.NetworkPluginMode == "":
		return 30
	}
	return 110
}

// podIPConfigurations is how many IP configurations req's NIC carries: its
// max pods on classic Azure CNI, else 1.
func (l *Launcher) podIPConfigurations(req LaunchRequest) int {
	if l.opts.Bootstrap == nil || !l.opts.Bootstrap.ClassicAzureCNI() {
		return 1
	}
	return int(l.launchMaxPods(req))
}

// launchMaxPods is req's --max-pods: the AKSNodeClass's, or the cluster
// network's default.
func (l *Launcher) launchMaxPods(req LaunchRequest) int32 {
	if req.MaxPods != 0 {
		return req.MaxPods
	}
	if l.opts.Bootstrap == nil {
		return DefaultMaxPods(ClusterBootstrap{NetworkPlugin: DefaultNetworkPlugin, NetworkPluginMode: DefaultNetworkMode})
	}
	return DefaultMaxPods(*l.opts.Bootstrap)
}

// checkPodIPs refuses a classic Azure CNI launch whose NIC would need more
// IP configurations than Azure allows, before anything is created.
func (l *Launcher) checkPodIPs(req LaunchRequest) error {
	if count := l.podIPConfigurations(req); count > maxIPConfigurationsPerNIC {
		return NewInvalidRequestError("launch %q: on classic Azure CNI (%s=azure without overlay) every pod takes an IP configuration on the "+
			"node's NIC, and max pods %d exceeds Azure's %d per NIC: lower the AKSNodeClass's spec.maxPods", req.Name, EnvNetworkPlugin, count, maxIPConfigurationsPerNIC)
	}
	return nil
}

// ipConfigurations are the IP configurations of req's NIC, all in its
// subnet: the primary ipconfig1, then the pods' secondaries ipconfig2, ...
// on classic Azure CNI.
func (l *Launcher) ipConfigurations(req LaunchRequest) []*armnetwork.InterfaceIPConfiguration {
	count := l.podIPConfigurations(req)
	out := make([]*armnetwork.InterfaceIPConfiguration, 0, count)
	for i := 1; i <= count; i++ {
		out = append(out, &armnetwork.InterfaceIPConfiguration{
			Name: ptr(fmt.Sprintf("ipconfig%d", i)),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary:                   ptr(i == 1),
				PrivateIPAllocationMethod: ptr(armnetwork.IPAllocationMethodDynamic),
				Subnet:                    &armnetwork.Subnet{ID: ptr(req.SubnetID)},
			},
		})
	}
	return out
}
