package azure

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// DefaultEndpoint is the public-cloud ARM endpoint.
const DefaultEndpoint = "https://management.azure.com"

// Options configure a Launcher. Everything comes from configuration: the
// emulator is reached by pointing Endpoint/CACertPEM/Token at it, never by a
// test-only code path.
type Options struct {
	SubscriptionID string
	// ResourceGroup is the cluster's node resource group (MC_…), where VMs
	// and NICs are created.
	ResourceGroup string
	Location      string
	ClusterName   string
	// SubnetID is the default subnet for node NICs.
	SubnetID string

	// Endpoint is the ARM endpoint; empty means DefaultEndpoint.
	Endpoint string
	// CACertPEM is an extra CA to trust for Endpoint (the emulator's
	// self-signed certificate). nil means the system roots only.
	CACertPEM []byte
	// Token is a static bearer token, for development against the emulator.
	// Empty means azidentity: managed identity in Azure, otherwise
	// DefaultAzureCredential.
	Token string
	// HTTPClient replaces the HTTP client; CACertPEM is ignored when set.
	HTTPClient *http.Client

	// Bootstrap is the cluster side of every node's customData (API server,
	// CA, Kubernetes version, network); BootstrapTokens hands out the TLS
	// bootstrap token a node joins with. Create refuses to launch a VM
	// without both: it could never join.
	Bootstrap       *ClusterBootstrap
	BootstrapTokens TokenSource
	// KubernetesVersion, when set, is asked at every launch for the
	// kubelet version ("1.34.1") instead of Bootstrap.KubernetesVersion:
	// after a control-plane upgrade, replacements join at the new version
	// (the old nodes drift, K8sVersionDrift).
	KubernetesVersion func(ctx context.Context) (string, error)

	// NodeIdentities are the resource IDs of the user-assigned managed
	// identities every node VM carries (app setting NODE_IDENTITIES, comma
	// separated, the Azure Karpenter provider's name and form: its
	// hack/deploy/configure-values.sh sets it to the cluster's
	// identityProfile.kubeletidentity.resourceId, and vminstance.go puts
	// them in the VM's identity block). The kubelet identity named in
	// customData (Bootstrap.KubeletIdentityClientID) must be one of them,
	// or the node cannot get tokens for it and ACR pulls fail; the caller
	// needs Managed Identity Operator on each, or ARM answers
	// LinkedAuthorizationFailed.
	NodeIdentities []string

	// SSHPublicKey is the admin public key of the node VMs, in OpenSSH
	// authorized_keys form ("ssh-rsa AAAA…" or "ssh-ed25519 AAAA…"). It is
	// required: node VMs have password login disabled, and Azure refuses a
	// Linux VM with neither. Use the cluster's own key (az aks show
	// --query linuxProfile.ssh.publicKeys[0].keyData), as NAP does, so
	// karpfunc's nodes open to the same key as the cluster's other nodes.
	SSHPublicKey string
	// NodeImageVersion pins the AKS node image version every VM boots
	// (YYYYMM.DD.patch); empty resolves each image definition's latest
	// version from AKS's community galleries through ARM, as the Azure
	// provider does (see nodeimage.Resolver).
	NodeImageVersion string
	// NodeImageTTL is how long a resolved version is kept before the
	// gallery is read again (default nodeimage.DefaultTTL, 3 days).
	NodeImageTTL time.Duration
	// PollFrequency is how often a long-running operation is polled when
	// ARM gives no Retry-After hint. Zero means 5s (the SDK's default of
	// 30s is too slow for node launches).
	PollFrequency time.Duration
	// Retry tunes the SDK's retry policy; the zero value keeps its defaults
	// (3 retries, honouring Retry-After up to 60s).
	Retry policy.RetryOptions
}

// Environment variables read by OptionsFromEnv.
const (
	EnvSubscriptionID = "AZURE_SUBSCRIPTION_ID"
	EnvResourceGroup  = "AZURE_NODE_RESOURCE_GROUP"
	EnvLocation       = "AZURE_LOCATION"
	EnvClusterName    = "KARPFUNC_CLUSTER_NAME"
	EnvSubnetID       = "AZURE_SUBNET_ID"
	EnvEndpoint       = "ARM_ENDPOINT"
	EnvCAFile         = "ARM_CA_FILE"
	EnvToken          = "ARM_TOKEN"
	EnvSSHPublicKey   = "AZURE_SSH_PUBLIC_KEY"
	// EnvNodeIdentities lists the node VMs' user-assigned identities.
	EnvNodeIdentities = "NODE_IDENTITIES"
	// EnvNodeImageVersion pins the AKS node image version (default: the
	// gallery's latest, resolved through ARM).
	EnvNodeImageVersion = "KARPFUNC_NODE_IMAGE_VERSION"
	// EnvNodeImageTTL is how long a resolved node image version is kept,
	// a Go duration (default 72h, the Azure provider's).
	EnvNodeImageTTL = "KARPFUNC_NODE_IMAGE_TTL"
)

