package azure

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// A node VM joins the cluster the way the Azure Karpenter provider's default
// "aksscriptless" mode makes it join: osProfile.customData is a bash script
// that sets the environment the AKS node image's own provisioning scripts
// read (/opt/azure/containers/provision_start.sh), waits for those scripts
// to be on disk, and starts them. The scripts install the CA, write a
// bootstrap kubeconfig with the TLS bootstrap token, and start the kubelet
// with KUBELET_FLAGS and KUBELET_NODE_LABELS; the kubelet then gets its
// client certificate through a CSR and registers the Node.
//
// ClusterBootstrap holds what is the same for every node of the cluster (app
// settings and the API server); NodeBootstrap adds what is per node.

// Network settings, spelled as AKS and the Azure provider spell them.
const (
	NetworkPluginAzure    = "azure"
	NetworkPluginNone     = "none"
	NetworkPluginModeOver = "overlay"
	NetworkDataplaneAzure = "azure"
	NetworkDataplaneCil   = "cilium"
)

// MinKubernetesMinor is the oldest Kubernetes minor version nodes are
// bootstrapped for (the out-of-tree ACR credential provider is used from 1.30).
const MinKubernetesMinor = 30

// ClusterBootstrap is the cluster-wide input of a node's customData.
type ClusterBootstrap struct {
	// APIServerFQDN is the API server's host name as nodes reach it on port
	// 443 (the host of the cluster endpoint URL), e.g.
	// mycluster-dns-1a2b3c.hcp.eastus.azmk8s.io.
	APIServerFQDN string
	// ClusterCAPEM is the cluster CA certificate (PEM) the kubelet trusts the
	// API server by.
	ClusterCAPEM []byte
	// KubernetesVersion is the kubelet version the node image installs,
	// "1.33.2" (no leading v): the API server's version.
	KubernetesVersion string
	// NetworkPlugin is azure (default) or none (bring your own CNI).
	NetworkPlugin string
	// NetworkPluginMode is overlay or "" (with azure: classic Azure CNI,
	// pods on VNet IPs, one NIC IP configuration each; see
	// ClassicAzureCNI).
	NetworkPluginMode string
	// NetworkPolicy is "", azure, calico or cilium ("" is what AKS
	// reports as none).
	NetworkPolicy string
	// NetworkDataplane is azure or cilium (default).
	NetworkDataplane string
	// DNSServiceIP is the cluster DNS service address the kubelet hands
	// pods (--cluster-dns); default 10.0.0.10, AKS's default.
	DNSServiceIP string
	// VNetGUID is the cluster VNet's GUID; with Azure CNI overlay it goes
	// into a node label when set.
	VNetGUID string
	// TenantID is the Entra tenant of the cluster's identities.
	TenantID string
	// KubeletIdentityClientID is the client ID of the kubelet's managed
	// identity (image pulls from ACR); empty when the cluster has none.
	KubeletIdentityClientID string
}

// Defaults for ClusterBootstrap, as AKS and the Azure provider default them.
const (
	DefaultNetworkPlugin    = NetworkPluginAzure
	DefaultNetworkMode      = NetworkPluginModeOver
	DefaultNetworkDataplane = NetworkDataplaneCil
	DefaultDNSServiceIP     = "10.0.0.10"
)

// App settings the cluster bootstrap is read from. The names are the Azure
// Karpenter provider's, so a platform team can carry its values over.
const (
	EnvClusterEndpoint         = "CLUSTER_ENDPOINT"
	EnvKubernetesVersion       = "KUBERNETES_VERSION"
	EnvNetworkPlugin           = "NETWORK_PLUGIN"
	EnvNetworkPluginMode       = "NETWORK_PLUGIN_MODE"
	EnvNetworkPolicy           = "NETWORK_POLICY"
	EnvNetworkDataplane        = "NETWORK_DATAPLANE"
	EnvDNSServiceIP            = "DNS_SERVICE_IP"
	EnvVNetGUID                = "VNET_GUID"
	EnvTenantID                = "AZURE_TENANT_ID"
	EnvKubeletIdentityClientID = "KUBELET_IDENTITY_CLIENT_ID"
)

// NetworkPolicyNone is how AKS reports a cluster without network policy
// (networkProfile.networkPolicy "none", the default of az aks create:
// Learn, ContainerServiceNetworkPolicy "none: Network policies will not be
// enforced. This is the default value when NetworkPolicy is not
// specified"). It means the same as an empty NETWORK_POLICY; the Azure
// provider's hack/deploy/configure-values.sh maps it to empty too.
const NetworkPolicyNone = "none"

