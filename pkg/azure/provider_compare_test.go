package azure_test

import (
	"encoding/base64"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// The provisioning a node gets from karpfunc, compared variable by variable
// with what the Azure provider's rules give for the same cluster and size
// (Azure/karpenter-provider-azure@352646f5, aksscriptless mode: the
// template pkg/providers/imagefamily/bootstrap/cse_cmd.sh.gtpl rendered
// from staticvalues.go and aksbootstrap.go). The provider's side is
// written out below from those files, not computed by karpfunc's code.
// Every difference must be on the list of deliberate differences in
// docs/node-variables.md (a "| `NAME` |" row of its table); one that is
// not fails the test.

// compareShape is a cluster as az aks create makes it.
type compareShape struct {
	name                            string
	plugin, mode, dataplane, policy string // as az aks show reports them
	kube                            string
}

// compareSize is a VM size and the AKSNodeClass's image family.
type compareSize struct {
	name, arch string
	vcpus      int
	memoryGiB  float64
	gens       []string
	family     string // AKSNodeClass spec.imageFamily ("" = default)
}

var compareShapes = []compareShape{
	{"default overlay, network policy none", "azure", "overlay", "azure", "none", "1.33.2"},
	{"Cilium overlay", "azure", "overlay", "cilium", "cilium", "1.33.2"},
	{"classic Azure CNI", "azure", "", "azure", "none", "1.33.2"},
	{"1.37 overlay", "azure", "overlay", "cilium", "none", "1.37.2"},
}

var compareSizes = []compareSize{
	{"Standard_D4s_v5", "amd64", 4, 16, []string{"V1", "V2"}, ""},
	{"Standard_D8ps_v5", "arm64", 8, 32, []string{"V2"}, ""},
	{"Standard_D4s_v5", "amd64", 4, 16, []string{"V1", "V2"}, "AzureLinux"},
}

const (
	compareNSG    = "aks-agentpool-46593302-nsg"
	compareSubnet = "/subscriptions/sub-1/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vnet-1/subnets/nodes"
	mirror        = "https://acs-mirror.azureedge.net"
)

func TestVariablesMatchTheProvider(t *testing.T) {
	deliberate := deliberateDifferences(t)
	used := map[string]bool{}
	for _, shape := range compareShapes {
		for _, size := range compareSizes {
			family := size.family
			if family == "" {
				family = "Ubuntu"
			}
			t.Run(fmt.Sprintf("%s/%s/%s", shape.name, size.name, family), func(t *testing.T) {
				ca := testCA(t)
				ours := karpfuncVariables(t, shape, size, ca)
				theirs := providerVariables(shape, size, ca)
				names := map[string]bool{}
				for name := range ours {
					names[name] = true
				}
				for name := range theirs {
					names[name] = true
				}
				sorted := make([]string, 0, len(names))
				for name := range names {
					sorted = append(sorted, name)
				}
				sort.Strings(sorted)
				for _, name := range sorted {
					a, inOurs := ours[name]
					b, inTheirs := theirs[name]
					if name == "KUBELET_FLAGS" {
						compareFlags(t, a, b, deliberate, used)
						continue
					}
					mark := "="
					if a != b || inOurs != inTheirs {
						mark = "≠"
						if _, ok := deliberate[name]; ok {
							mark = "≠ (deliberate)"
							used[name] = true
						} else {
							t.Errorf("%s: karpfunc %s, provider %s; not on docs/node-variables.md's list of deliberate differences", name, show(a, inOurs), show(b, inTheirs))
						}
					}
					t.Logf("%-34s %s karpfunc %-40s provider %s", name, mark, show(a, inOurs), show(b, inTheirs))
				}
			})
		}
	}
	// A deliberate difference no case shows is stale: the list must say
	// what the node gets today.
	for name := range deliberate {
		if !used[name] {
			t.Errorf("docs/node-variables.md lists %s as a deliberate difference, but no compared case differs in it", name)
		}
	}
}

func show(v string, ok bool) string {
	if !ok {
		return "(not set)"
	}
	if len(v) > 60 {
		return fmt.Sprintf("%q…", v[:57])
	}
	return fmt.Sprintf("%q", v)
}

// compareFlags compares KUBELET_FLAGS flag by flag (the provider joins a
// map, so its order is random); a flag's name is its deliberate-difference
// key.
func compareFlags(t *testing.T, ours, theirs string, deliberate map[string]string, used map[string]bool) {
	t.Helper()
	a, err := azure.ParseKubeletFlags(ours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := azure.ParseKubeletFlags(theirs)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		va, okA := a[name]
		vb, okB := b[name]
		if name == "--kube-reserved" || name == "--system-reserved" || name == "--eviction-hard" {
			va, vb = sortedList(va), sortedList(vb)
		}
		mark := "="
		if va != vb || okA != okB {
			mark = "≠"
			if _, ok := deliberate[name]; ok {
				mark = "≠ (deliberate)"
				used[name] = true
			} else {
				t.Errorf("KUBELET_FLAGS %s: karpfunc %s, provider %s; not on docs/node-variables.md's list of deliberate differences", name, show(va, okA), show(vb, okB))
			}
		}
		t.Logf("KUBELET_FLAGS %-36s %s karpfunc %-30s provider %s", name, mark, show(va, okA), show(vb, okB))
	}
}

func sortedList(v string) string {
	parts := strings.Split(v, ",")
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// deliberateDifferences reads the table of deliberate differences from
// docs/node-variables.md: rows "| `NAME` | reason |".
func deliberateDifferences(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "node-variables.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Deliberate differences")
	if !ok {
		t.Fatal("docs/node-variables.md has no \"## Deliberate differences\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_-]+|--[a-z-]+)` \\| (.+) \\|$")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if strings.TrimSpace(m[2]) == "" {
			t.Errorf("deliberate difference %s has no reason", m[1])
		}
		out[m[1]] = m[2]
	}
	if len(out) == 0 {
		t.Fatal("docs/node-variables.md lists no deliberate differences")
	}
	return out
}

// karpfuncVariables is karpfunc's provisioning for shape and size, plus
// the node image definition (IMAGE_DEFINITION, not a customData variable).
func karpfuncVariables(t *testing.T, shape compareShape, size compareSize, ca []byte) map[string]string {
	t.Helper()
	cluster, err := azure.ClusterBootstrapFromEnv(func(k string) string {
		return map[string]string{
			azure.EnvClusterEndpoint: "https://c-dns-1234.hcp.eastus.azmk8s.io:443", azure.EnvKubernetesVersion: shape.kube,
			azure.EnvNetworkPlugin: shape.plugin, azure.EnvNetworkPluginMode: shape.mode, azure.EnvNetworkDataplane: shape.dataplane,
			azure.EnvNetworkPolicy: shape.policy, azure.EnvTenantID: "tenant-1", azure.EnvKubeletIdentityClientID: "kubelet-id",
		}[k]
	}, ca, "v"+shape.kube)
	if err != nil {
		t.Fatal(err)
	}
	nb := azure.NodeBootstrap{Cluster: cluster, SubscriptionID: "sub-1", ResourceGroup: "MC_rg_c_eastus", Location: "eastus",
		SubnetID: compareSubnet, AdminUsername: "azureuser", Architecture: size.arch, ImageFamily: size.family,
		NetworkSecurityGroup: compareNSG, Token: testToken, MaxPods: azure.DefaultMaxPods(cluster)}
	reservations := catalog.KubeletReservations(int64(size.vcpus), int64(size.memoryGiB*1024), nb.MaxPods)
	nb.Reservations = &reservations
	list, err := nb.Variables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range list {
		out[v.Name] = v.Value
	}
	delete(out, "KUBELET_NODE_LABELS") // see nodelabels_test.go and the docs
	out["SYSCTL_CONTENT"] = sysctlSettings(t, out["SYSCTL_CONTENT"])
	img, err := nodeimage.Definition(nodeimage.Want{Family: size.family, Architecture: size.arch, Generations: size.gens, KubernetesVersion: shape.kube})
	if err != nil {
		out["IMAGE_DEFINITION"] = "none: " + err.Error()
	} else {
		out["IMAGE_DEFINITION"] = img.Definition
	}
	return out
}

// sysctlSettings is the key=value lines of a base64 sysctl file (comments
// change nothing on the node).
func sysctlSettings(t *testing.T, b64 string) string {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, ";")
}

