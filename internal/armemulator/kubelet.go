package armemulator

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// provisioning is what a booted VM's node image makes of its customData:
// the kubelet's connection to the API server and its registration.
type provisioning struct {
	apiServer string // host name, reached on :443
	caPEM     []byte
	token     string
	version   string // v1.33.2
	minor     int    // 33
	maxPods   int32
	// networkPlugin is NETWORK_PLUGIN: which CNI configuration the node
	// image installs (cluster.go).
	networkPlugin string
	// classicCNI: NETWORK_PLUGIN azure without the overlay pod network
	// label, so the node's CNI hands pods the NIC's secondary IPs.
	classicCNI bool
	labels     map[string]string
	taints     []corev1.Taint
	// reservations are what the kubelet keeps from pods (allocatable.go).
	reservations kubeletReservations
	// kubeletIdentity is the client ID of the kubelet identity named in
	// azure.json (userAssignedIdentityID), "" for none.
	kubeletIdentity string
	// vars is the whole provisioning environment (gpu.go reads its GPU
	// variables against the VM's size).
	vars map[string]string
}

// provision reads customData the way the AKS node image's provisioning
// scripts do, and refuses what they (or the kubelet they start) would choke
// on; the error is the reason the node never joins.
func provision(customData string) (*provisioning, error) {
	vars, err := provisioningVars(customData)
	if err != nil {
		return nil, err
	}
	prov := &provisioning{apiServer: vars["API_SERVER_NAME"], kubeletIdentity: vars["USER_ASSIGNED_IDENTITY_ID"], vars: vars}
	if err := prov.readCredentials(vars); err != nil {
		return nil, err
	}
	if err := prov.readKubelet(vars); err != nil {
		return nil, err
	}
	// The node image writes /etc/kubernetes/azure.json before it starts
	// the kubelet (--cloud-config) and the ACR credential provider, which
	// read it; an invalid one stops both.
	if _, err := azure.RenderAzureJSON(vars); err != nil {
		return nil, fmt.Errorf("kubelet not started: %w", err)
	}
	// On overlay, Azure CNS gives pods addresses from the overlay pod CIDR
	// on nodes labelled kubernetes.azure.com/podnetwork-type=overlay; without
	// it, azure-vnet CNI takes them from the NIC (nicPodIPsProblem).
	prov.classicCNI = vars["NETWORK_PLUGIN"] == azure.NetworkPluginAzure && prov.labels[azure.LabelAKSPodNetworkType] != azure.NetworkPluginModeOver
	return prov, nil
}

// provisioningVars decodes customData's provisioning environment and checks
// the variables every node image script needs are set.
func provisioningVars(customData string) (map[string]string, error) {
	if customData == "" {
		return nil, fmt.Errorf("no customData: the node image has no provisioning environment, so no kubelet starts")
	}
	vars, err := azure.ParseCustomData(customData)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"API_SERVER_NAME", "KUBE_CA_CRT", "KUBERNETES_VERSION", "KUBELET_FLAGS", "NETWORK_PLUGIN"} {
		if vars[name] == "" {
			return nil, fmt.Errorf("provisioning variable %s is not set", name)
		}
	}
	return vars, nil
}

// readCredentials checks how the kubelet reaches and trusts the API server:
// its host name, the TLS bootstrap token and the cluster CA.
func (p *provisioning) readCredentials(vars map[string]string) error {
	if strings.ContainsAny(p.apiServer, "/: ") {
		return fmt.Errorf("API_SERVER_NAME %q is not a host name", p.apiServer)
	}
	if vars["ENABLE_TLS_BOOTSTRAPPING"] != "true" || vars["TLS_BOOTSTRAP_TOKEN"] == "" {
		return fmt.Errorf("no kubelet credentials: ENABLE_TLS_BOOTSTRAPPING=%q and TLS_BOOTSTRAP_TOKEN empty=%v (the emulated node image only joins by TLS bootstrapping)",
			vars["ENABLE_TLS_BOOTSTRAPPING"], vars["TLS_BOOTSTRAP_TOKEN"] == "")
	}
	p.token = vars["TLS_BOOTSTRAP_TOKEN"]
	var err error
	if p.caPEM, err = base64.StdEncoding.DecodeString(vars["KUBE_CA_CRT"]); err != nil {
		return fmt.Errorf("KUBE_CA_CRT is not base64: %w", err)
	}
	if block, _ := pem.Decode(p.caPEM); block == nil || block.Type != "CERTIFICATE" {
		return fmt.Errorf("KUBE_CA_CRT is not a PEM certificate")
	} else if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("KUBE_CA_CRT: %w", err)
	}
	return nil
}