// ClassicAzureCNI reports whether pods get VNet IPs from the node's NIC
// (Azure CNI without overlay): then the NIC carries one IP configuration
// per pod, as the Azure provider's NIC build does
// (pkg/providers/instance/vminstance.go: NetworkPlugin azure and
// NetworkPluginMode not overlay).
func (c ClusterBootstrap) ClassicAzureCNI() bool {
	return c.NetworkPlugin == NetworkPluginAzure && c.NetworkPluginMode != NetworkPluginModeOver
}

// AgentBakerNetworkPlugin is NETWORK_PLUGIN as the node image's
// provisioning reads it: "none" on Azure CNI overlay, on Cilium with the
// node subnet and with plugin none, "azure" only on classic Azure CNI (the
// Azure provider's getAgentbakerNetworkPlugin,
// Azure/karpenter-provider-azure@352646f5
// pkg/providers/launchtemplate/launchtemplate.go:204-210, with
// pkg/operator/options/options_extensions.go:23-33). With "azure" AgentBaker
// installs the classic azure-vnet conflist (Azure/AgentBaker@06836ee2
// parts/linux/cloud-init/artifacts/cse_config.sh:526-537
// configureCNIIPTables, cse_install.sh:132-135 installNetworkPlugin); with
// "none" it leaves the CNI to what the cluster runs (azure-cns with
// overlay, Cilium), which is how AKS's own overlay and Cilium nodes are set
// up.
func (c ClusterBootstrap) AgentBakerNetworkPlugin() string {
	overlay := c.NetworkPlugin == NetworkPluginAzure && c.NetworkPluginMode == NetworkPluginModeOver
	ciliumNodeSubnet := c.NetworkPlugin == NetworkPluginAzure && c.NetworkPluginMode == "" && c.NetworkDataplane == NetworkDataplaneCil
	if overlay || ciliumNodeSubnet || c.NetworkPlugin == NetworkPluginNone {
		return NetworkPluginNone
	}
	return NetworkPluginAzure
}

// ClusterBootstrapFromEnv reads the cluster bootstrap settings through
// getenv; caPEM is the cluster CA (from the handler's connection to the API
// server) and serverVersion the API server's version, used when
// KUBERNETES_VERSION is not set. The result is validated: the error names
// the setting and what to do.
func ClusterBootstrapFromEnv(getenv func(string) string, caPEM []byte, serverVersion string) (ClusterBootstrap, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	endpoint := get(EnvClusterEndpoint)
	if endpoint == "" {
		return ClusterBootstrap{}, fmt.Errorf("app setting %s is not set; set it to the cluster's API server URL as nodes reach it "+
			"(az aks show --query fqdn, e.g. https://mycluster-dns-1a2b3c.hcp.eastus.azmk8s.io:443)", EnvClusterEndpoint)
	}
	endpointURL, err := url.Parse(endpoint)
	if err != nil || endpointURL.Scheme != "https" || endpointURL.Hostname() == "" || (endpointURL.Port() != "" && endpointURL.Port() != "443") || (endpointURL.Path != "" && endpointURL.Path != "/") {
		return ClusterBootstrap{}, fmt.Errorf("app setting %s=%q is not an https URL of the API server on port 443 "+
			"(e.g. https://mycluster-dns-1a2b3c.hcp.eastus.azmk8s.io:443): node images always reach the API server on 443", EnvClusterEndpoint, endpoint)
	}
	kv := get(EnvKubernetesVersion)
	source := "app setting " + EnvKubernetesVersion
	if kv == "" {
		kv = serverVersion
		source = "the API server's version"
	}
	cluster := ClusterBootstrap{
		APIServerFQDN:           endpointURL.Hostname(),
		ClusterCAPEM:            caPEM,
		KubernetesVersion:       strings.TrimPrefix(kv, "v"),
		NetworkPlugin:           orDefault(get(EnvNetworkPlugin), DefaultNetworkPlugin),
		NetworkPluginMode:       get(EnvNetworkPluginMode),
		NetworkPolicy:           networkPolicy(get(EnvNetworkPolicy)),
		NetworkDataplane:        orDefault(get(EnvNetworkDataplane), DefaultNetworkDataplane),
		DNSServiceIP:            orDefault(get(EnvDNSServiceIP), DefaultDNSServiceIP),
		VNetGUID:                get(EnvVNetGUID),
		TenantID:                get(EnvTenantID),
		KubeletIdentityClientID: get(EnvKubeletIdentityClientID),
	}
	// The overlay default applies only with the plugin's default: an
	// explicit NETWORK_PLUGIN=azure with an empty mode is classic Azure CNI,
	// which is how the preprovision hook records such a cluster (an app
	// setting cannot be told apart from an empty one).
	if get(EnvNetworkPlugin) == "" && cluster.NetworkPluginMode == "" {
		cluster.NetworkPluginMode = DefaultNetworkMode
	}
	if err := cluster.Validate(); err != nil {
		return ClusterBootstrap{}, fmt.Errorf("%w (Kubernetes version from %s)", err, source)
	}
	return cluster, nil
}

