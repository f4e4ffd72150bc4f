package azure_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

const testToken = "abc123.0123456789abcdef"

func testNode(t *testing.T) azure.NodeBootstrap {
	return azure.NodeBootstrap{
		Cluster: azure.ClusterBootstrap{
			APIServerFQDN: "c-dns-1234.hcp.eastus.azmk8s.io", ClusterCAPEM: testCA(t), KubernetesVersion: "1.33.2",
			NetworkPlugin: "azure", NetworkPluginMode: "overlay", NetworkDataplane: "cilium", DNSServiceIP: "10.0.0.10",
			TenantID: "tenant-1", KubeletIdentityClientID: "kubelet-id",
		},
		SubscriptionID: "sub-1", ResourceGroup: "MC_rg_c_eastus", Location: "eastus",
		SubnetID:      "/subscriptions/sub-1/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vnet-1/subnets/nodes",
		AdminUsername: "azureuser", Architecture: "arm64", ImageFamily: "AzureLinux",
		Token: testToken, MaxPods: 42, NetworkSecurityGroup: "aks-agentpool-12345678-nsg", Reservations: ptr(catalog.KubeletReservations(2, 8192, 42)),
		Labels: map[string]string{
			"karpenter.sh/nodepool":            "default",
			"node.kubernetes.io/instance-type": "Standard_D2ps_v5",
			"topology.kubernetes.io/zone":      "eastus-1",
			"team.example.com/owner":           "a",
			"example.kubernetes.io/restricted": "x", // not settable by a kubelet
			"kubernetes.azure.com/mode":        "system",
		},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Kubelet: &v1beta1.KubeletConfiguration{CPUManagerPolicy: "static", ImageGCHighThresholdPercent: ptr[int32](90),
			CPUCFSQuotaPeriod: metav1.Duration{Duration: 50 * time.Millisecond}, AllowedUnsafeSysctls: []string{"net.core.somaxconn", "kernel.msg*"},
			ContainerLogMaxFiles: ptr[int32](3), PodPidsLimit: ptr[int64](1024)},
	}
}

