package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// managedCluster is the part of an AKS managedClusters resource (ARM JSON)
// the preprovision check reads.
type managedCluster struct {
	ID         string `json:"id"`
	Location   string `json:"location"`
	Properties struct {
		NodeResourceGroup string `json:"nodeResourceGroup"`
		EnableRBAC        *bool  `json:"enableRBAC"`
		OIDCIssuerProfile *struct {
			Enabled   bool   `json:"enabled"`
			IssuerURL string `json:"issuerURL"`
		} `json:"oidcIssuerProfile"`
		SecurityProfile *struct {
			WorkloadIdentity *struct {
				Enabled bool `json:"enabled"`
			} `json:"workloadIdentity"`
		} `json:"securityProfile"`
		NodeProvisioningProfile *struct {
			Mode string `json:"mode"`
		} `json:"nodeProvisioningProfile"`
		AADProfile *struct {
			Managed bool `json:"managed"`
		} `json:"aadProfile"`
		NetworkProfile  *networkProfile `json:"networkProfile"`
		IdentityProfile map[string]struct {
			ClientID   string `json:"clientId"`
			ObjectID   string `json:"objectId"`
			ResourceID string `json:"resourceId"`
		} `json:"identityProfile"`
		AgentPoolProfiles []agentPool `json:"agentPoolProfiles"`
		// APIServerAccessProfile and NodeResourceGroupProfile decide
		// whether karpfunc can reach the API server and write the node
		// resource group (shapes.go).
		APIServerAccessProfile *struct {
			EnablePrivateCluster bool     `json:"enablePrivateCluster"`
			AuthorizedIPRanges   []string `json:"authorizedIPRanges"`
		} `json:"apiServerAccessProfile"`
		NodeResourceGroupProfile *struct {
			RestrictionLevel string `json:"restrictionLevel"`
		} `json:"nodeResourceGroupProfile"`
	} `json:"properties"`
}

// networkProfile is the cluster's networkProfile (managedClusters API
// 2024-09-01: networkPlugin azure|kubenet|none, networkPluginMode overlay,
// networkPolicy azure|calico|cilium|none, networkDataplane azure|cilium).
type networkProfile struct {
	NetworkPlugin     string `json:"networkPlugin"`
	NetworkPluginMode string `json:"networkPluginMode"`
	NetworkPolicy     string `json:"networkPolicy"`
	NetworkDataplane  string `json:"networkDataplane"`
	DNSServiceIP      string `json:"dnsServiceIP"`
}

// agentPool is one of the cluster's agentPoolProfiles.
type agentPool struct {
	Name         string `json:"name"`
	Mode         string `json:"mode"`
	VnetSubnetID string `json:"vnetSubnetID"`
	PodSubnetID  string `json:"podSubnetID"`
}

// clusterFacts are what the template needs from the cluster; the hook writes
// them into the azd environment.
type clusterFacts struct {
	Location          string
	NodeResourceGroup string
	OIDCIssuerURL     string
	// SubnetID is the node pools' subnet; empty when the cluster uses the
	// AKS-managed VNet (then it is looked up in the node resource group).
	SubnetID string
	// NodeProvisioningMode is nodeProvisioningProfile.mode, "Manual" when
	// unset; checkCluster refuses "Auto".
	NodeProvisioningMode string
	// Node bootstrap settings by app setting name (pkg/azure bootstrap);
	// empty values mean the handler's defaults.
	NodeNetwork map[string]string
	// KubeletObjectID is the kubelet identity's object ID; it pulls the
	// relay image from karpfunc's registry (AcrPull).
	KubeletObjectID string
}

// ClusterError is a cluster that karpfunc cannot run on as it is; the message
// says what to change.
type ClusterError struct{ error }

func (e ClusterError) Unwrap() error { return e.error }

// readinessRules are checkCluster's settings checks, in the order the
// problems are reported: each returns the problem, with the command that
// fixes it, or "" when the cluster is ready on that point.
var readinessRules = []func(mc *managedCluster, ref string) string{
	func(mc *managedCluster, ref string) string {
		if oidc := mc.Properties.OIDCIssuerProfile; oidc == nil || !oidc.Enabled || oidc.IssuerURL == "" {
			return "the OIDC issuer is off; the relay's workload identity needs it: az aks update " + ref + " --enable-oidc-issuer"
		}
		return ""
	},
	func(mc *managedCluster, ref string) string {
		if security := mc.Properties.SecurityProfile; security == nil || security.WorkloadIdentity == nil || !security.WorkloadIdentity.Enabled {
			return "workload identity is off; the relay authenticates to Service Bus with it: az aks update " + ref + " --enable-workload-identity"
		}
		return ""
	},
	func(mc *managedCluster, ref string) string {
		if nap := mc.Properties.NodeProvisioningProfile; nap != nil && strings.EqualFold(nap.Mode, "Auto") {
			return "node auto-provisioning (NAP) is on; NAP and karpfunc would both launch nodes for the same NodePools: az aks update " + ref + " --node-provisioning-mode Manual (after removing NAP's NodePools)"
		}
		return ""
	},
	func(mc *managedCluster, _ string) string {
		if rbac := mc.Properties.EnableRBAC; rbac != nil && !*rbac {
			return "Kubernetes RBAC is off; karpfunc's permissions in the cluster are RBAC rules, and RBAC cannot be enabled on an existing cluster: use a cluster created with RBAC"
		}
		return ""
	},
	func(mc *managedCluster, ref string) string {
		if aad := mc.Properties.AADProfile; aad == nil || !aad.Managed {
			return "Microsoft Entra ID integration is off; the Functions identity signs in to the API server with it: az aks update " + ref + " --enable-aad"
		}
		return ""
	},
	func(mc *managedCluster, _ string) string {
		if mc.Properties.NodeResourceGroup == "" {
			return "the cluster reports no node resource group"
		}
		return ""
	},
	func(mc *managedCluster, ref string) string {
		if mc.Properties.IdentityProfile["kubeletidentity"].ObjectID == "" {
			return "the cluster has no kubelet managed identity; nodes pull the relay image from karpfunc's registry with it (AcrPull): use a cluster with a managed identity (az aks update " + ref + " --enable-managed-identity)"
		}
		return ""
	},
}