// networkPolicy reads NETWORK_POLICY: AKS's "none" is no policy.
func networkPolicy(v string) string {
	if strings.EqualFold(v, NetworkPolicyNone) {
		return ""
	}
	return v
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Validate checks every field a node image needs; the error names the
// setting behind the field.
func (c ClusterBootstrap) Validate() error {
	if c.APIServerFQDN == "" || strings.ContainsAny(c.APIServerFQDN, "/: ") {
		return fmt.Errorf("node bootstrap: API server name %q is not a host name (app setting %s)", c.APIServerFQDN, EnvClusterEndpoint)
	}
	if err := checkCA(c.ClusterCAPEM); err != nil {
		return fmt.Errorf("node bootstrap: cluster CA: %w (it comes from the kubeconfig or API server CA setting the handler uses)", err)
	}
	if _, err := kubernetesVersion(c.KubernetesVersion); err != nil {
		return fmt.Errorf("node bootstrap: %w (app setting %s)", err, EnvKubernetesVersion)
	}
	switch c.NetworkPlugin {
	case NetworkPluginAzure:
		if c.NetworkPluginMode != NetworkPluginModeOver && c.NetworkPluginMode != "" {
			return fmt.Errorf("node bootstrap: app setting %s=%q is not %q or empty", EnvNetworkPluginMode, c.NetworkPluginMode, NetworkPluginModeOver)
		}
	case NetworkPluginNone:
		if c.NetworkPluginMode != "" {
			return fmt.Errorf("node bootstrap: app setting %s=%q must be empty with %s=none", EnvNetworkPluginMode, c.NetworkPluginMode, EnvNetworkPlugin)
		}
	default:
		return fmt.Errorf("node bootstrap: app setting %s=%q is not %q or %q (kubenet is not supported, as in the Azure provider: "+
			"move the cluster to Azure CNI overlay with az aks update --network-plugin azure --network-plugin-mode overlay)",
			EnvNetworkPlugin, c.NetworkPlugin, NetworkPluginAzure, NetworkPluginNone)
	}
	switch c.NetworkPolicy {
	case "", "azure", "calico", "cilium":
	default:
		return fmt.Errorf("node bootstrap: app setting %s=%q is not one of azure, calico, cilium, none or empty", EnvNetworkPolicy, c.NetworkPolicy)
	}
	if c.NetworkDataplane != NetworkDataplaneAzure && c.NetworkDataplane != NetworkDataplaneCil {
		return fmt.Errorf("node bootstrap: app setting %s=%q is not %q or %q", EnvNetworkDataplane, c.NetworkDataplane, NetworkDataplaneAzure, NetworkDataplaneCil)
	}
	if net.ParseIP(c.DNSServiceIP) == nil {
		return fmt.Errorf("node bootstrap: app setting %s=%q is not an IP address", EnvDNSServiceIP, c.DNSServiceIP)
	}
	return nil
}

func checkCA(pemData []byte) error {
	if len(bytes.TrimSpace(pemData)) == 0 {
		return fmt.Errorf("none configured")
	}
	certs := 0
	for rest := pemData; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("not a valid certificate: %w", err)
		}
		certs++
	}
	if certs == 0 {
		return fmt.Errorf("no PEM CERTIFICATE block")
	}
	return nil
}

func kubernetesVersion(s string) (*version.Version, error) {
	parsed, err := version.ParseSemantic(s)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes version %q is not a version like 1.33.2: %w", s, err)
	}
	if parsed.Major() != 1 || parsed.Minor() < MinKubernetesMinor {
		return nil, fmt.Errorf("Kubernetes version %q is older than 1.%d, the oldest karpfunc bootstraps nodes for", s, MinKubernetesMinor)
	}
	return parsed, nil
}

