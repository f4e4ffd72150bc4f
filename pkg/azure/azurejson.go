package azure

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// NodeImageVariables are the names of every variable the AKS node image's
// provisioning scripts read from the environment customData sets, in the
// order the Azure Karpenter provider's aksscriptless template sets them:
// Azure/karpenter-provider-azure
// pkg/providers/imagefamily/bootstrap/cse_cmd.sh.gtpl at commit 352646f5
// (values: staticvalues.go, getStaticNodeBootstrapVars). The node image's scripts
// (Azure/AgentBaker parts/linux/cloud-init/artifacts/cse_config.sh and
// cse_main.sh) run without `set -u`, so a variable left out reads as empty:
// for the ones configureAzureJson writes unquoted (AzureJSONUnquoted) that
// leaves /etc/kubernetes/azure.json invalid JSON, and cloud-node-manager
// and the kubelet's credential provider fail on it. Variables() sets every
// one of them. (The custom-cloud block's REPO_DEPOT_ENDPOINT and
// CUSTOM_CA_CERT_<i> are left out: karpfunc supports neither a custom cloud
// nor custom CA trust.)
var NodeImageVariables = []string{
	"ADMINUSER", "MOBY_VERSION", "TENANT_ID", "KUBERNETES_VERSION", "HYPERKUBE_URL", "KUBE_BINARY_URL",
	"CUSTOM_KUBE_BINARY_URL", "CREDENTIAL_PROVIDER_DOWNLOAD_URL", "KUBEPROXY_URL", "APISERVER_PUBLIC_KEY",
	"SUBSCRIPTION_ID", "RESOURCE_GROUP", "LOCATION", "VM_TYPE", "SUBNET", "NETWORK_SECURITY_GROUP",
	"VIRTUAL_NETWORK", "VIRTUAL_NETWORK_RESOURCE_GROUP", "ROUTE_TABLE", "PRIMARY_AVAILABILITY_SET",
	"PRIMARY_SCALE_SET", "SERVICE_PRINCIPAL_CLIENT_ID", "NETWORK_PLUGIN", "NETWORK_POLICY",
	"VNET_CNI_PLUGINS_URL", "CNI_PLUGINS_URL",
	"CLOUDPROVIDER_BACKOFF", "CLOUDPROVIDER_BACKOFF_MODE", "CLOUDPROVIDER_BACKOFF_RETRIES",
	"CLOUDPROVIDER_BACKOFF_EXPONENT", "CLOUDPROVIDER_BACKOFF_DURATION", "CLOUDPROVIDER_BACKOFF_JITTER",
	"CLOUDPROVIDER_RATELIMIT", "CLOUDPROVIDER_RATELIMIT_QPS", "CLOUDPROVIDER_RATELIMIT_QPS_WRITE",
	"CLOUDPROVIDER_RATELIMIT_BUCKET", "CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE",
	"LOAD_BALANCER_DISABLE_OUTBOUND_SNAT", "USE_MANAGED_IDENTITY_EXTENSION", "USE_INSTANCE_METADATA",
	"LOAD_BALANCER_SKU", "EXCLUDE_MASTER_FROM_STANDARD_LB", "MAXIMUM_LOADBALANCER_RULE_COUNT",
	"CONTAINER_RUNTIME", "CLI_TOOL", "CONTAINERD_DOWNLOAD_URL_BASE", "NETWORK_MODE",
	"USER_ASSIGNED_IDENTITY_ID", "API_SERVER_NAME", "IS_VHD", "GPU_NODE", "SGX_NODE", "MIG_NODE",
	"CONFIG_GPU_DRIVER_IF_NEEDED", "ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED", "TELEPORTD_PLUGIN_DOWNLOAD_URL",
	"CONTAINERD_VERSION", "CONTAINERD_PACKAGE_URL", "RUNC_VERSION", "RUNC_PACKAGE_URL",
	"ENABLE_HOSTS_CONFIG_AGENT", "DISABLE_SSH", "NEEDS_CONTAINERD", "TELEPORT_ENABLED",
	"SHOULD_CONFIGURE_HTTP_PROXY", "SHOULD_CONFIGURE_HTTP_PROXY_CA", "HTTP_PROXY_TRUSTED_CA",
	"SHOULD_CONFIGURE_CUSTOM_CA_TRUST", "CUSTOM_CA_TRUST_COUNT", "IS_KRUSTLET", "GPU_NEEDS_FABRIC_MANAGER",
	"NEEDS_DOCKER_LOGIN", "IPV6_DUAL_STACK_ENABLED", "OUTBOUND_COMMAND", "ENABLE_UNATTENDED_UPGRADES",
	"ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE", "SHOULD_CONFIG_SWAP_FILE", "SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE",
	"TARGET_CLOUD", "TARGET_ENVIRONMENT", "CUSTOM_ENV_JSON", "IS_CUSTOM_CLOUD",
	"CSE_HELPERS_FILEPATH", "CSE_DISTRO_HELPERS_FILEPATH", "CSE_INSTALL_FILEPATH",
	"CSE_DISTRO_INSTALL_FILEPATH", "CSE_CONFIG_FILEPATH", "AZURE_PRIVATE_REGISTRY_SERVER",
	"HAS_CUSTOM_SEARCH_DOMAIN", "CUSTOM_SEARCH_DOMAIN_FILEPATH", "HTTP_PROXY_URLS", "HTTPS_PROXY_URLS",
	"NO_PROXY_URLS", "ENABLE_TLS_BOOTSTRAPPING", "ENABLE_SECURE_TLS_BOOTSTRAPPING", "ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION",
	"DHCPV6_SERVICE_FILEPATH", "DHCPV6_CONFIG_FILEPATH", "THP_ENABLED", "THP_DEFRAG",
	"SERVICE_PRINCIPAL_FILE_CONTENT", "KUBELET_CLIENT_CONTENT", "KUBELET_CLIENT_CERT_CONTENT",
	"KUBELET_CONFIG_FILE_ENABLED", "KUBELET_CONFIG_FILE_CONTENT", "SWAP_FILE_SIZE_MB", "GPU_IMAGE_SHA",
	"GPU_DRIVER_VERSION", "GPU_DRIVER_TYPE", "GPU_INSTANCE_PROFILE", "CUSTOM_SEARCH_DOMAIN_NAME",
	"CUSTOM_SEARCH_REALM_USER", "CUSTOM_SEARCH_REALM_PASSWORD", "MESSAGE_OF_THE_DAY",
	"HAS_KUBELET_DISK_TYPE", "NEEDS_CGROUPV2", "SYSCTL_CONTENT", "TLS_BOOTSTRAP_TOKEN", "KUBELET_FLAGS",
	"KUBELET_NODE_LABELS", "AZURE_ENVIRONMENT_FILEPATH", "KUBE_CA_CRT", "CONTAINERD_CONFIG_CONTENT",
	"MCR_REPOSITORY_BASE", "IS_KATA", "ENABLE_IMDS_RESTRICTION", "INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE",
	"CSE_TIMEOUT",
}