// readKubelet checks what the kubelet is installed and started with: its
// version, the network plugin, its flags, taints and node labels.
func (p *provisioning) readKubelet(vars map[string]string) error {
	parsed, err := version.ParseSemantic(vars["KUBERNETES_VERSION"])
	if err != nil {
		return fmt.Errorf("KUBERNETES_VERSION %q: %w (no kubelet binary to install)", vars["KUBERNETES_VERSION"], err)
	}
	p.version = "v" + parsed.String()
	p.minor = int(parsed.Minor())
	p.networkPlugin = vars["NETWORK_PLUGIN"]
	switch vars["NETWORK_PLUGIN"] {
	case "azure", "none", "kubenet":
	default:
		return fmt.Errorf("NETWORK_PLUGIN %q is not azure, none or kubenet", vars["NETWORK_PLUGIN"])
	}
	flags, err := parseKubeletFlags(vars["KUBELET_FLAGS"])
	if err != nil {
		return fmt.Errorf("KUBELET_FLAGS: %w", err)
	}
	if p.reservations, err = readReservations(flags); err != nil {
		return err
	}
	if flags["--kubeconfig"] == "" {
		return fmt.Errorf("KUBELET_FLAGS has no --kubeconfig: the kubelet would not know where to write its credentials")
	}
	if p.maxPods, err = kubeletMaxPods(flags); err != nil {
		return err
	}
	if p.taints, err = parseTaints(flags["--register-with-taints"]); err != nil {
		return err
	}
	if p.labels, err = parseNodeLabels(vars["KUBELET_NODE_LABELS"]); err != nil {
		return err
	}
	return nil
}

// kubeletMaxPods is the kubelet's --max-pods, 110 (its default) without one.
func kubeletMaxPods(flags map[string]string) (int32, error) {
	mp, ok := flags["--max-pods"]
	if !ok {
		return 110, nil // the kubelet's default
	}
	maxPods, err := strconv.ParseInt(mp, 10, 32)
	if err != nil || maxPods <= 0 {
		return 0, fmt.Errorf("kubelet refuses --max-pods=%q", mp)
	}
	return int32(maxPods), nil
}

// parseTaints reads --register-with-taints: key[=value]:Effect, comma separated.
func parseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	if s == "" {
		return nil, nil
	}
	for _, spec := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(spec, ":")
		key, value, _ := strings.Cut(kv, "=")
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			ok = false
		}
		if !ok || key == "" {
			return nil, fmt.Errorf("kubelet refuses --register-with-taints entry %q (want key[=value]:NoSchedule|PreferNoSchedule|NoExecute)", spec)
		}
		out = append(out, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// parseNodeLabels reads KUBELET_NODE_LABELS (--node-labels): k=v, comma
// separated. The kubelet refuses to start with labels under kubernetes.io or
// k8s.io off NodeRestriction's allowlist.
func parseNodeLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	var refused []string
	for _, kv := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("kubelet refuses --node-labels entry %q (want key=value)", kv)
		}
		if !azure.KubeletCanSetLabel(key) {
			refused = append(refused, key)
		}
		out[key] = value
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("kubelet refuses to start: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v", refused)
	}
	return out, nil
}

// nicPodIPsProblem says why a classic Azure CNI node's pods could not all
// get addresses: azure-vnet CNI hands each pod one of the NIC's secondary
// IP configurations, so the NIC needs --max-pods of them in all (the
// primary is the node's own address; the Azure provider adds the same
// count: pkg/providers/instance/vminstance.go). A real node registers and
// its pods beyond the NIC's addresses stay ContainerCreating; the emulated
// node, whose pods never run, does not join, so the shortfall shows.
func nicPodIPsProblem(p *provisioning, ipConfigurations int) string {
	if !p.classicCNI || ipConfigurations >= int(p.maxPods) {
		return ""
	}
	return fmt.Sprintf("classic Azure CNI (NETWORK_PLUGIN=azure, no %s=overlay label): the NIC has %d IP configurations for --max-pods=%d, "+
		"so pods beyond %d would get no address", azure.LabelAKSPodNetworkType, ipConfigurations, p.maxPods, max(ipConfigurations-1, 0))
}
