package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/azure"
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
    "identityProfile": {"kubeletidentity": {"clientId": "kubelet-client", "objectId": "kubelet-object", "resourceId": "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool"}},
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
			"NODE_IDENTITIES": "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool"},
		KubeletObjectID: "kubelet-object"}
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
		{"no kubelet identity", `"objectId": "kubelet-object"`, `"objectId": ""`, []string{"no kubelet managed identity", "AcrPull"}},
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
		if err == nil || strings.Count(err.Error(), "\n  - ") != 7 {
			t.Fatalf("err = %v, want seven problems listed", err)
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
		envRelayServiceAccount: "karpfunc-relay", envFunctionsPrincipal: "fp", envAppInsights: "InstrumentationKey=k"}
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
	if ai := v["applicationInsights"].(map[string]any)["connectionString"]; ai != "InstrumentationKey=k" {
		t.Errorf("applicationInsights.connectionString = %v, want the provisioned one", ai)
	}
	// What postdeploy pushed, pinned by digest: the digest stays with the tag.
	pinned := "myreg.azurecr.io/karpfunc/relay:0.1.0@sha256:" + strings.Repeat("ab", 32)
	v, err = chartValues(env, pinned)
	if img := v["image"].(map[string]any); err != nil || img["repository"].(string)+":"+img["tag"].(string) != pinned {
		t.Fatalf("image %s = %v, %v", pinned, img, err)
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

func TestFindHealthTopic(t *testing.T) {
	const health = "/subscriptions/s/resourceGroups/other/providers/Microsoft.EventGrid/systemTopics/health"
	for _, tc := range []struct {
		name, body, wantID, wantNext string
	}{
		{"the subscription's topic, whatever its name and case",
			`{"value": [{"id": "/subscriptions/s/resourceGroups/x/providers/Microsoft.EventGrid/systemTopics/storage", "properties": {"topicType": "Microsoft.Storage.StorageAccounts"}},
			            {"id": "` + health + `", "properties": {"topicType": "microsoft.resourcenotifications.healthresources"}}]}`, health, ""},
		{"none on this page: the next", `{"value": [], "nextLink": "https://management.azure.com/next?page=2"}`, "", "https://management.azure.com/next?page=2"},
		{"none at all", `{"value": []}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, next, err := findHealthTopic([]byte(tc.body))
			if err != nil || id != tc.wantID || next != tc.wantNext {
				t.Fatalf("findHealthTopic = %q, %q, %v; want %q, %q", id, next, err, tc.wantID, tc.wantNext)
			}
		})
	}
	if _, _, err := findHealthTopic([]byte("nope")); err == nil {
		t.Error("no error for a body that is not JSON")
	}
	if p, err := armPath("https://management.azure.com/subscriptions/s/providers/Microsoft.EventGrid/systemTopics?api-version=2025-02-15&$skiptoken=x"); err != nil || !strings.HasPrefix(p, "/subscriptions/s/") || !strings.Contains(p, "skiptoken") {
		t.Errorf("armPath = %q, %v", p, err)
	}
	if _, err := armPath("https://elsewhere.example/x"); err == nil {
		t.Error("a nextLink off management.azure.com was followed")
	}
}

func TestMissingActions(t *testing.T) {
	contributor := permission{Actions: []string{"*"}, NotActions: []string{"Microsoft.Authorization/*/Delete", "Microsoft.Authorization/*/Write",
		"Microsoft.Authorization/elevateAccess/Action", "Microsoft.Blueprint/blueprintAssignments/write"}}
	rbacAdmin := permission{Actions: []string{"Microsoft.Authorization/roleAssignments/write", "Microsoft.Authorization/roleAssignments/delete", "*/read"}}
	reader := permission{Actions: []string{"*/read"}}
	for _, tc := range []struct {
		name  string
		perms []permission
		want  []string
	}{
		{"Contributor and RBAC Administrator", []permission{contributor, rbacAdmin}, nil},
		{"Owner", []permission{{Actions: []string{"*"}}}, nil},
		{"Contributor only", []permission{contributor}, []string{"Microsoft.Authorization/roleAssignments/write"}},
		{"Reader", []permission{reader}, []string{"resourceGroups/write", "deployments/write", "systemTopics/write", "registries/write", "userAssignedIdentities/write", "roleAssignments/write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := missingActions(tc.perms)
			if len(got) != len(tc.want) {
				t.Fatalf("missing = %q, want %d naming %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "(to ") {
					t.Errorf("missing[%d] = %q, want it to name %s and why", i, got[i], w)
				}
			}
		})
	}
}

// managedClusterGET is a managedClusters GET body (api-version 2024-09-01)
// as AKS reports a cluster made by az aks create with OIDC issuer,
// workload identity and Entra ID on; networkProfile, the system pool's
// extra fields and extra top-level properties vary by shape.
func managedClusterGET(networkProfile, poolExtra, extraProps string) string {
	return `{
  "id": "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c",
  "location": "westeurope",
  "name": "c",
  "type": "Microsoft.ContainerService/ManagedClusters",
  "sku": {"name": "Base", "tier": "Free"},
  "identity": {"type": "SystemAssigned", "principalId": "p", "tenantId": "t"},
  "properties": {
    "provisioningState": "Succeeded",
    "powerState": {"code": "Running"},
    "kubernetesVersion": "1.33",
    "currentKubernetesVersion": "1.33.2",
    "dnsPrefix": "c-rg-0000",
    "fqdn": "c-rg-0000-abcd1234.hcp.westeurope.azmk8s.io",
    "azurePortalFQDN": "c-rg-0000-abcd1234.portal.hcp.westeurope.azmk8s.io",
    "agentPoolProfiles": [{
      "name": "nodepool1", "count": 3, "vmSize": "Standard_DS2_v2", "osDiskSizeGB": 128, "osDiskType": "Managed",
      "kubeletDiskType": "OS", "type": "VirtualMachineScaleSets", "enableAutoScaling": false, "provisioningState": "Succeeded",
      "powerState": {"code": "Running"}, "orchestratorVersion": "1.33.2", "mode": "System", "osType": "Linux", "osSKU": "Ubuntu",
      "nodeImageVersion": "AKSUbuntu-2204gen2containerd-202511.07.0", "enableFIPS": false` + poolExtra + `
    }],
    "linuxProfile": {"adminUsername": "azureuser", "ssh": {"publicKeys": [{"keyData": "ssh-rsa AAAA"}]}},
    "servicePrincipalProfile": {"clientId": "msi"},
    "nodeResourceGroup": "MC_rg_c_westeurope",
    "enableRBAC": true,
    "supportPlan": "KubernetesOfficial",
    "networkProfile": ` + networkProfile + `,
    "aadProfile": {"managed": true, "enableAzureRBAC": false, "tenantID": "t"},
    "maxAgentPools": 100,
    "identityProfile": {"kubeletidentity": {"resourceId": "/subscriptions/0000/resourcegroups/MC_rg_c_westeurope/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool",
      "clientId": "11111111-2222-3333-4444-555555555555", "objectId": "o"}},
    "disableLocalAccounts": false,
    "securityProfile": {"workloadIdentity": {"enabled": true}},
    "oidcIssuerProfile": {"enabled": true, "issuerURL": "https://westeurope.oic.prod-aks.azure.com/t/u/"},
    "nodeProvisioningProfile": {"mode": "Manual"}` + extraProps + `
  }
}`
}

// networkProfileGET is a networkProfile as AKS reports it; plugin, mode
// (omitted when empty), policy and dataplane vary.
func networkProfileGET(plugin, mode, policy, dataplane string) string {
	m := ""
	if mode != "" {
		m = `"networkPluginMode": "` + mode + `", `
	}
	return `{"networkPlugin": "` + plugin + `", ` + m + `"networkPolicy": "` + policy + `", "networkDataplane": "` + dataplane + `",
      "podCidr": "10.244.0.0/16", "serviceCidr": "10.0.0.0/16", "dnsServiceIP": "10.0.0.10", "outboundType": "loadBalancer",
      "loadBalancerSku": "standard", "loadBalancerProfile": {"managedOutboundIPs": {"count": 1}, "backendPoolType": "nodeIPConfiguration"},
      "podCidrs": ["10.244.0.0/16"], "serviceCidrs": ["10.0.0.0/16"], "ipFamilies": ["IPv4"]}`
}

// TestClusterShapes feeds the preprovision check managedClusters GET bodies
// of each cluster shape and passes the settings it records to the
// handler's settings parsing: what preprovision accepts, the handler
// accepts, with the same meaning; what it refuses, it refuses with the fix.
func TestClusterShapes(t *testing.T) {
	overlay := networkProfileGET("azure", "overlay", "none", "azure")
	byoSubnet := `, "vnetSubnetID": "/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes"`
	for _, tc := range []struct {
		name, body string
		classic    bool     // accepted: pods on the NIC's IP configurations
		policy     string   // accepted: the handler's NETWORK_POLICY
		dataplane  string   // accepted: the handler's NETWORK_DATAPLANE
		refused    []string // refused: what the error says, fix included
		// handlerRefuses: the handler, given the cluster's networkProfile
		// as is, refuses it too (kubenet).
		handlerRefuses bool
	}{
		{name: "az aks create default: overlay, policy none", body: managedClusterGET(overlay, `, "maxPods": 250`, ""), policy: "", dataplane: "azure"},
		{name: "overlay with calico", body: managedClusterGET(networkProfileGET("azure", "overlay", "calico", "azure"), `, "maxPods": 250`, ""), policy: "calico", dataplane: "azure"},
		{name: "Azure CNI powered by Cilium", body: managedClusterGET(networkProfileGET("azure", "overlay", "cilium", "cilium"), `, "maxPods": 250`, ""), policy: "cilium", dataplane: "cilium"},
		{name: "classic Azure CNI", body: managedClusterGET(networkProfileGET("azure", "", "azure", "azure"), `, "maxPods": 30`+byoSubnet, ""), classic: true, policy: "azure", dataplane: "azure"},
		{name: "classic Azure CNI, policy none", body: managedClusterGET(networkProfileGET("azure", "", "none", "azure"), `, "maxPods": 30`+byoSubnet, ""), classic: true, policy: "", dataplane: "azure"},
		{name: "classic Azure CNI with Cilium", body: managedClusterGET(networkProfileGET("azure", "", "cilium", "cilium"), `, "maxPods": 30`+byoSubnet, ""), classic: true, policy: "cilium", dataplane: "cilium"},
		{name: "network plugin none", body: managedClusterGET(networkProfileGET("none", "", "none", "azure"), `, "maxPods": 250`+byoSubnet, ""), policy: "", dataplane: "azure"},
		{name: "no networkDataplane reported", body: managedClusterGET(strings.Replace(overlay, `"networkDataplane": "azure",`, "", 1), "", ""), policy: "", dataplane: "azure"},
		{name: "kubenet", body: managedClusterGET(networkProfileGET("kubenet", "", "none", "azure"), `, "maxPods": 110`, ""),
			refused: []string{"kubenet", "az aks update -g rg -n c --network-plugin azure --network-plugin-mode overlay"}, handlerRefuses: true},
		{name: "pod subnet", body: managedClusterGET(networkProfileGET("azure", "", "none", "azure"), `, "maxPods": 30`+byoSubnet+
			`, "podSubnetID": "/subscriptions/0000/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/pods"`, ""),
			refused: []string{"pod subnet (podSubnetID"}},
		{name: "private API server", body: managedClusterGET(overlay, "", `,
    "apiServerAccessProfile": {"enablePrivateCluster": true, "privateDNSZone": "system", "enablePrivateClusterPublicFQDN": true},
    "privateFQDN": "c-rg-0000-abcd1234.privatelink.westeurope.azmk8s.io"`), refused: []string{"the API server is private", "--disable-private-cluster"}},
		{name: "authorized IP ranges", body: managedClusterGET(overlay, "", `,
    "apiServerAccessProfile": {"authorizedIPRanges": ["203.0.113.0/24"], "enablePrivateCluster": false}`),
			refused: []string{"203.0.113.0/24", `az aks update -g rg -n c --api-server-authorized-ip-ranges ""`}},
		{name: "node resource group lockdown", body: managedClusterGET(overlay, "", `,
    "nodeResourceGroupProfile": {"restrictionLevel": "ReadOnly"}`),
			refused: []string{"MC_rg_c_westeurope", "az aks update -g rg -n c --nrg-lockdown-restriction-level Unrestricted"}},
		{name: "node resource group unrestricted", body: managedClusterGET(overlay, "", `,
    "nodeResourceGroupProfile": {"restrictionLevel": "Unrestricted"}`), policy: "", dataplane: "azure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.body)) {
				t.Fatalf("fixture is not JSON:\n%s", tc.body)
			}
			facts, err := checkCluster([]byte(tc.body), "-g rg -n c")
			if len(tc.refused) > 0 {
				checkRefused(t, err, tc.refused)
				if tc.handlerRefuses {
					if _, herr := handlerBootstrap(t, rawNodeNetwork(t, tc.body)); herr == nil {
						t.Errorf("the handler accepts the networkProfile preprovision refuses")
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("preprovision refuses: %v", err)
			}
			c, err := handlerBootstrap(t, facts.NodeNetwork)
			if err != nil {
				t.Fatalf("preprovision accepts, the handler refuses what it recorded %v: %v", facts.NodeNetwork, err)
			}
			if c.ClassicAzureCNI() != tc.classic || c.NetworkPolicy != tc.policy || c.NetworkDataplane != tc.dataplane {
				t.Errorf("handler reads plugin %q mode %q policy %q dataplane %q (classic CNI %v); want classic %v, policy %q, dataplane %q",
					c.NetworkPlugin, c.NetworkPluginMode, c.NetworkPolicy, c.NetworkDataplane, c.ClassicAzureCNI(), tc.classic, tc.policy, tc.dataplane)
			}
		})
	}
}

func checkRefused(t *testing.T, err error, want []string) {
	t.Helper()
	var ce ClusterError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ClusterError", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// rawNodeNetwork is the cluster's networkProfile copied into settings
// unchanged, as a platform team carrying `az aks show` values would.
func rawNodeNetwork(t *testing.T, body string) map[string]string {
	var mc managedCluster
	if err := json.Unmarshal([]byte(body), &mc); err != nil {
		t.Fatal(err)
	}
	n := mc.Properties.NetworkProfile
	return map[string]string{"NETWORK_PLUGIN": n.NetworkPlugin, "NETWORK_PLUGIN_MODE": n.NetworkPluginMode,
		"NETWORK_POLICY": n.NetworkPolicy, "NETWORK_DATAPLANE": n.NetworkDataplane, "DNS_SERVICE_IP": n.DNSServiceIP}
}

// handlerBootstrap parses node settings the way the handler does
// (functions/config.go nodeBootstrap), every other setting as the
// deployment writes it: infra/modules/functionapp.bicep sets each
// NETWORK_* app setting, empty when the hook recorded nothing.
func handlerBootstrap(t *testing.T, nodeNetwork map[string]string) (azure.ClusterBootstrap, error) {
	settings := map[string]string{"CLUSTER_ENDPOINT": "https://c-rg-0000-abcd1234.hcp.westeurope.azmk8s.io:443", "KUBERNETES_VERSION": ""}
	for k, v := range nodeNetwork {
		settings[k] = v
	}
	return azure.ClusterBootstrapFromEnv(func(k string) string { return settings[k] }, selfSignedCA(t), "v1.33.2")
}

func selfSignedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