// AzureJSONPath is where the node image writes the cloud provider config.
const AzureJSONPath = "/etc/kubernetes/azure.json"

// azureJSONTemplate is /etc/kubernetes/azure.json as configureAzureJson
// (Azure/AgentBaker parts/linux/cloud-init/artifacts/cse_config.sh) writes
// it with a bash here-document: ${NAME} is the variable's value as is, so
// the unquoted ones must be JSON literals (numbers, true/false) and the
// quoted ones must not hold a quote or backslash. aadClientSecret is the
// decoded SERVICE_PRINCIPAL_FILE_CONTENT, which configureAzureJson escapes;
// KMS_PROVIDER_VAULT_NAME is not in the aksscriptless template and reads
// as empty.
const azureJSONTemplate = `{
    "cloud": "${TARGET_CLOUD}",
    "tenantId": "${TENANT_ID}",
    "subscriptionId": "${SUBSCRIPTION_ID}",
    "aadClientId": "${SERVICE_PRINCIPAL_CLIENT_ID}",
    "aadClientSecret": "${SERVICE_PRINCIPAL_CLIENT_SECRET}",
    "resourceGroup": "${RESOURCE_GROUP}",
    "location": "${LOCATION}",
    "vmType": "${VM_TYPE}",
    "subnetName": "${SUBNET}",
    "securityGroupName": "${NETWORK_SECURITY_GROUP}",
    "vnetName": "${VIRTUAL_NETWORK}",
    "vnetResourceGroup": "${VIRTUAL_NETWORK_RESOURCE_GROUP}",
    "routeTableName": "${ROUTE_TABLE}",
    "primaryAvailabilitySetName": "${PRIMARY_AVAILABILITY_SET}",
    "primaryScaleSetName": "${PRIMARY_SCALE_SET}",
    "cloudProviderBackoffMode": "${CLOUDPROVIDER_BACKOFF_MODE}",
    "cloudProviderBackoff": ${CLOUDPROVIDER_BACKOFF},
    "cloudProviderBackoffRetries": ${CLOUDPROVIDER_BACKOFF_RETRIES},
    "cloudProviderBackoffExponent": ${CLOUDPROVIDER_BACKOFF_EXPONENT},
    "cloudProviderBackoffDuration": ${CLOUDPROVIDER_BACKOFF_DURATION},
    "cloudProviderBackoffJitter": ${CLOUDPROVIDER_BACKOFF_JITTER},
    "cloudProviderRateLimit": ${CLOUDPROVIDER_RATELIMIT},
    "cloudProviderRateLimitQPS": ${CLOUDPROVIDER_RATELIMIT_QPS},
    "cloudProviderRateLimitBucket": ${CLOUDPROVIDER_RATELIMIT_BUCKET},
    "cloudProviderRateLimitQPSWrite": ${CLOUDPROVIDER_RATELIMIT_QPS_WRITE},
    "cloudProviderRateLimitBucketWrite": ${CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE},
    "useManagedIdentityExtension": ${USE_MANAGED_IDENTITY_EXTENSION},
    "userAssignedIdentityID": "${USER_ASSIGNED_IDENTITY_ID}",
    "useInstanceMetadata": ${USE_INSTANCE_METADATA},
    "loadBalancerSku": "${LOAD_BALANCER_SKU}",
    "disableOutboundSNAT": ${LOAD_BALANCER_DISABLE_OUTBOUND_SNAT},
    "excludeMasterFromStandardLB": ${EXCLUDE_MASTER_FROM_STANDARD_LB},
    "providerVaultName": "${KMS_PROVIDER_VAULT_NAME}",
    "maximumLoadBalancerRuleCount": ${MAXIMUM_LOADBALANCER_RULE_COUNT},
    "providerKeyName": "k8s",
    "providerKeyVersion": ""
}
`

