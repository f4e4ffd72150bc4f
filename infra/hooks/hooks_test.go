package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const readyCluster = `{
  "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c",
  "location": "westeurope",
  "properties": {
    "nodeResourceGroup": "MC_rg_c_westeurope",
    "enableRBAC": true,
    "oidcIssuerProfile": {"enabled": true, "issuerURL": "https://westeurope.oic.prod-aks.azure.com/t/u/"},
    "securityProfile": {"workloadIdentity": {"enabled": true}},
    "nodeProvisioningProfile": {"mode": "Manual"},
    "aadProfile": {"managed": true, "enableAzureRBAC": false},
    "networkProfile": {"networkPlugin": "azure", "networkPluginMode": "overlay", "networkDataplane": "cilium", "networkPolicy": "cilium", "dnsServiceIP": "10.0.0.10"},
    "identityProfile": {"kubeletidentity": {"clientId": "kubelet-client", "resourceId": "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool"}},
    "agentPoolProfiles": [
      {"name": "user1", "mode": "User", "vnetSubnetID": "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/user"},
      {"name": "system", "mode": "System", "vnetSubnetID": "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes"}
    ]
  }
}`

func TestCheckCluster(t *testing.T) {
	ready, err := checkCluster([]byte(readyCluster), "-g rg -n c")
	if err != nil {
		t.Fatal(err)
	}
	want := clusterFacts{Location: "westeurope", NodeResourceGroup: "MC_rg_c_westeurope",
		OIDCIssuerURL:        "https://westeurope.oic.prod-aks.azure.com/t/u/",
		SubnetID:             "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes",
		NodeProvisioningMode: "Manual",
		NodeNetwork: map[string]string{"NETWORK_PLUGIN": "azure", "NETWORK_PLUGIN_MODE": "overlay", "NETWORK_DATAPLANE": "cilium",
			"NETWORK_POLICY": "cilium", "DNS_SERVICE_IP": "10.0.0.10", "KUBELET_IDENTITY_CLIENT_ID": "kubelet-client",
			"NODE_IDENTITIES": "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool"}}
	if !reflect.DeepEqual(ready, want) {
		t.Fatalf("facts = %+v, want %+v", ready, want)
	}

	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"no OIDC issuer", `"oidcIssuerProfile": {"enabled": true,`, `"oidcIssuerProfile": {"enabled": false,`, []string{"OIDC issuer is off", "az aks update -g rg -n c --enable-oidc-issuer"}},
		{"no workload identity", `"workloadIdentity": {"enabled": true}`, `"workloadIdentity": {"enabled": false}`, []string{"workload identity is off", "--enable-workload-identity"}},
		{"NAP on", `"mode": "Manual"`, `"mode": "Auto"`, []string{"node auto-provisioning (NAP) is on", "--node-provisioning-mode Manual"}},
		{"no Entra ID", `"aadProfile": {"managed": true,`, `"aadProfile": {"managed": false,`, []string{"Entra ID integration is off", "--enable-aad"}},
		{"no RBAC", `"enableRBAC": true`, `"enableRBAC": false`, []string{"Kubernetes RBAC is off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := strings.Replace(readyCluster, tc.from, tc.to, 1)
			if raw == readyCluster {
				t.Fatalf("fixture edit %q did not apply", tc.from)
			}
			_, err := checkCluster([]byte(raw), "-g rg -n c")
			var ce ClusterError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a ClusterError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	t.Run("every problem at once", func(t *testing.T) {
		_, err := checkCluster([]byte(`{"properties": {"nodeProvisioningProfile": {"mode": "Auto"}}}`), "-g rg -n c")
		if err == nil || strings.Count(err.Error(), "\n  - ") != 5 {
			t.Fatalf("err = %v, want five problems listed", err)
		}
	})
	t.Run("no node provisioning profile means Manual", func(t *testing.T) {
		f, err := checkCluster([]byte(strings.Replace(readyCluster, `"nodeProvisioningProfile": {"mode": "Manual"},`, "", 1)), "-g rg -n c")
		if err != nil || f.NodeProvisioningMode != "Manual" {
			t.Fatalf("mode = %q, %v; want Manual", f.NodeProvisioningMode, err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		if _, err := checkCluster([]byte(`<html>`), "-g rg -n c"); err == nil {
			t.Fatal("no error for a body that is not JSON")
		}
	})
}

// TestNodeNetworkEnv: every node bootstrap setting the hook records has an
// azd environment name.
func TestNodeNetworkEnv(t *testing.T) {
	f, err := checkCluster([]byte(readyCluster), "-g rg -n c")
	if err != nil {
		t.Fatal(err)
	}
	f.NodeNetwork["VNET_GUID"] = "g"
	for setting := range f.NodeNetwork {
		if nodeNetworkEnv[setting] == "" {
			t.Errorf("node setting %s has no azd environment name", setting)
		}
	}
	if len(nodeNetworkEnv) != len(f.NodeNetwork) {
		t.Errorf("nodeNetworkEnv has %d names, the hook records %d settings", len(nodeNetworkEnv), len(f.NodeNetwork))
	}
}

func TestManagedSubnet(t *testing.T) {
	list := `{"value": [
	  {"name": "other", "properties": {"subnets": [{"name": "aks-subnet", "id": "wrong"}]}},
	  {"name": "aks-vnet-123", "properties": {"subnets": [{"name": "x", "id": "wrong"}, {"name": "aks-subnet", "id": "right"}]}}]}`
	got, err := managedSubnet([]byte(list), "MC_x")
	if err != nil || got != "right" {
		t.Fatalf("managedSubnet = %q, %v; want right", got, err)
	}
	_, err = managedSubnet([]byte(`{"value": []}`), "MC_x")
	if err == nil || !strings.Contains(err.Error(), "azd env set AZURE_AKS_NODE_SUBNET_ID") {
		t.Fatalf("err = %v, want one that says which value to set", err)
	}
}

func TestRequired(t *testing.T) {
	env := map[string]string{"A": "1", "B": "  "}
	_, err := required(func(k string) string { return env[k] }, "A", "B", "C")
	if err == nil || !strings.Contains(err.Error(), "azd env set B <value>") || !strings.Contains(err.Error(), "azd env set C <value>") {
		t.Fatalf("err = %v, want both B and C named", err)
	}
	got, err := required(func(k string) string { return env[k] }, "A")
	if err != nil || got["A"] != "1" {
		t.Fatalf("required = %v, %v", got, err)
	}
}

func TestChartValues(t *testing.T) {
	env := map[string]string{envClusterName: "c", envServiceBus: "sb.servicebus.windows.net", envRelayClientID: "rc",
		envRelayServiceAccount: "karpfunc-relay", envFunctionsPrincipal: "fp"}
	v, err := chartValues(env, "myreg.azurecr.io:5000/karpfunc/relay:v1")
	if err != nil {
		t.Fatal(err)
	}
	img := v["image"].(map[string]any)
	if img["repository"] != "myreg.azurecr.io:5000/karpfunc/relay" || img["tag"] != "v1" {
		t.Fatalf("image = %v", img)
	}
	if v["serviceBus"].(map[string]any)["clientId"] != "rc" || v["functions"].(map[string]any)["principalId"] != "fp" {
		t.Fatalf("values = %v", v)
	}
	if v, _ := chartValues(env, ""); v["image"] != nil {
		t.Fatalf("image set without %s: %v", envRelayImage, v["image"])
	}
	for _, bad := range []string{"myreg.azurecr.io:5000/relay", "relay:", "relay"} {
		if _, err := chartValues(env, bad); err == nil || !strings.Contains(err.Error(), envRelayImage) {
			t.Errorf("image %q: err = %v, want one naming %s", bad, err, envRelayImage)
		}
	}
}

func TestKubeconfigCluster(t *testing.T) {
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://c-dns-1234.hcp.westeurope.azmk8s.io:443
    certificate-authority-data: ` + base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")) + `
contexts:
- name: c
  context: {cluster: c, user: clusterUser_rg_c}
current-context: c
users:
- name: clusterUser_rg_c
  user: {}
`
	body, _ := json.Marshal(map[string]any{"kubeconfigs": []map[string]any{{"name": "clusterUser", "value": []byte(kubeconfig)}}})
	c, err := kubeconfigCluster(body, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != "https://c-dns-1234.hcp.westeurope.azmk8s.io:443" || !strings.Contains(string(c.CertificateAuthorityData), "BEGIN CERTIFICATE") {
		t.Fatalf("cluster = %s %q", c.Server, c.CertificateAuthorityData)
	}
	for _, bad := range []string{`{"kubeconfigs": []}`, `{"kubeconfigs": [{"value": "bm90IHlhbWw6IFs="}]}`, `nope`} {
		if _, err := kubeconfigCluster([]byte(bad), "c"); err == nil || !strings.Contains(err.Error(), " of c") {
			t.Errorf("%s: err = %v, want one naming the cluster", bad, err)
		}
	}
}
