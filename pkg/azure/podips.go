package azure

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
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

// podIPConfigurations is how many IP configurations req's NIC carries: its
// max pods on classic Azure CNI, else 1.
func (l *Launcher) podIPConfigurations(req LaunchRequest) int {
	if l.opts.Bootstrap == nil || !l.opts.Bootstrap.ClassicAzureCNI() {
		return 1
	}
	return int(launchMaxPods(req))
}

// launchMaxPods is req's --max-pods: the AKSNodeClass's, or the default.
func launchMaxPods(req LaunchRequest) int32 {
	if req.MaxPods == 0 {
		return v1beta1.DefaultMaxPods
	}
	return req.MaxPods
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