func TestNodeBootstrapCustomData(t *testing.T) {
	nb := testNode(t)
	data, err := nb.CustomData()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(data)
	script := string(raw)
	if !strings.HasPrefix(script, "#!/bin/bash\n") || !strings.HasSuffix(script, "/bin/bash /opt/azure/containers/provision_start.sh\"\n") {
		t.Errorf("script does not start with #!/bin/bash and end by starting provision_start.sh:\n%s", script)
	}
	if !strings.Contains(script, `grep -Fq "EOF" /opt/azure/containers/provision.sh`) {
		t.Error("script does not wait for the node image's provision.sh")
	}
	vars, err := azure.ParseCustomData(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"API_SERVER_NAME", "c-dns-1234.hcp.eastus.azmk8s.io"},
		{"KUBE_CA_CRT", base64.StdEncoding.EncodeToString(nb.Cluster.ClusterCAPEM)},
		{"TLS_BOOTSTRAP_TOKEN", testToken},
		{"ENABLE_TLS_BOOTSTRAPPING", "true"},
		{"ENABLE_SECURE_TLS_BOOTSTRAPPING", "false"},
		{"KUBERNETES_VERSION", "1.33.2"},
		{"KUBE_BINARY_URL", "https://acs-mirror.azureedge.net/kubernetes/v1.33.2/binaries/kubernetes-node-linux-arm64.tar.gz"},
		{"CREDENTIAL_PROVIDER_DOWNLOAD_URL", "https://acs-mirror.azureedge.net/cloud-provider-azure/v1.33.0/binaries/azure-acr-credential-provider-linux-arm64-v1.33.0.tar.gz"},
		{"NETWORK_PLUGIN", "none"}, // overlay: the provider sends none
		{"NETWORK_POLICY", ""},
		{"VNET_CNI_PLUGINS_URL", "https://acs-mirror.azureedge.net/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-arm64-v1.4.32.tgz"},
		{"CNI_PLUGINS_URL", "https://acs-mirror.azureedge.net/cni-plugins/v1.1.1/binaries/cni-plugins-linux-arm64-v1.1.1.tgz"},
		{"SUBSCRIPTION_ID", "sub-1"},
		{"RESOURCE_GROUP", "MC_rg_c_eastus"},
		{"LOCATION", "eastus"},
		{"TENANT_ID", "tenant-1"},
		{"USER_ASSIGNED_IDENTITY_ID", "kubelet-id"},
		{"SUBNET", "nodes"},
		{"VIRTUAL_NETWORK", "vnet-1"},
		{"VIRTUAL_NETWORK_RESOURCE_GROUP", "net-rg"},
		{"VM_TYPE", "standard"},
		{"ADMINUSER", "azureuser"},
		{"SERVICE_PRINCIPAL_CLIENT_ID", "msi"},
		{"SERVICE_PRINCIPAL_FILE_CONTENT", base64.StdEncoding.EncodeToString([]byte("msi"))},
		{"CONTAINER_RUNTIME", "containerd"},
		{"NEEDS_CGROUPV2", "true"},
		{"IS_VHD", "true"},
		{"GPU_NODE", "false"},
		{"KUBELET_NODE_LABELS", "karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default," +
			"kubernetes.azure.com/azure-cni-overlay=true,kubernetes.azure.com/cluster=MC_rg_c_eastus," +
			"kubernetes.azure.com/ebpf-dataplane=cilium,kubernetes.azure.com/kubelet-identity-client-id=kubelet-id," +
			"kubernetes.azure.com/mode=system,kubernetes.azure.com/network-stateless-cni=false,kubernetes.azure.com/network-subnet=nodes," +
			"kubernetes.azure.com/os-sku=AzureLinux,kubernetes.azure.com/podnetwork-type=overlay,kubernetes.azure.com/role=agent," +
			"node.kubernetes.io/instance-type=Standard_D2ps_v5,team.example.com/owner=a,topology.kubernetes.io/zone=eastus-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := vars[tc.name]
			if !ok {
				t.Fatalf("%s not set", tc.name)
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
	for _, name := range []string{"CONTAINERD_CONFIG_CONTENT", "SYSCTL_CONTENT"} {
		dec, err := base64.StdEncoding.DecodeString(vars[name])
		if err != nil || len(dec) == 0 {
			t.Errorf("%s is not non-empty base64: %v", name, err)
		}
	}

	flags, err := azure.ParseKubeletFlags(vars["KUBELET_FLAGS"])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, want string }{
		{"--max-pods", "42"},
		{"--register-with-taints", "dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute"},
		{"--cluster-dns", "10.0.0.10"},
		{"--cloud-provider", "external"},
		{"--kubeconfig", "/var/lib/kubelet/kubeconfig"},
		{"--rotate-certificates", "true"},
		{"--anonymous-auth", "false"},
		{"--authorization-mode", "Webhook"},
		{"--client-ca-file", "/etc/kubernetes/certs/ca.crt"},
		{"--cloud-config", "/etc/kubernetes/azure.json"},
		{"--pod-infra-container-image", "mcr.microsoft.com/oss/kubernetes/pause:3.6"},
		{"--image-credential-provider-config", "/var/lib/kubelet/credential-provider-config.yaml"},
		// AKS's reservations from 1.29 for 2 vCPUs, 8 GiB and 42 pods:
		// 20Mi x 42 + 50Mi, eviction at 100Mi.
		{"--kube-reserved", "cpu=100m,memory=890Mi"},
		{"--system-reserved", "cpu=0,memory=0"},
		{"--eviction-hard", "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%"},
		// From the AKSNodeClass's kubelet settings.
		{"--cpu-manager-policy", "static"},
		{"--image-gc-high-threshold", "90"},
		{"--image-gc-low-threshold", "80"},
		{"--cpu-cfs-quota-period", "50ms"},
		{"--allowed-unsafe-sysctls", "net.core.somaxconn,kernel.msg*"},
		{"--container-log-max-files", "3"},
		{"--pod-max-pids", "1024"},
	} {
		if got, ok := flags[tc.flag]; !ok || got != tc.want {
			t.Errorf("kubelet flag %s = %q (set: %v), want %q", tc.flag, got, ok, tc.want)
		}
	}
	for _, absent := range []string{"--topology-manager-policy", "--container-log-max-size", "--cpu-cfs-quota"} {
		if v, ok := flags[absent]; ok {
			t.Errorf("kubelet flag %s = %q set without a kubelet setting", absent, v)
		}
	}
}

func TestNodeBootstrapVersionDependentFlags(t *testing.T) {
	nb := testNode(t)
	nb.Cluster.KubernetesVersion = "1.35.0"
	nb.Cluster.NetworkPlugin, nb.Cluster.NetworkPluginMode, nb.Cluster.NetworkDataplane = "none", "", "azure"
	data, err := nb.CustomData()
	if err != nil {
		t.Fatal(err)
	}
	vars, err := azure.ParseCustomData(data)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := azure.ParseKubeletFlags(vars["KUBELET_FLAGS"])
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"--cloud-config", "--pod-infra-container-image"} {
		if _, ok := flags[gone]; ok {
			t.Errorf("1.35: kubelet flag %s still set", gone)
		}
	}
	for _, gone := range []string{"kubernetes.azure.com/azure-cni-overlay", "kubernetes.azure.com/ebpf-dataplane"} {
		if strings.Contains(vars["KUBELET_NODE_LABELS"], gone) {
			t.Errorf("network plugin none, dataplane azure: label %s still set: %s", gone, vars["KUBELET_NODE_LABELS"])
		}
	}
	if vars["NETWORK_PLUGIN"] != "none" {
		t.Errorf("NETWORK_PLUGIN = %q", vars["NETWORK_PLUGIN"])
	}
}

func TestNodeBootstrapRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*azure.NodeBootstrap)
		want   string
	}{
		{"no API server", func(b *azure.NodeBootstrap) { b.Cluster.APIServerFQDN = "" }, "CLUSTER_ENDPOINT"},
		{"no CA", func(b *azure.NodeBootstrap) { b.Cluster.ClusterCAPEM = nil }, "cluster CA: none configured"},
		{"CA not PEM", func(b *azure.NodeBootstrap) { b.Cluster.ClusterCAPEM = []byte("hello") }, "no PEM CERTIFICATE block"},
		{"bad version", func(b *azure.NodeBootstrap) { b.Cluster.KubernetesVersion = "latest" }, `Kubernetes version "latest"`},
		{"old version", func(b *azure.NodeBootstrap) { b.Cluster.KubernetesVersion = "1.29.4" }, "older than 1.30"},
		{"kubenet", func(b *azure.NodeBootstrap) { b.Cluster.NetworkPlugin = "kubenet" }, `NETWORK_PLUGIN="kubenet"`},
		{"none with overlay", func(b *azure.NodeBootstrap) { b.Cluster.NetworkPlugin = "none" }, "must be empty with NETWORK_PLUGIN=none"},
		{"bad policy", func(b *azure.NodeBootstrap) { b.Cluster.NetworkPolicy = "weave" }, `NETWORK_POLICY="weave"`},
		{"bad DNS IP", func(b *azure.NodeBootstrap) { b.Cluster.DNSServiceIP = "dns" }, `DNS_SERVICE_IP="dns"`},
		{"no token", func(b *azure.NodeBootstrap) { b.Token = "" }, "bootstrap token is not of the form"},
		{"bad subnet", func(b *azure.NodeBootstrap) { b.SubnetID = "nodes" }, `subnet ID "nodes"`},
		{"no max pods", func(b *azure.NodeBootstrap) { b.MaxPods = 0 }, "max pods 0"},
		{"no reservations", func(b *azure.NodeBootstrap) { b.Reservations = nil }, "no kubelet reservations"},
		{"taint with comma", func(b *azure.NodeBootstrap) {
			b.Taints = []corev1.Taint{{Key: "a", Value: "b,c", Effect: corev1.TaintEffectNoSchedule}}
		}, "cannot be registered"},
		{"taint without effect", func(b *azure.NodeBootstrap) { b.Taints = []corev1.Taint{{Key: "a"}} }, `has effect ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nb := testNode(t)
			tc.mutate(&nb)
			_, err := nb.CustomData()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !azure.IsInvalidRequest(err) {
				t.Errorf("CustomData() error = %v, want an invalid request containing %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
				t.Errorf("error leaks the token: %v", err)
			}
		})
	}
}

func TestClusterBootstrapFromEnv(t *testing.T) {
	ca := testCA(t)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		version string
		want    string // error substring; "" = ok
		check   func(*testing.T, azure.ClusterBootstrap)
	}{
		{"defaults", map[string]string{"CLUSTER_ENDPOINT": "https://c.hcp.eastus.azmk8s.io:443"}, "v1.33.1", "", func(t *testing.T, c azure.ClusterBootstrap) {
			if c.APIServerFQDN != "c.hcp.eastus.azmk8s.io" || c.KubernetesVersion != "1.33.1" || c.NetworkPlugin != "azure" ||
				c.NetworkPluginMode != "overlay" || c.NetworkDataplane != "cilium" || c.DNSServiceIP != "10.0.0.10" {
				t.Errorf("got %+v", c)
			}
		}},
		{"settings win", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com", "KUBERNETES_VERSION": "1.32.0",
			"NETWORK_PLUGIN": "none", "NETWORK_DATAPLANE": "azure", "DNS_SERVICE_IP": "10.96.0.10"}, "v1.33.1", "", func(t *testing.T, c azure.ClusterBootstrap) {
			if c.KubernetesVersion != "1.32.0" || c.NetworkPlugin != "none" || c.NetworkPluginMode != "" || c.DNSServiceIP != "10.96.0.10" {
				t.Errorf("got %+v", c)
			}
		}},
		// AKS reports networkPolicy "none" for a cluster without policy
		// (the default of az aks create): no policy, not a bad setting.
		{"network policy none", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com", "NETWORK_PLUGIN": "azure",
			"NETWORK_PLUGIN_MODE": "overlay", "NETWORK_POLICY": "none", "NETWORK_DATAPLANE": "azure"}, "v1.33.1", "", func(t *testing.T, c azure.ClusterBootstrap) {
			if c.NetworkPolicy != "" || c.ClassicAzureCNI() {
				t.Errorf("got %+v", c)
			}
		}},
		// An explicit NETWORK_PLUGIN=azure with an empty mode is classic
		// Azure CNI, not overlay.
		{"classic azure CNI", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com", "NETWORK_PLUGIN": "azure",
			"NETWORK_PLUGIN_MODE": "", "NETWORK_DATAPLANE": "azure"}, "v1.33.1", "", func(t *testing.T, c azure.ClusterBootstrap) {
			if c.NetworkPluginMode != "" || !c.ClassicAzureCNI() {
				t.Errorf("got %+v, want classic Azure CNI", c)
			}
		}},
		{"kubenet", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com", "NETWORK_PLUGIN": "kubenet"}, "v1.33.1",
			"--network-plugin azure --network-plugin-mode overlay", nil},
		{"no endpoint", map[string]string{}, "v1.33.1", "app setting CLUSTER_ENDPOINT is not set", nil},
		{"http endpoint", map[string]string{"CLUSTER_ENDPOINT": "http://c.example.com"}, "v1.33.1", "not an https URL", nil},
		{"other port", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com:6443"}, "v1.33.1", "on port 443", nil},
		{"bad server version", map[string]string{"CLUSTER_ENDPOINT": "https://c.example.com"}, "", "the API server's version", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := azure.ClusterBootstrapFromEnv(func(k string) string { return tc.env[k] }, ca, tc.version)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestKubeletCanSetLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"kubernetes.io/hostname":                   true,
		"node.kubernetes.io/instance-type":         true,
		"node.kubernetes.io/anything":              true,
		"kubelet.kubernetes.io/x":                  true,
		"topology.kubernetes.io/zone":              true,
		"kubernetes.io/arch":                       true,
		"karpenter.sh/nodepool":                    true,
		"kubernetes.azure.com/role":                true,
		"plain":                                    true,
		"example.kubernetes.io/team":               false,
		"kubernetes.io/role":                       false,
		"node-restriction.kubernetes.io/dedicated": false,
		"foo.k8s.io/x":                             false,
		"node-role.kubernetes.io/worker":           false,
	} {
		if got := azure.KubeletCanSetLabel(key); got != want {
			t.Errorf("KubeletCanSetLabel(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestParseCustomDataRefuses(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct{ name, data, want string }{
		{"not base64", "%%%", "not base64"},
		{"not a script", enc(`{"version":"karpfunc.azure/v1"}`), "not a bash script"},
		{"unterminated quote", enc("#!/bin/bash\nA=\"x\n"), "unterminated double quote"},
		{"unquoted space", enc("#!/bin/bash\nA=x y\n"), "would be split"},
		{"unescaped dollar", enc("#!/bin/bash\nA=\"$HOME\"\n"), "unescaped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azure.ParseCustomData(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseCustomData = %v, want %q", err, tc.want)
			}
		})
	}
	vars, err := azure.ParseCustomData(enc("#!/bin/bash\nA=\"a \\\"b\\\" \\$c \\\\ \\`d\\`\"\nB=plain\n"))
	if err != nil || vars["A"] != "a \"b\" $c \\ `d`" || vars["B"] != "plain" {
		t.Errorf("ParseCustomData = %q, %v", vars, err)
	}
}

func TestClusterLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"MC_rg_c_eastus":               "MC_rg_c_eastus",
		"MC_rg(x)":                     "MC_rg-x-z",
		"rg.":                          "rg.z",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62) + "z",
	} {
		if got := azure.ClusterLabelValue(in); got != want {
			t.Errorf("ClusterLabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}