// checkCluster decides whether karpfunc can be installed on the cluster
// described by raw (the managedClusters GET body). It reports every problem
// at once, each with the command that fixes it. ref names the cluster in
// messages ("-g <rg> -n <name>").
func checkCluster(raw []byte, ref string) (clusterFacts, error) {
	var mc managedCluster
	if err := json.Unmarshal(raw, &mc); err != nil {
		return clusterFacts{}, fmt.Errorf("decoding the AKS cluster %s: %w", ref, err)
	}
	var problems []string
	for _, rule := range readinessRules {
		if problem := rule(&mc, ref); problem != "" {
			problems = append(problems, problem)
		}
	}
	problems = append(problems, shapeProblems(mc, ref)...)
	if len(problems) > 0 {
		return clusterFacts{}, ClusterError{errors.New("AKS cluster " + ref + " is not ready for karpfunc:\n  - " + strings.Join(problems, "\n  - "))}
	}
	return readyClusterFacts(&mc), nil
}

// readyClusterFacts are the facts of a cluster checkCluster found ready.
func readyClusterFacts(mc *managedCluster) clusterFacts {
	props := mc.Properties
	kubelet := props.IdentityProfile["kubeletidentity"]
	facts := clusterFacts{Location: mc.Location, NodeResourceGroup: props.NodeResourceGroup, OIDCIssuerURL: props.OIDCIssuerProfile.IssuerURL,
		NodeProvisioningMode: "Manual", KubeletObjectID: kubelet.ObjectID}
	if props.NodeProvisioningProfile != nil && props.NodeProvisioningProfile.Mode != "" {
		facts.NodeProvisioningMode = props.NodeProvisioningProfile.Mode
	}
	facts.NodeNetwork = nodeNetwork(*props.NetworkProfile) // shapeProblems refused a cluster without one
	facts.NodeNetwork["KUBELET_IDENTITY_CLIENT_ID"] = kubelet.ClientID
	// The kubelet identity is named in customData by client ID and attached
	// to node VMs by resource ID (NODE_IDENTITIES, as the Azure provider's
	// configure-values.sh sets it from identityProfile.kubeletidentity).
	facts.NodeNetwork["NODE_IDENTITIES"] = kubelet.ResourceID
	facts.SubnetID = systemPoolSubnet(props.AgentPoolProfiles)
	return facts
}

// systemPoolSubnet is the subnet karpfunc's nodes join: the system pool's,
// as the first nodes did, else the first pool's that names one.
func systemPoolSubnet(pools []agentPool) string {
	subnet := ""
	for _, pool := range pools {
		if pool.VnetSubnetID != "" && (subnet == "" || strings.EqualFold(pool.Mode, "System")) {
			subnet = pool.VnetSubnetID
			if strings.EqualFold(pool.Mode, "System") {
				break
			}
		}
	}
	return subnet
}

// virtualNetworkList is an ARM list of virtualNetworks.
type virtualNetworkList struct {
	Value []struct {
		ID         string `json:"id"`
		Name       string `json:"name"`
		Properties struct {
			Subnets []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"subnets"`
		} `json:"properties"`
	} `json:"value"`
}

// managedSubnet finds the AKS-managed VNet's node subnet (aks-vnet-*/aks-subnet)
// in the node resource group's VNet list.
func managedSubnet(raw []byte, nodeResourceGroup string) (string, error) {
	var vnets virtualNetworkList
	if err := json.Unmarshal(raw, &vnets); err != nil {
		return "", fmt.Errorf("decoding the virtual networks of %s: %w", nodeResourceGroup, err)
	}
	for _, vnet := range vnets.Value {
		if !strings.HasPrefix(vnet.Name, "aks-vnet-") {
			continue
		}
		for _, subnet := range vnet.Properties.Subnets {
			if subnet.Name == "aks-subnet" {
				return subnet.ID, nil
			}
		}
	}
	return "", ClusterError{fmt.Errorf("the node pools name no subnet and resource group %s holds no AKS-managed VNet (aks-vnet-*/aks-subnet): set the node subnet with azd env set AZURE_AKS_NODE_SUBNET_ID <subnet resource ID>", nodeResourceGroup)}
}
