package azure_test

import (
	"testing"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// The cluster-dependent provisioning variables, as the Azure provider sets
// them (Azure/karpenter-provider-azure@352646f5):
//   - NETWORK_PLUGIN none on Azure CNI overlay, Cilium on the node subnet
//     and plugin none, azure only on classic Azure CNI
//     (pkg/providers/launchtemplate/launchtemplate.go:204-210); AgentBaker
//     installs the classic azure-vnet conflist only for azure
//     (Azure/AgentBaker@06836ee2 parts/linux/cloud-init/artifacts/cse_config.sh:526-537).
//   - NETWORK_SECURITY_GROUP the cluster NSG, ROUTE_TABLE
//     aks-agentpool-<id>-routetable with the NSG's 8 digits
//     (launchtemplate.go:169-175).
//   - KUBE_BINARY_URL empty from Kubernetes 1.34
//     (pkg/providers/imagefamily/bootstrap/aksbootstrap.go:246-254).
func TestClusterNodeVariables(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		plugin, mode, dataplane string
		kube                    string
		wantPlugin, wantKubeURL string
	}{
		{"overlay with Cilium", "azure", "overlay", "cilium", "1.33.2", "none", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"overlay with the Azure dataplane", "azure", "overlay", "azure", "1.33.2", "none", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"classic Azure CNI", "azure", "", "azure", "1.33.2", "azure", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"Cilium on the node subnet", "azure", "", "cilium", "1.33.2", "none", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"bring your own CNI", "none", "", "azure", "1.33.2", "none", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"1.34: the binaries are in the VHD", "azure", "overlay", "cilium", "1.34.1", "none", ""},
		{"1.37", "azure", "overlay", "cilium", "1.37.2", "none", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nb := testNode(t)
			nb.Cluster.NetworkPlugin, nb.Cluster.NetworkPluginMode, nb.Cluster.NetworkDataplane = tc.plugin, tc.mode, tc.dataplane
			nb.Cluster.KubernetesVersion = tc.kube
			nb.NetworkSecurityGroup = "aks-agentpool-46593302-nsg"
			vars := variables(t, nb)
			for name, want := range map[string]string{
				"NETWORK_PLUGIN":         tc.wantPlugin,
				"KUBE_BINARY_URL":        tc.wantKubeURL,
				"NETWORK_SECURITY_GROUP": "aks-agentpool-46593302-nsg",
				"ROUTE_TABLE":            "aks-agentpool-46593302-routetable",
			} {
				if got := vars[name]; got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
	nb := testNode(t)
	nb.NetworkSecurityGroup = "my-nsg"
	if _, err := nb.Variables(); err == nil || !azure.IsInvalidRequest(err) {
		t.Errorf("an NSG not named aks-agentpool-<8 digits>-nsg: %v, want an invalid request", err)
	}
}

func variables(t *testing.T, nb azure.NodeBootstrap) map[string]string {
	t.Helper()
	list, err := nb.Variables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range list {
		out[v.Name] = v.Value
	}
	return out
}