// NodeBootstrap is everything one node's customData carries.
type NodeBootstrap struct {
	Cluster ClusterBootstrap
	// SubscriptionID, ResourceGroup (the node resource group) and Location
	// of the VM.
	SubscriptionID, ResourceGroup, Location string
	// SubnetID is the node subnet's ARM ID.
	SubnetID      string
	AdminUsername string
	// Architecture is amd64 or arm64; ImageFamily the AKSNodeClass's.
	Architecture, ImageFamily string
	// NetworkSecurityGroup is the cluster NSG's name in the node resource
	// group, aks-agentpool-<8 digits>-nsg (NETWORK_SECURITY_GROUP; its
	// digits, the cluster ID, name ROUTE_TABLE).
	NetworkSecurityGroup string
	// Token is the TLS bootstrap token, <id>.<secret>.
	Token string
	// MaxPods is --max-pods.
	MaxPods int32
	// Labels are the NodeClaim's labels; those a kubelet may not set (see
	// KubeletCanSetLabel) are left to registration.
	Labels map[string]string
	// Taints are registered with the node; the unregistered taint is added
	// when missing.
	Taints []corev1.Taint
	// Kubelet is the AKSNodeClass's kubelet configuration (nil: defaults).
	Kubelet *v1beta1.KubeletConfiguration
	// Reservations are the kubelet's kube-reserved, system-reserved and
	// hard eviction thresholds for the node's size and MaxPods; required.
	Reservations *catalog.Reservations
	// Sysctls is the AKSNodeClass's linuxOSConfig.sysctls (nil: defaults).
	Sysctls *v1beta1.SysctlConfiguration
	// VMSize and GPUMode (the AKSNodeClass's spec.gpu.mode, "" for the
	// default Driver) decide the GPU driver variables (gpu.go).
	VMSize  string
	GPUMode v1beta1.GPUMode
}

// Variable is one environment variable of the node's provisioning.
type Variable struct{ Name, Value string }