// providerVariables is what the provider's rules give (file:line @352646f5).
func providerVariables(shape compareShape, size compareSize, ca []byte) map[string]string {
	kv := version.MustParseGeneric(shape.kube)
	minor := int(kv.Minor())
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	policy := shape.policy
	if policy == "none" { // hack/deploy/configure-values.sh maps none to ""
		policy = ""
	}
	// launchtemplate.go:204-210 getAgentbakerNetworkPlugin.
	plugin := "azure"
	if shape.plugin == "azure" && shape.mode == "overlay" || shape.plugin == "azure" && shape.mode == "" && shape.dataplane == "cilium" || shape.plugin == "none" {
		plugin = "none"
	}
	// aksbootstrap.go:246-254 kubeBinaryURL.
	kubeURL := ""
	if minor < 34 {
		kubeURL = fmt.Sprintf("%s/kubernetes/v%s/binaries/kubernetes-node-linux-%s.tar.gz", mirror, shape.kube, size.arch)
	}
	// aksbootstrap.go:256-284 CredentialProviderURL.
	cred := map[int]string{30: "1.30.12", 31: "1.31.6", 32: "1.32.5"}[minor]
	if cred == "" {
		cred = "1.33.0"
	}
	// launchtemplate.go:169-175: NSG name and aks-agentpool-<id>-routetable.
	out := map[string]string{
		"ADMINUSER": "azureuser", "MOBY_VERSION": "", "TENANT_ID": "tenant-1", "KUBERNETES_VERSION": shape.kube,
		"HYPERKUBE_URL": "", "KUBE_BINARY_URL": kubeURL, "CUSTOM_KUBE_BINARY_URL": "",
		"CREDENTIAL_PROVIDER_DOWNLOAD_URL": fmt.Sprintf("%s/cloud-provider-azure/v%s/binaries/azure-acr-credential-provider-linux-%s-v%s.tar.gz", mirror, cred, size.arch, cred),
		"KUBEPROXY_URL":                    "", "APISERVER_PUBLIC_KEY": "", "SUBSCRIPTION_ID": "sub-1", "RESOURCE_GROUP": "MC_rg_c_eastus",
		"LOCATION": "eastus", "VM_TYPE": "standard", "SUBNET": "nodes", "NETWORK_SECURITY_GROUP": compareNSG,
		"VIRTUAL_NETWORK": "vnet-1", "VIRTUAL_NETWORK_RESOURCE_GROUP": "net-rg", "ROUTE_TABLE": "aks-agentpool-46593302-routetable",
		"PRIMARY_AVAILABILITY_SET": "", "PRIMARY_SCALE_SET": "", "SERVICE_PRINCIPAL_CLIENT_ID": "msi",
		"NETWORK_PLUGIN": plugin, "NETWORK_POLICY": policy,
		// aksbootstrap.go:303-304.
		"VNET_CNI_PLUGINS_URL": fmt.Sprintf("%s/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-%s-v1.4.32.tgz", mirror, size.arch),
		"CNI_PLUGINS_URL":      fmt.Sprintf("%s/cni-plugins/v1.1.1/binaries/cni-plugins-linux-%s-v1.1.1.tgz", mirror, size.arch),
		// staticvalues.go:113-141.
		"CLOUDPROVIDER_BACKOFF": "true", "CLOUDPROVIDER_BACKOFF_MODE": "v2", "CLOUDPROVIDER_BACKOFF_RETRIES": "6",
		"CLOUDPROVIDER_BACKOFF_EXPONENT": "0", "CLOUDPROVIDER_BACKOFF_DURATION": "5", "CLOUDPROVIDER_BACKOFF_JITTER": "0",
		"CLOUDPROVIDER_RATELIMIT": "true", "CLOUDPROVIDER_RATELIMIT_QPS": "10", "CLOUDPROVIDER_RATELIMIT_QPS_WRITE": "10",
		"CLOUDPROVIDER_RATELIMIT_BUCKET": "100", "CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE": "100",
		"LOAD_BALANCER_DISABLE_OUTBOUND_SNAT": "false", "USE_MANAGED_IDENTITY_EXTENSION": "true", "USE_INSTANCE_METADATA": "true",
		"LOAD_BALANCER_SKU": "Standard", "EXCLUDE_MASTER_FROM_STANDARD_LB": "true", "MAXIMUM_LOADBALANCER_RULE_COUNT": "250",
		"CONTAINER_RUNTIME": "containerd", "CLI_TOOL": "ctr", "CONTAINERD_DOWNLOAD_URL_BASE": "", "NETWORK_MODE": "",
		"USER_ASSIGNED_IDENTITY_ID": "kubelet-id", "API_SERVER_NAME": "c-dns-1234.hcp.eastus.azmk8s.io", "IS_VHD": "true",
		"GPU_NODE": "false", "SGX_NODE": "false", "MIG_NODE": "false", "CONFIG_GPU_DRIVER_IF_NEEDED": "false",
		"ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED": "false", "TELEPORTD_PLUGIN_DOWNLOAD_URL": "", "CONTAINERD_VERSION": "",
		"CONTAINERD_PACKAGE_URL": "", "RUNC_VERSION": "", "RUNC_PACKAGE_URL": "", "ENABLE_HOSTS_CONFIG_AGENT": "false",
		"DISABLE_SSH": "false", "NEEDS_CONTAINERD": "true", "TELEPORT_ENABLED": "false", "SHOULD_CONFIGURE_HTTP_PROXY": "false",
		"SHOULD_CONFIGURE_HTTP_PROXY_CA": "false", "HTTP_PROXY_TRUSTED_CA": "", "SHOULD_CONFIGURE_CUSTOM_CA_TRUST": "false",
		"CUSTOM_CA_TRUST_COUNT": "0", "IS_KRUSTLET": "false", "GPU_NEEDS_FABRIC_MANAGER": "false", "NEEDS_DOCKER_LOGIN": "false",
		"IPV6_DUAL_STACK_ENABLED": "false", "OUTBOUND_COMMAND": "curl -v --insecure --proxy-insecure https://mcr.microsoft.com/v2/",
		"ENABLE_UNATTENDED_UPGRADES": "false", "ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE": "false", "SHOULD_CONFIG_SWAP_FILE": "false",
		"SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE": "false", "TARGET_CLOUD": "AzurePublicCloud", "TARGET_ENVIRONMENT": "AzurePublicCloud",
		"CUSTOM_ENV_JSON": "", "IS_CUSTOM_CLOUD": "false",
		"CSE_HELPERS_FILEPATH": "/opt/azure/containers/provision_source.sh", "CSE_DISTRO_HELPERS_FILEPATH": "/opt/azure/containers/provision_source_distro.sh",
		"CSE_INSTALL_FILEPATH": "/opt/azure/containers/provision_installs.sh", "CSE_DISTRO_INSTALL_FILEPATH": "/opt/azure/containers/provision_installs_distro.sh",
		"CSE_CONFIG_FILEPATH": "/opt/azure/containers/provision_configs.sh", "AZURE_PRIVATE_REGISTRY_SERVER": "",
		"HAS_CUSTOM_SEARCH_DOMAIN": "false", "CUSTOM_SEARCH_DOMAIN_FILEPATH": "/opt/azure/containers/setup-custom-search-domains.sh",
		"HTTP_PROXY_URLS": "", "HTTPS_PROXY_URLS": "", "NO_PROXY_URLS": "", "ENABLE_TLS_BOOTSTRAPPING": "true",
		"ENABLE_SECURE_TLS_BOOTSTRAPPING": "false", "ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION": "false",
		"DHCPV6_SERVICE_FILEPATH": "", "DHCPV6_CONFIG_FILEPATH": "", "THP_ENABLED": "", "THP_DEFRAG": "",
		"SERVICE_PRINCIPAL_FILE_CONTENT": b64("msi"), "KUBELET_CLIENT_CONTENT": "", "KUBELET_CLIENT_CERT_CONTENT": "",
		"KUBELET_CONFIG_FILE_ENABLED": "false", "KUBELET_CONFIG_FILE_CONTENT": "", "SWAP_FILE_SIZE_MB": "0",
		"GPU_IMAGE_SHA": "", "GPU_DRIVER_VERSION": "", "GPU_DRIVER_TYPE": "", "GPU_INSTANCE_PROFILE": "",
		"CUSTOM_SEARCH_DOMAIN_NAME": "", "CUSTOM_SEARCH_REALM_USER": "", "CUSTOM_SEARCH_REALM_PASSWORD": "",
		"MESSAGE_OF_THE_DAY": "", "HAS_KUBELET_DISK_TYPE": "false", "NEEDS_CGROUPV2": "true",
		// sysctl.conf's settings.
		"SYSCTL_CONTENT": "net.ipv4.tcp_retries2=8;net.core.message_burst=80;net.core.message_cost=40;net.core.somaxconn=16384;" +
			"net.ipv4.tcp_max_syn_backlog=16384;net.ipv4.neigh.default.gc_thresh1=4096;net.ipv4.neigh.default.gc_thresh2=8192;net.ipv4.neigh.default.gc_thresh3=16384",
		"TLS_BOOTSTRAP_TOKEN": testToken, "AZURE_ENVIRONMENT_FILEPATH": "", "IS_KATA": "false",
		// aksbootstrap.go:287 (the cluster CA bundle, base64 of its PEM).
		"KUBE_CA_CRT": base64.StdEncoding.EncodeToString(ca),
		// cse_cmd.sh.gtpl:148-151.
		"MCR_REPOSITORY_BASE": "mcr.microsoft.com", "ENABLE_IMDS_RESTRICTION": "false",
		"INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE": "false", "CSE_TIMEOUT": "15m",
		// containerd.toml.gtpl rendered for a non-GPU node with cgroup v2.
		"CONTAINERD_CONFIG_CONTENT": b64(providerContainerd),
		"KUBELET_FLAGS":             providerKubeletFlags(shape, size, minor),
		"IMAGE_DEFINITION":          providerImage(shape, size, minor),
	}
	return out
}