// AzureJSONUnquoted are the variables configureAzureJson writes into
// azure.json without quotes: each must hold a JSON literal.
var AzureJSONUnquoted = unquotedIn(azureJSONTemplate)

var (
	templateVarRE = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)
	unquotedVarRE = regexp.MustCompile(`: \$\{([A-Z0-9_]+)\},?$`)
)

func unquotedIn(tmpl string) []string {
	var names []string
	for _, line := range strings.Split(tmpl, "\n") {
		if match := unquotedVarRE.FindStringSubmatch(line); match != nil {
			names = append(names, match[1])
		}
	}
	return names
}

// AzureJSONError is an azure.json the node image would write but nothing
// can read; Unquoted names the unquoted variables that are empty.
type AzureJSONError struct {
	error
	Unquoted []string
}

func (e *AzureJSONError) Unwrap() error { return e.error }

// RenderAzureJSON is /etc/kubernetes/azure.json as the node image's
// configureAzureJson writes it from the provisioning variables vars (a
// variable not in vars reads as empty, as in bash), including its removal
// of the exponent and jitter lines with backoff mode v2. The error, an
// *AzureJSONError, is returned when the result is not valid JSON: the
// cloud-node-manager, the kubelet (--cloud-config) and the ACR credential
// provider all read the file.
func RenderAzureJSON(vars map[string]string) ([]byte, error) {
	secret, err := base64.StdEncoding.DecodeString(vars["SERVICE_PRINCIPAL_FILE_CONTENT"])
	if err != nil {
		return nil, &AzureJSONError{error: fmt.Errorf("SERVICE_PRINCIPAL_FILE_CONTENT is not base64 (base64 -d fails in configureAzureJson): %w", err)}
	}
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(string(secret))
	lookup := func(name string) string {
		if name == "SERVICE_PRINCIPAL_CLIENT_SECRET" {
			return escaped
		}
		return vars[name]
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(azureJSONTemplate, "\n") {
		if vars["CLOUDPROVIDER_BACKOFF_MODE"] == "v2" &&
			(strings.Contains(line, "cloudProviderBackoffExponent") || strings.Contains(line, "cloudProviderBackoffJitter")) {
			continue // configureAzureJson: sed -i "/cloudProviderBackoffExponent/d" (and Jitter) with mode v2
		}
		out.WriteString(templateVarRE.ReplaceAllStringFunc(line, func(ref string) string {
			return lookup(templateVarRE.FindStringSubmatch(ref)[1])
		}))
	}
	doc := []byte(out.String())
	var parsed map[string]any
	if err := json.Unmarshal(doc, &parsed); err != nil {
		var empty []string
		for _, name := range AzureJSONUnquoted {
			if strings.TrimSpace(vars[name]) == "" {
				empty = append(empty, name)
			}
		}
		return doc, &AzureJSONError{error: fmt.Errorf("%s is not valid JSON: %w (unquoted variables left empty: %v)", AzureJSONPath, err, empty), Unquoted: empty}
	}
	return doc, nil
}

// nodeImageStaticValues are the variables that are the same on every node,
// with the Azure Karpenter provider's values (staticvalues.go,
// getStaticNodeBootstrapVars; booleans and numbers as its template renders
// them). Features karpfunc does not offer (custom CA trust, HTTP proxy,
// swap, Kata, custom search domain, Teleport, Krustlet) are off, and so are
// the GPU features the provider never turns on (MIG, fabric manager, the
// AKS-managed device plugin); the per-size GPU variables are in gpu.go.
var nodeImageStaticValues = map[string]string{
	// The cloud provider's backoff and rate limits: written into azure.json
	// unquoted, so each must be a JSON literal.
	"CLOUDPROVIDER_BACKOFF":                "true",
	"CLOUDPROVIDER_BACKOFF_MODE":           "v2",
	"CLOUDPROVIDER_BACKOFF_RETRIES":        "6",
	"CLOUDPROVIDER_BACKOFF_EXPONENT":       "0",
	"CLOUDPROVIDER_BACKOFF_DURATION":       "5",
	"CLOUDPROVIDER_BACKOFF_JITTER":         "0",
	"CLOUDPROVIDER_RATELIMIT":              "true",
	"CLOUDPROVIDER_RATELIMIT_QPS":          "10",
	"CLOUDPROVIDER_RATELIMIT_QPS_WRITE":    "10",
	"CLOUDPROVIDER_RATELIMIT_BUCKET":       "100",
	"CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE": "100",
	"LOAD_BALANCER_DISABLE_OUTBOUND_SNAT":  "false",

	// Unused by the aksscriptless flow (the provider leaves them empty).
	"MOBY_VERSION": "", "HYPERKUBE_URL": "", "CUSTOM_KUBE_BINARY_URL": "", "KUBEPROXY_URL": "",
	"APISERVER_PUBLIC_KEY":     "",
	"PRIMARY_AVAILABILITY_SET": "", "PRIMARY_SCALE_SET": "", "CONTAINERD_DOWNLOAD_URL_BASE": "",
	"NETWORK_MODE": "", "TELEPORTD_PLUGIN_DOWNLOAD_URL": "", "CONTAINERD_VERSION": "",
	"CONTAINERD_PACKAGE_URL": "", "RUNC_VERSION": "", "RUNC_PACKAGE_URL": "", "HTTP_PROXY_TRUSTED_CA": "",
	"CUSTOM_ENV_JSON": "", "AZURE_PRIVATE_REGISTRY_SERVER": "", "HTTP_PROXY_URLS": "", "HTTPS_PROXY_URLS": "",
	"NO_PROXY_URLS": "", "DHCPV6_SERVICE_FILEPATH": "", "DHCPV6_CONFIG_FILEPATH": "", "THP_ENABLED": "",
	"THP_DEFRAG": "", "KUBELET_CLIENT_CONTENT": "", "KUBELET_CLIENT_CERT_CONTENT": "",
	"KUBELET_CONFIG_FILE_CONTENT": "",
	"GPU_INSTANCE_PROFILE":        "", "CUSTOM_SEARCH_DOMAIN_NAME": "", "CUSTOM_SEARCH_REALM_USER": "",
	"CUSTOM_SEARCH_REALM_PASSWORD": "", "MESSAGE_OF_THE_DAY": "", "AZURE_ENVIRONMENT_FILEPATH": "",

	// Features karpfunc does not offer.
	"SGX_NODE": "false", "MIG_NODE": "false", "ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED": "false",
	"ENABLE_HOSTS_CONFIG_AGENT": "false", "TELEPORT_ENABLED": "false", "SHOULD_CONFIGURE_HTTP_PROXY_CA": "false",
	"CUSTOM_CA_TRUST_COUNT": "0", "IS_KRUSTLET": "false", "GPU_NEEDS_FABRIC_MANAGER": "false",
	"NEEDS_DOCKER_LOGIN": "false", "ENSURE_NO_DUPE_PROMISCUOUS_BRIDGE": "false", "SHOULD_CONFIG_SWAP_FILE": "false",
	"SHOULD_CONFIG_TRANSPARENT_HUGE_PAGE": "false", "HAS_CUSTOM_SEARCH_DOMAIN": "false", "SWAP_FILE_SIZE_MB": "0",
	"HAS_KUBELET_DISK_TYPE": "false", "IS_KATA": "false", "ENABLE_IMDS_RESTRICTION": "false",
	"INSERT_IMDS_RESTRICTION_RULE_TO_MANGLE_TABLE": "false",
	"ENABLE_KUBELET_SERVING_CERTIFICATE_ROTATION":  "false",
	// How long the node image's provisioning may run (the provider's value).
	"CSE_TIMEOUT": "15m",
}

// orderedVariables lists values in NodeImageVariables order. A name of the
// list without a value, or a value for a name not on it, is a bug in
// Variables: the node image would read an empty (or never read the)
// variable.
func orderedVariables(values map[string]string) ([]Variable, error) {
	out := make([]Variable, 0, len(NodeImageVariables))
	for _, name := range NodeImageVariables {
		value, ok := values[name]
		if !ok {
			return nil, fmt.Errorf("node bootstrap: provisioning variable %s has no value (bug)", name)
		}
		out = append(out, Variable{Name: name, Value: value})
	}
	if len(out) != len(values) {
		return nil, fmt.Errorf("node bootstrap: %d provisioning variables set, %d are on the node image's list (bug)", len(values), len(out))
	}
	return out, nil
}