// OptionsFromEnv reads Options from the environment. The subscription,
// resource group, location, cluster name and subnet are required; the error
// names the first missing variable.
func OptionsFromEnv() (Options, error) {
	get := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	opts := Options{
		SubscriptionID:   get(EnvSubscriptionID),
		ResourceGroup:    get(EnvResourceGroup),
		Location:         get(EnvLocation),
		ClusterName:      get(EnvClusterName),
		SubnetID:         get(EnvSubnetID),
		Endpoint:         get(EnvEndpoint),
		Token:            get(EnvToken),
		SSHPublicKey:     get(EnvSSHPublicKey),
		NodeImageVersion: get(EnvNodeImageVersion),
		NodeIdentities:   splitList(get(EnvNodeIdentities)),
	}
	for _, req := range []struct{ env, val string }{
		{EnvSubscriptionID, opts.SubscriptionID},
		{EnvResourceGroup, opts.ResourceGroup},
		{EnvLocation, opts.Location},
		{EnvClusterName, opts.ClusterName},
		{EnvSubnetID, opts.SubnetID},
		{EnvSSHPublicKey, opts.SSHPublicKey},
	} {
		if req.val == "" {
			return Options{}, fmt.Errorf("environment variable %s is not set%s", req.env, settingHint[req.env])
		}
	}
	if err := ValidateSSHPublicKey(opts.SSHPublicKey); err != nil {
		return Options{}, fmt.Errorf("app setting %s: %w", EnvSSHPublicKey, err)
	}
	if opts.NodeImageVersion != "" {
		if err := nodeimage.ValidateVersion(opts.NodeImageVersion); err != nil {
			return Options{}, fmt.Errorf("app setting %s: %w", EnvNodeImageVersion, err)
		}
	}
	if ttlSetting := get(EnvNodeImageTTL); ttlSetting != "" {
		ttl, err := time.ParseDuration(ttlSetting)
		if err != nil || ttl <= 0 {
			return Options{}, fmt.Errorf("app setting %s=%q is not a positive Go duration (e.g. 72h, 30m)", EnvNodeImageTTL, ttlSetting)
		}
		opts.NodeImageTTL = ttl
	}
	if caFile := get(EnvCAFile); caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return Options{}, fmt.Errorf("reading %s=%q: %w", EnvCAFile, caFile, err)
		}
		opts.CACertPEM = pem
	}
	return opts, nil
}

// TokenSource hands out a TLS bootstrap token ("<id>.<secret>") that stays
// valid long enough for a VM launched now to join; *bootstraptoken.Manager
// implements it.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource that always hands out the same token: one an
// operator manages, or a test's.
type StaticToken string

// Token returns the token.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// settingHint says where to find a required setting's value.
var settingHint = map[string]string{
	EnvSSHPublicKey: "; node VMs have password login disabled, so Azure needs an SSH public key: use the cluster's own " +
		"(az aks show -g <rg> -n <cluster> --query 'linuxProfile.ssh.publicKeys[0].keyData' -o tsv), as NAP does",
}

func (o *Options) validate() error {
	for _, field := range []struct{ name, val string }{
		{"SubscriptionID", o.SubscriptionID},
		{"ResourceGroup", o.ResourceGroup},
		{"Location", o.Location},
		{"ClusterName", o.ClusterName},
	} {
		if field.val == "" {
			return fmt.Errorf("azure options: %s is required", field.name)
		}
	}
	if o.Bootstrap != nil {
		if err := o.Bootstrap.Validate(); err != nil {
			return fmt.Errorf("azure options: %w", err)
		}
	}
	if o.SSHPublicKey != "" {
		if err := ValidateSSHPublicKey(o.SSHPublicKey); err != nil {
			return fmt.Errorf("azure options: SSHPublicKey: %w", err)
		}
	}
	if err := o.validateNodeIdentities(); err != nil {
		return err
	}
	if o.NodeImageVersion != "" {
		if err := nodeimage.ValidateVersion(o.NodeImageVersion); err != nil {
			return fmt.Errorf("azure options: NodeImageVersion: %w", err)
		}
	}
	if o.NodeImageTTL < 0 {
		return fmt.Errorf("azure options: NodeImageTTL %v is negative", o.NodeImageTTL)
	}
	if o.Endpoint != "" && !strings.HasPrefix(o.Endpoint, "https://") {
		// azcore refuses to send bearer tokens over plain HTTP; fail here
		// with a clearer message than the first request would.
		return fmt.Errorf("azure options: Endpoint %q must be an https:// URL", o.Endpoint)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

var userAssignedIdentityRE = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$`)

// validateNodeIdentities checks the identity resource IDs, and that a
// kubelet identity named in customData is attached at all.
func (o *Options) validateNodeIdentities() error {
	for _, id := range o.NodeIdentities {
		if !userAssignedIdentityRE.MatchString(id) {
			return fmt.Errorf("azure options: %s entry %q is not a user-assigned identity resource ID "+
				"(/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>)", EnvNodeIdentities, id)
		}
	}
	if o.Bootstrap != nil && o.Bootstrap.KubeletIdentityClientID != "" && len(o.NodeIdentities) == 0 {
		return fmt.Errorf("azure options: %s is set but %s is empty: node VMs would not carry the kubelet identity, so image pulls "+
			"from ACR fail; set %s to the cluster's kubelet identity (az aks show --query identityProfile.kubeletidentity.resourceId)",
			EnvKubeletIdentityClientID, EnvNodeIdentities, EnvNodeIdentities)
	}
	return nil
}

// nodeIdentity is the VM identity block carrying ids as user-assigned
// identities (nil without any), as the Azure provider's vminstance.go
// builds it.
func nodeIdentity(ids []string) *armcompute.VirtualMachineIdentity {
	if len(ids) == 0 {
		return nil
	}
	uai := make(map[string]*armcompute.UserAssignedIdentitiesValue, len(ids))
	for _, id := range ids {
		uai[id] = &armcompute.UserAssignedIdentitiesValue{}
	}
	return &armcompute.VirtualMachineIdentity{Type: ptr(armcompute.ResourceIdentityTypeUserAssigned), UserAssignedIdentities: uai}
}
