package main

import "strings"

// Cluster shapes karpfunc serves, by networkProfile (managedClusters API
// 2024-09-01; field spellings from that version):
//
//	networkPlugin  networkPluginMode  pods get IPs from      NIC IP configurations
//	azure          overlay            the overlay pod CIDR   1
//	azure          (none)             the node subnet        max pods (classic Azure CNI)
//	none           (none)             your own CNI           1
//
// with any networkPolicy (none, azure, calico, cilium) and either
// networkDataplane (azure, cilium). Refused, each with its fix: kubenet and
// any other plugin (the Azure provider does not bootstrap them either:
// pkg/operator/options/options_validation.go), a pod subnet on classic
// Azure CNI (pod IPs come from another subnet than the NIC's), an API
// server karpfunc's function app cannot reach (private, or behind
// authorized IP ranges: a Flex Consumption app without VNet integration
// calls it from the internet, from no fixed address), and node resource
// group lockdown (its deny assignment refuses karpfunc's VM and NIC writes:
// Learn aks/node-resource-group-lockdown).

// shapeProblems lists what in the cluster's network and access shape
// karpfunc cannot serve, each with its fix. ref is "-g <rg> -n <name>".
func shapeProblems(mc managedCluster, ref string) []string {
	props := mc.Properties
	problems := networkProblems(props.NetworkProfile, props.AgentPoolProfiles, ref)
	if access := props.APIServerAccessProfile; access != nil && access.EnablePrivateCluster {
		problems = append(problems, "the API server is private (apiServerAccessProfile.enablePrivateCluster); karpfunc's Flex Consumption "+
			"app is not VNet-integrated and reaches the API server over the internet: use a cluster with a public API server "+
			"(a cluster with API Server VNet Integration can be made public: az aks update "+ref+" --disable-private-cluster)")
	}
	if access := props.APIServerAccessProfile; access != nil && len(access.AuthorizedIPRanges) > 0 {
		problems = append(problems, "the API server accepts only authorized IP ranges ("+strings.Join(access.AuthorizedIPRanges, ", ")+
			"); a Flex Consumption app calls it from no fixed outbound address: az aks update "+ref+` --api-server-authorized-ip-ranges ""`)
	}
	if nrg := props.NodeResourceGroupProfile; nrg != nil && strings.EqualFold(nrg.RestrictionLevel, "ReadOnly") {
		problems = append(problems, "node resource group lockdown is on (nodeResourceGroupProfile.restrictionLevel ReadOnly); its deny "+
			"assignment refuses karpfunc's VM and NIC writes in "+props.NodeResourceGroup+": az aks update "+ref+" --nrg-lockdown-restriction-level Unrestricted")
	}
	return problems
}

// networkProblems checks the network plugin and its mode.
func networkProblems(n *networkProfile, pools []agentPool, ref string) []string {
	if n == nil || n.NetworkPlugin == "" {
		return []string{"the cluster reports no networkProfile.networkPlugin, so karpfunc cannot tell how its nodes' pods get addresses"}
	}
	toOverlay := "az aks update " + ref + " --network-plugin azure --network-plugin-mode overlay"
	switch {
	case strings.EqualFold(n.NetworkPlugin, "kubenet"):
		// Learn aks/upgrade-aks-ipam-and-dataplane: kubenet migrates to
		// Azure CNI overlay in place.
		return []string{"the network plugin is kubenet, which karpfunc (like the Azure Karpenter provider) does not bootstrap nodes for: " + toOverlay}
	case n.NetworkPlugin != "azure" && n.NetworkPlugin != "none":
		return []string{"the network plugin is " + n.NetworkPlugin + ", not azure or none: " + toOverlay}
	case n.NetworkPluginMode != "" && n.NetworkPluginMode != "overlay":
		return []string{"the network plugin mode is " + n.NetworkPluginMode + ", not overlay or unset"}
	case n.NetworkPlugin == "azure" && n.NetworkPluginMode == "":
		for _, pool := range pools {
			if pool.PodSubnetID != "" {
				return []string{"node pool " + pool.Name + " takes pod IPs from a pod subnet (podSubnetID, Azure CNI dynamic IP allocation); " +
					"karpfunc's nodes, like the Azure provider's, take them from their own NIC in the node subnet: use Azure CNI overlay or node-subnet Azure CNI"}
			}
		}
	}
	return nil
}

// nodeNetwork is the node bootstrap app settings (pkg/azure bootstrap) for
// an accepted networkProfile. Every setting is written, so none falls back
// to a handler default that differs from the cluster: NETWORK_PLUGIN is
// always set, which makes an empty NETWORK_PLUGIN_MODE mean classic Azure
// CNI; networkPolicy none is written empty, as the Azure provider's
// hack/deploy/configure-values.sh does; a missing networkDataplane is AKS's
// default, azure (the handler's own default, cilium, is the provider's).
func nodeNetwork(n networkProfile) map[string]string {
	policy := n.NetworkPolicy
	if strings.EqualFold(policy, "none") {
		policy = ""
	}
	dataplane := n.NetworkDataplane
	if dataplane == "" {
		dataplane = "azure"
	}
	return map[string]string{
		"NETWORK_PLUGIN":      n.NetworkPlugin,
		"NETWORK_PLUGIN_MODE": n.NetworkPluginMode,
		"NETWORK_POLICY":      policy,
		"NETWORK_DATAPLANE":   dataplane,
		"DNS_SERVICE_IP":      n.DNSServiceIP,
	}
}