var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// Variables are the node provisioning environment, in the order the
// script sets them.
func (b NodeBootstrap) Variables() ([]Variable, error) {
	if err := b.Cluster.Validate(); err != nil {
		return nil, NewInvalidRequestError("%v", err)
	}
	if !bootstrapTokenRE.MatchString(b.Token) {
		return nil, NewInvalidRequestError("node bootstrap: the TLS bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}")
	}
	for _, field := range []struct{ name, val string }{
		{"SubscriptionID", b.SubscriptionID}, {"ResourceGroup", b.ResourceGroup}, {"Location", b.Location},
		{"SubnetID", b.SubnetID}, {"AdminUsername", b.AdminUsername},
	} {
		if field.val == "" {
			return nil, NewInvalidRequestError("node bootstrap: %s is required", field.name)
		}
	}
	subnet, err := parseSubnetID(b.SubnetID)
	if err != nil {
		return nil, err
	}
	arch := b.Architecture
	if arch == "" {
		arch = "amd64"
	}
	if arch != "amd64" && arch != "arm64" {
		return nil, NewInvalidRequestError("node bootstrap: architecture %q is not amd64 or arm64", arch)
	}
	if b.MaxPods <= 0 {
		return nil, NewInvalidRequestError("node bootstrap: max pods %d must be positive", b.MaxPods)
	}
	clusterID, err := clusterIDOf(b.NetworkSecurityGroup)
	if err != nil {
		return nil, err
	}
	kv, _ := kubernetesVersion(b.Cluster.KubernetesVersion) // validated above
	cluster := b.Cluster
	flags, err := b.kubeletFlags(kv)
	if err != nil {
		return nil, err
	}
	labels := b.nodeLabels(subnet.name, kv)
	credProvider := fmt.Sprintf("%s/cloud-provider-azure/v%s/binaries/azure-acr-credential-provider-linux-%s-v%s.tar.gz",
		aksMirror, credentialProviderVersion(kv), arch, credentialProviderVersion(kv))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	values := map[string]string{
		"ADMINUSER":                        b.AdminUsername,
		"TENANT_ID":                        cluster.TenantID,
		"KUBERNETES_VERSION":               cluster.KubernetesVersion,
		"KUBE_BINARY_URL":                  kubeBinaryURL(kv, cluster.KubernetesVersion, arch),
		"CREDENTIAL_PROVIDER_DOWNLOAD_URL": credProvider,
		"SUBSCRIPTION_ID":                  b.SubscriptionID,
		"RESOURCE_GROUP":                   b.ResourceGroup,
		"LOCATION":                         b.Location,
		"VM_TYPE":                          "standard",
		"SUBNET":                           subnet.name,
		"VIRTUAL_NETWORK":                  subnet.vnet,
		"VIRTUAL_NETWORK_RESOURCE_GROUP":   subnet.resourceGroup,
		"SERVICE_PRINCIPAL_CLIENT_ID":      "msi",
		"SERVICE_PRINCIPAL_FILE_CONTENT":   b64("msi"),
		"USER_ASSIGNED_IDENTITY_ID":        cluster.KubeletIdentityClientID,
		"USE_MANAGED_IDENTITY_EXTENSION":   "true",
		"USE_INSTANCE_METADATA":            "true",
		"LOAD_BALANCER_SKU":                "Standard",
		"EXCLUDE_MASTER_FROM_STANDARD_LB":  "true",
		"MAXIMUM_LOADBALANCER_RULE_COUNT":  "250",
		"NETWORK_PLUGIN":                   cluster.AgentBakerNetworkPlugin(),
		"NETWORK_SECURITY_GROUP":           b.NetworkSecurityGroup,
		"ROUTE_TABLE":                      "aks-agentpool-" + clusterID + "-routetable",
		"NETWORK_POLICY":                   cluster.NetworkPolicy,
		"VNET_CNI_PLUGINS_URL":             fmt.Sprintf("%s/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-%s-v1.4.32.tgz", aksMirror, arch),
		"CNI_PLUGINS_URL":                  fmt.Sprintf("%s/cni-plugins/v1.1.1/binaries/cni-plugins-linux-%s-v1.1.1.tgz", aksMirror, arch),
		"CONTAINER_RUNTIME":                "containerd",
		"CLI_TOOL":                         "ctr",
		"NEEDS_CONTAINERD":                 "true",
		"NEEDS_CGROUPV2":                   "true",
		"API_SERVER_NAME":                  cluster.APIServerFQDN,
		"IS_VHD":                           "true",
		"TARGET_CLOUD":                     "AzurePublicCloud",
		"TARGET_ENVIRONMENT":               "AzurePublicCloud",
		"IS_CUSTOM_CLOUD":                  "false",
		"CSE_HELPERS_FILEPATH":             "/opt/azure/containers/provision_source.sh",
		"CSE_DISTRO_HELPERS_FILEPATH":      "/opt/azure/containers/provision_source_distro.sh",
		"CSE_INSTALL_FILEPATH":             "/opt/azure/containers/provision_installs.sh",
		"CSE_DISTRO_INSTALL_FILEPATH":      "/opt/azure/containers/provision_installs_distro.sh",
		"CSE_CONFIG_FILEPATH":              "/opt/azure/containers/provision_configs.sh",
		"CUSTOM_SEARCH_DOMAIN_FILEPATH":    "/opt/azure/containers/setup-custom-search-domains.sh",
		"OUTBOUND_COMMAND":                 "curl -v --insecure --proxy-insecure https://mcr.microsoft.com/v2/",
		"ENABLE_TLS_BOOTSTRAPPING":         "true",
		"ENABLE_SECURE_TLS_BOOTSTRAPPING":  "false",
		"TLS_BOOTSTRAP_TOKEN":              b.Token,
		"KUBE_CA_CRT":                      base64.StdEncoding.EncodeToString(cluster.ClusterCAPEM),
		"KUBELET_FLAGS":                    flags,
		"KUBELET_NODE_LABELS":              labels,
		"KUBELET_CONFIG_FILE_ENABLED":      "false",
		"SYSCTL_CONTENT":                   b64(sysctlContent(b.Sysctls)),
		"ENABLE_UNATTENDED_UPGRADES":       "false",
		"SHOULD_CONFIGURE_HTTP_PROXY":      "false",
		"SHOULD_CONFIGURE_CUSTOM_CA_TRUST": "false",
		"IPV6_DUAL_STACK_ENABLED":          "false",
		"DISABLE_SSH":                      "false",
		"MCR_REPOSITORY_BASE":              "mcr.microsoft.com",
	}
	for name, value := range nodeImageStaticValues {
		values[name] = value
	}
	for name, value := range gpuVariables(b.VMSize, b.GPUMode) {
		values[name] = value
	}
	return orderedVariables(values)
}