// providerKubeletFlags: staticvalues.go:56-86 getBaseKubeletFlags, the
// version edits of aksbootstrap.go:336-359, the unregistered taint
// (Karpenter's NodeClaim taints), then resolver.go:228-243
// prepareKubeletConfiguration: --max-pods (utils.go:159-176 GetMaxPods),
// --cluster-dns, and the reservations of instancetype.go:46-88,355-371.
func providerKubeletFlags(shape compareShape, size compareSize, minor int) string {
	flags := map[string]string{
		"--address": "0.0.0.0", "--anonymous-auth": "false", "--authentication-token-webhook": "true", "--authorization-mode": "Webhook",
		"--cgroups-per-qos": "true", "--client-ca-file": "/etc/kubernetes/certs/ca.crt", "--cloud-config": "/etc/kubernetes/azure.json",
		"--cloud-provider": "external", "--cluster-dns": "10.0.0.10", "--cluster-domain": "cluster.local",
		"--enforce-node-allocatable": "pods", "--event-qps": "0",
		"--eviction-hard":           "memory.available<750Mi,nodefs.available<10%,nodefs.inodesFree<5%",
		"--image-gc-high-threshold": "85", "--image-gc-low-threshold": "80", "--kubeconfig": "/var/lib/kubelet/kubeconfig",
		"--max-pods": "110", "--node-status-update-frequency": "10s", "--pod-infra-container-image": "mcr.microsoft.com/oss/kubernetes/pause:3.6",
		"--pod-manifest-path": "/etc/kubernetes/manifests", "--pod-max-pids": "-1", "--protect-kernel-defaults": "true",
		"--read-only-port": "0", "--resolv-conf": "/run/systemd/resolve/resolv.conf", "--rotate-certificates": "true",
		"--streaming-connection-idle-timeout": "4h", "--tls-cert-file": "/etc/kubernetes/certs/kubeletserver.crt",
		"--tls-cipher-suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305," +
			"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256",
		"--tls-private-key-file": "/etc/kubernetes/certs/kubeletserver.key",
	}
	if minor >= 34 {
		delete(flags, "--cloud-config")
	}
	if minor >= 35 {
		delete(flags, "--pod-infra-container-image")
	}
	flags["--image-credential-provider-config"] = "/var/lib/kubelet/credential-provider-config.yaml"
	flags["--image-credential-provider-bin-dir"] = "/var/lib/kubelet/credential-provider"
	flags["--register-with-taints"] = "karpenter.sh/unregistered:NoExecute"
	maxPods := 110
	switch {
	case shape.plugin == "none", shape.plugin == "azure" && shape.mode == "overlay":
		maxPods = 250
	case shape.plugin == "azure" && shape.mode == "":
		maxPods = 30
	}
	flags["--max-pods"] = fmt.Sprint(maxPods)
	cpu := int64(1000 * tax([][2]float64{{1, .06}, {2, .04}, {4, .02}, {math.MaxFloat64, .01}}, float64(size.vcpus)))
	mem := int64(1024 * tax([][2]float64{{4, .25}, {8, .20}, {16, .10}, {128, .06}, {math.MaxFloat64, .02}}, size.memoryGiB))
	flags["--kube-reserved"] = fmt.Sprintf("cpu=%dm,memory=%dMi", cpu, mem)
	flags["--system-reserved"] = "cpu=0,memory=0"
	flags["--eviction-hard"] = "memory.available<750Mi"
	parts := make([]string, 0, len(flags))
	for name, value := range flags {
		parts = append(parts, name+"="+value)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// tax is the provider's TaxBrackets.Calculate (instancetype.go:100-119).
func tax(brackets [][2]float64, amount float64) float64 {
	var total, lower float64
	for _, b := range brackets {
		if lower > amount {
			continue
		}
		upper := math.Min(b[0], amount)
		total += (upper - lower) * b[1]
		lower = b[0]
	}
	return total
}

// providerImage: resolver.go:251-284 GetImageFamily (utils.go:28-47), then
// the family's first definition for the size (ubuntu_2204.go:89-124,
// ubuntu_2404.go, azlinux.go, azlinux3.go: Gen2, Gen1, Arm64 Gen2).
func providerImage(shape compareShape, size compareSize, minor int) string {
	var prefix string
	switch size.family {
	case "AzureLinux":
		prefix = "V2"
		if minor >= 32 {
			prefix = "V3"
		}
	default:
		prefix = "2204"
		if minor >= 34 {
			prefix = "2404"
		}
	}
	ubuntu := !strings.HasPrefix(prefix, "V")
	switch {
	case size.arch == "arm64" && ubuntu:
		return prefix + "gen2arm64containerd"
	case size.arch == "arm64":
		return prefix + "gen2arm64"
	case ubuntu && hasGen(size, "V2"):
		return prefix + "gen2containerd"
	case ubuntu:
		return prefix + "containerd"
	case hasGen(size, "V2"):
		return prefix + "gen2"
	}
	return prefix
}

func hasGen(size compareSize, gen string) bool {
	for _, g := range size.gens {
		if g == gen {
			return true
		}
	}
	return false
}

// providerContainerd is containerd.toml.gtpl rendered with
// ConfigGPUDriverIfNeeded false, NeedsCgroupV2 true and
// EnsureNoDupePromiscuousBridge false.
const providerContainerd = `version = 2
oom_score = 0
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "mcr.microsoft.com/oss/kubernetes/pause:3.6"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      BinaryName = "/usr/bin/runc"
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.untrusted]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.untrusted.options]
      BinaryName = "/usr/bin/runc"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.headers]
    X-Meta-Source-Client = ["azure/aks"]
[metrics]
  address = "0.0.0.0:10257"
`