// CustomData renders the provisioning script, base64-encoded as
// osProfile.customData takes it. The result holds the bootstrap token:
// never log it.
func (b NodeBootstrap) CustomData() (string, error) {
	vars, err := b.Variables()
	if err != nil {
		return "", err
	}
	var script strings.Builder
	script.WriteString(scriptHeader)
	for _, variable := range vars {
		fmt.Fprintf(&script, "%s=%s\n", variable.Name, shellQuote(variable.Value))
	}
	script.WriteString(scriptFooter)
	return base64.StdEncoding.EncodeToString([]byte(script.String())), nil
}

// The script exports every variable to the provisioning scripts, marks the
// manifest the image's wait loop looks for, waits (up to 20 minutes) for the
// image's provision.sh to be complete, then starts the provisioning.
const (
	aksMirror    = "https://acs-mirror.azureedge.net"
	scriptHeader = `#!/bin/bash
# Node provisioning environment for the AKS node image, written by karpfunc.
set -o allexport
echo '#EOF' >> /opt/azure/manifest.json
mkdir -p /var/log/azure/Microsoft.Azure.Extensions.CustomScript/events
echo "$(date),$(hostname)" > /var/log/azure/cluster-provision-cse-output.log
for i in $(seq 1 1200); do
  grep -Fq "EOF" /opt/azure/containers/provision.sh && break
  if [ "$i" -eq 1200 ]; then exit 100; else sleep 1; fi
done
`
	scriptFooter = `/usr/bin/nohup /bin/bash -c "/bin/bash /opt/azure/containers/provision_start.sh"
`
	containerdConfig = `version = 2
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
	sysctlConfig = `net.ipv4.tcp_retries2=8
net.core.message_burst=80
net.core.message_cost=40
net.core.somaxconn=16384
net.ipv4.tcp_max_syn_backlog=16384
net.ipv4.neigh.default.gc_thresh1=4096
net.ipv4.neigh.default.gc_thresh2=8192
net.ipv4.neigh.default.gc_thresh3=16384
`
)

// shellQuote double-quotes v for bash, escaping what bash expands inside
// double quotes.
func shellQuote(v string) string {
	escaper := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`")
	return `"` + escaper.Replace(v) + `"`
}

// kubeBinaryURL is where the node image downloads the kubelet and kubectl
// of version: empty from Kubernetes 1.34, whose node images carry them (the
// Azure provider's kubeBinaryURL,
// pkg/providers/imagefamily/bootstrap/aksbootstrap.go:246-254).
func kubeBinaryURL(kv *version.Version, raw, arch string) string {
	if kv.Minor() >= 34 {
		return ""
	}
	return fmt.Sprintf("%s/kubernetes/v%s/binaries/kubernetes-node-linux-%s.tar.gz", aksMirror, raw, arch)
}

// clusterNSGRE is the cluster NSG AKS creates in the node resource group;
// its digits are the cluster ID the route table is named by (the
// provider's networksecuritygroup.GetClusterIDFromNSGName and
// launchtemplate.go:173-175).
var clusterNSGRE = regexp.MustCompile(`(?i)^aks-agentpool-(\d{8})-nsg$`)

func clusterIDOf(nsg string) (string, error) {
	match := clusterNSGRE.FindStringSubmatch(nsg)
	if match == nil {
		return "", NewInvalidRequestError("node bootstrap: the cluster NSG %q is not named aks-agentpool-<8 digits>-nsg (the NSG AKS creates in the node resource group; "+
			"NETWORK_SECURITY_GROUP and ROUTE_TABLE are named after it)", nsg)
	}
	return match[1], nil
}

// credentialProviderVersion is the out-of-tree ACR credential provider
// release for a Kubernetes minor (one per cloud-provider-azure release).
func credentialProviderVersion(kv *version.Version) string {
	switch kv.Minor() {
	case 30:
		return "1.30.12"
	case 31:
		return "1.31.6"
	case 32:
		return "1.32.5"
	default:
		return "1.33.0"
	}
}

// kubeletFlags are the flags AKS runs its kubelets with, the node's pod
// limit, taints and cluster DNS, and the AKSNodeClass's kubelet settings;
// "--name=value" joined by spaces, sorted by name.
func (b NodeBootstrap) kubeletFlags(kv *version.Version) (string, error) {
	flags := map[string]string{
		"--address":                           "0.0.0.0",
		"--anonymous-auth":                    "false",
		"--authentication-token-webhook":      "true",
		"--authorization-mode":                "Webhook",
		"--cgroups-per-qos":                   "true",
		"--client-ca-file":                    "/etc/kubernetes/certs/ca.crt",
		"--cloud-provider":                    "external",
		"--cluster-dns":                       b.Cluster.DNSServiceIP,
		"--cluster-domain":                    "cluster.local",
		"--enforce-node-allocatable":          "pods",
		"--event-qps":                         "0",
		"--image-gc-high-threshold":           "85",
		"--image-gc-low-threshold":            "80",
		"--image-credential-provider-config":  "/var/lib/kubelet/credential-provider-config.yaml",
		"--image-credential-provider-bin-dir": "/var/lib/kubelet/credential-provider",
		"--kubeconfig":                        "/var/lib/kubelet/kubeconfig",
		"--max-pods":                          strconv.Itoa(int(b.MaxPods)),
		"--node-status-update-frequency":      "10s",
		"--pod-manifest-path":                 "/etc/kubernetes/manifests",
		"--pod-max-pids":                      "-1",
		"--protect-kernel-defaults":           "true",
		"--read-only-port":                    "0",
		"--resolv-conf":                       "/run/systemd/resolve/resolv.conf",
		"--rotate-certificates":               "true",
		"--streaming-connection-idle-timeout": "4h",
		"--tls-cert-file":                     "/etc/kubernetes/certs/kubeletserver.crt",
		"--tls-private-key-file":              "/etc/kubernetes/certs/kubeletserver.key",
		"--tls-cipher-suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256," +
			"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305," +
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256",
	}
	// --kube-reserved, --system-reserved and --eviction-hard come from the
	// same Reservations the engine subtracted from the size's capacity, so
	// the Node's allocatable is the one the plan assumed.
	if b.Reservations == nil {
		return "", NewInvalidRequestError("node bootstrap: no kubelet reservations for the node's size (catalog.InstanceType.Reservations): " +
			"the Node's allocatable would not be the one the plan assumed")
	}
	maps.Copy(flags, b.Reservations.KubeletFlags())
	if kv.Minor() < 34 {
		flags["--cloud-config"] = "/etc/kubernetes/azure.json"
	}
	if kv.Minor() < 35 {
		flags["--pod-infra-container-image"] = "mcr.microsoft.com/oss/kubernetes/pause:3.6"
	}
	taints, err := registerTaints(b.Taints)
	if err != nil {
		return "", err
	}
	flags["--register-with-taints"] = taints
	if b.Kubelet != nil {
		addKubeletSettings(flags, b.Kubelet)
	}
	names := make([]string, 0, len(flags))
	for name, value := range flags {
		if strings.ContainsAny(value, " \t\n") {
			return "", NewInvalidRequestError("node bootstrap: kubelet flag %s=%q contains white space", name, value)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + flags[name]
	}
	return strings.Join(parts, " "), nil
}

// addKubeletSettings sets the flags for the AKSNodeClass's kubelet
// settings that are set.
func addKubeletSettings(flags map[string]string, kubelet *v1beta1.KubeletConfiguration) {
	if kubelet.CPUManagerPolicy != "" {
		flags["--cpu-manager-policy"] = kubelet.CPUManagerPolicy
	}
	if kubelet.CPUCFSQuota != nil {
		flags["--cpu-cfs-quota"] = strconv.FormatBool(*kubelet.CPUCFSQuota)
	}
	if kubelet.CPUCFSQuotaPeriod.Duration > 0 {
		flags["--cpu-cfs-quota-period"] = kubelet.CPUCFSQuotaPeriod.Duration.String()
	}
	if kubelet.ImageGCHighThresholdPercent != nil {
		flags["--image-gc-high-threshold"] = strconv.Itoa(int(*kubelet.ImageGCHighThresholdPercent))
	}
	if kubelet.ImageGCLowThresholdPercent != nil {
		flags["--image-gc-low-threshold"] = strconv.Itoa(int(*kubelet.ImageGCLowThresholdPercent))
	}
	if kubelet.TopologyManagerPolicy != "" {
		flags["--topology-manager-policy"] = kubelet.TopologyManagerPolicy
	}
	if len(kubelet.AllowedUnsafeSysctls) > 0 {
		flags["--allowed-unsafe-sysctls"] = strings.Join(kubelet.AllowedUnsafeSysctls, ",")
	}
	if kubelet.ContainerLogMaxSize != "" {
		flags["--container-log-max-size"] = kubelet.ContainerLogMaxSize
	}
	if kubelet.ContainerLogMaxFiles != nil {
		flags["--container-log-max-files"] = strconv.Itoa(int(*kubelet.ContainerLogMaxFiles))
	}
	if kubelet.PodPidsLimit != nil {
		flags["--pod-max-pids"] = strconv.FormatInt(*kubelet.PodPidsLimit, 10)
	}
}

// registerTaints is --register-with-taints: the taints in order, the
// unregistered taint appended when missing, each key=value:Effect.
func registerTaints(taints []corev1.Taint) (string, error) {
	all := append([]corev1.Taint{}, taints...)
	found := false
	for i := range all {
		if all[i].MatchTaint(&karpv1.UnregisteredNoExecuteTaint) {
			found = true
		}
	}
	if !found {
		all = append(all, karpv1.UnregisteredNoExecuteTaint)
	}
	parts := make([]string, 0, len(all))
	for _, taint := range all {
		if taint.Key == "" || strings.ContainsAny(taint.Key+taint.Value, ",:= ") {
			return "", NewInvalidRequestError("node bootstrap: taint %q cannot be registered by the kubelet (empty key, or , : = or space in key or value)", taint.ToString())
		}
		switch taint.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return "", NewInvalidRequestError("node bootstrap: taint %q has effect %q, not NoSchedule, PreferNoSchedule or NoExecute", taint.Key, taint.Effect)
		}
		parts = append(parts, taint.ToString())
	}
	return strings.Join(parts, ","), nil
}

type subnetParts struct{ resourceGroup, vnet, name string }

func parseSubnetID(id string) (subnetParts, error) {
	segments := strings.Split(strings.Trim(id, "/"), "/")
	if len(segments) != 10 || !strings.EqualFold(segments[0], "subscriptions") || !strings.EqualFold(segments[2], "resourceGroups") ||
		!strings.EqualFold(segments[4], "providers") || !strings.EqualFold(segments[5], "Microsoft.Network") ||
		!strings.EqualFold(segments[6], "virtualNetworks") || !strings.EqualFold(segments[8], "subnets") {
		return subnetParts{}, NewInvalidRequestError("node bootstrap: subnet ID %q is not /subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>", id)
	}
	return subnetParts{resourceGroup: segments[3], vnet: segments[7], name: segments[9]}, nil
}

// customData renders req's node bootstrap with a fresh-enough token. It runs
// before any ARM call, so missing settings fail the launch before anything
// exists in Azure.
func (l *Launcher) customData(ctx context.Context, req LaunchRequest) (string, error) {
	if l.opts.Bootstrap == nil || l.opts.BootstrapTokens == nil {
		return "", NewInvalidRequestError("launch %q: no node bootstrap configured (cluster endpoint, CA, Kubernetes version and a "+
			"bootstrap token source): a VM launched without it could never join the cluster", req.Name)
	}
	token, err := l.opts.BootstrapTokens.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("launch %q: getting a TLS bootstrap token: %w", req.Name, err)
	}
	// The same count as the NIC's pod IP configurations (podips.go).
	maxPods := l.launchMaxPods(req)
	cluster := *l.opts.Bootstrap
	if l.opts.KubernetesVersion != nil {
		if cluster.KubernetesVersion, err = l.opts.KubernetesVersion(ctx); err != nil {
			return "", fmt.Errorf("launch %q: reading the cluster's Kubernetes version: %w", req.Name, err)
		}
		if err := cluster.Validate(); err != nil {
			return "", fmt.Errorf("launch %q: %w", req.Name, err)
		}
	}
	nsg, err := l.SecurityGroupName(ctx)
	if err != nil {
		return "", fmt.Errorf("launch %q: %w", req.Name, err)
	}
	data, err := NodeBootstrap{
		Cluster: cluster, NetworkSecurityGroup: nsg,
		SubscriptionID: l.opts.SubscriptionID, ResourceGroup: l.opts.ResourceGroup, Location: l.opts.Location,
		SubnetID: req.SubnetID, AdminUsername: adminUsername,
		Architecture: req.Architecture, ImageFamily: req.ImageFamily,
		Token: token, MaxPods: maxPods, Labels: req.Labels, Taints: req.Taints, Kubelet: req.Kubelet,
		Reservations: req.Reservations,
		Sysctls:      req.Sysctls,
		VMSize:       req.InstanceType, GPUMode: req.GPUMode,
	}.CustomData()
	if err != nil {
		return "", fmt.Errorf("launch %q: %w", req.Name, err)
	}
	return data, nil
}
