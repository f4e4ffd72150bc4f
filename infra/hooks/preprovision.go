package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Environment values the preprovision hook reads and writes.
const (
	envSubscription      = "AZURE_SUBSCRIPTION_ID"
	envClusterName       = "AZURE_AKS_CLUSTER_NAME"
	envClusterGroup      = "AZURE_AKS_RESOURCE_GROUP"
	envNodeResourceGroup = "AZURE_AKS_NODE_RESOURCE_GROUP"
	envClusterLocation   = "AZURE_AKS_LOCATION"
	envNodeSubnetID      = "AZURE_AKS_NODE_SUBNET_ID"
	envOIDCIssuerURL     = "AZURE_AKS_OIDC_ISSUER_URL"
	envSSHPublicKey      = "KARPFUNC_NODE_SSH_PUBLIC_KEY"
	envAPIServerURL      = "AZURE_AKS_API_SERVER_URL"
	envAPIServerCA       = "AZURE_AKS_API_SERVER_CA"
	envProvisioningMode  = "AZURE_AKS_NODE_PROVISIONING_MODE"
	envKubeletObjectID   = "AZURE_AKS_KUBELET_IDENTITY_OBJECT_ID"
	// envHealthTopic is the subscription's existing HealthResources system
	// topic, which main.bicep then reuses; empty: it creates one.
	envHealthTopic = "AZURE_HEALTH_RESOURCES_TOPIC_ID"
)

// nodeNetworkEnv maps node bootstrap app settings to the azd environment
// values main.parameters.json reads.
var nodeNetworkEnv = map[string]string{
	"NETWORK_PLUGIN":             "AZURE_AKS_NETWORK_PLUGIN",
	"NETWORK_PLUGIN_MODE":        "AZURE_AKS_NETWORK_PLUGIN_MODE",
	"NETWORK_POLICY":             "AZURE_AKS_NETWORK_POLICY",
	"NETWORK_DATAPLANE":          "AZURE_AKS_NETWORK_DATAPLANE",
	"DNS_SERVICE_IP":             "AZURE_AKS_DNS_SERVICE_IP",
	"VNET_GUID":                  "AZURE_AKS_VNET_GUID",
	"KUBELET_IDENTITY_CLIENT_ID": "AZURE_AKS_KUBELET_IDENTITY_CLIENT_ID",
	"NODE_IDENTITIES":            "AZURE_AKS_KUBELET_IDENTITY_RESOURCE_ID",
}

const aksAPIVersion = "2024-09-01"

func preprovision(ctx context.Context, getenv func(string) string) error {
	env, err := required(getenv, envSubscription, envClusterName, envClusterGroup)
	if err != nil {
		return err
	}
	arm, err := newARM()
	if err != nil {
		return err
	}
	if err := checkDeployerRights(ctx, arm, env[envSubscription]); err != nil {
		return err
	}
	ref := "-g " + env[envClusterGroup] + " -n " + env[envClusterName]
	facts, err := readCluster(ctx, arm, env, ref)
	if err != nil {
		return err
	}
	subnet, err := nodeSubnet(ctx, arm, getenv, env[envSubscription], facts)
	if err != nil {
		return err
	}
	if facts.NodeNetwork["VNET_GUID"], err = vnetGUID(ctx, arm, subnet); err != nil {
		return err
	}
	api, err := userKubeconfigCluster(ctx, arm, env[envSubscription], env[envClusterGroup], env[envClusterName])
	if err != nil {
		return err
	}
	healthTopic, err := healthResourcesTopic(ctx, arm, env[envSubscription])
	if err != nil {
		return err
	}
	set := [][2]string{
		{envHealthTopic, healthTopic},
		{envKubeletObjectID, facts.KubeletObjectID},
		{envAPIServerURL, api.Server},
		{envAPIServerCA, base64.StdEncoding.EncodeToString(api.CertificateAuthorityData)},
		{envProvisioningMode, facts.NodeProvisioningMode},
		{envNodeResourceGroup, facts.NodeResourceGroup},
		{envClusterLocation, facts.Location},
		{envNodeSubnetID, subnet},
		{envOIDCIssuerURL, facts.OIDCIssuerURL},
	}
	for setting, value := range facts.NodeNetwork {
		set = append(set, [2]string{nodeNetworkEnv[setting], value})
	}
	if strings.TrimSpace(getenv(envSSHPublicKey)) == "" {
		key, err := newSSHPublicKey()
		if err != nil {
			return err
		}
		set = append(set, [2]string{envSSHPublicKey, key})
	}
	for _, kv := range set {
		if err := azdEnvSet(ctx, kv[0], kv[1]); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "karpfunc: AKS cluster %s is ready (node resource group %s, subnet %s)\n", ref, facts.NodeResourceGroup, subnet)
	return nil
}

// readCluster reads the AKS cluster the environment names and checks it.
func readCluster(ctx context.Context, arm *armClient, env map[string]string, ref string) (clusterFacts, error) {
	clusterPath := "/subscriptions/" + env[envSubscription] + "/resourceGroups/" + env[envClusterGroup] +
		"/providers/Microsoft.ContainerService/managedClusters/" + env[envClusterName]
	body, status, err := arm.do(ctx, http.MethodGet, clusterPath+"?api-version="+aksAPIVersion)
	if err != nil {
		return clusterFacts{}, err
	}
	if status == http.StatusNotFound {
		return clusterFacts{}, fmt.Errorf("AKS cluster %s not found in subscription %s: check %s and %s (azd env set ...), and that %s is the cluster's subscription",
			env[envClusterName], env[envSubscription], envClusterName, envClusterGroup, envSubscription)
	}
	if status != http.StatusOK {
		return clusterFacts{}, fmt.Errorf("reading AKS cluster %s: HTTP %d: %s", ref, status, body)
	}
	return checkCluster(body, ref)
}

// nodeSubnet is the subnet karpfunc's nodes join: the one the environment
// sets, else the node pools', else the AKS-managed VNet's.
func nodeSubnet(ctx context.Context, arm *armClient, getenv func(string) string, subscription string, facts clusterFacts) (string, error) {
	if subnet := strings.TrimSpace(getenv(envNodeSubnetID)); subnet != "" {
		return subnet, nil
	}
	if facts.SubnetID != "" {
		return facts.SubnetID, nil
	}
	vnets, status, err := arm.do(ctx, http.MethodGet, "/subscriptions/"+subscription+"/resourceGroups/"+
		facts.NodeResourceGroup+"/providers/Microsoft.Network/virtualNetworks?api-version=2024-05-01")
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("listing the virtual networks of %s: HTTP %d: %s", facts.NodeResourceGroup, status, vnets)
	}
	return managedSubnet(vnets, facts.NodeResourceGroup)
}

// vnetGUID is the resourceGuid of the subnet's VNet.
func vnetGUID(ctx context.Context, arm *armClient, subnet string) (string, error) {
	vnetID := subnet[:strings.LastIndex(strings.ToLower(subnet), "/subnets/")]
	vnet, status, err := arm.do(ctx, http.MethodGet, vnetID+"?api-version=2024-05-01")
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("reading the node VNet %s: HTTP %d: %s", vnetID, status, vnet)
	}
	var vnetProps struct {
		Properties struct {
			ResourceGUID string `json:"resourceGuid"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(vnet, &vnetProps); err != nil {
		return "", fmt.Errorf("decoding the node VNet %s: %w", vnetID, err)
	}
	return vnetProps.Properties.ResourceGUID, nil
}

// newSSHPublicKey makes the node VMs' admin key. Azure requires one for
// Linux VMs; the private half is discarded, so no one can SSH to the nodes
// with it (use az vm user update to add access when debugging).
func newSSHPublicKey() (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		return "", fmt.Errorf("generating the node SSH key: %w", err)
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return "", fmt.Errorf("encoding the node SSH key: %w", err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), nil
}

func azdEnvSet(ctx context.Context, key, value string) error {
	out, err := exec.CommandContext(ctx, "azd", "env", "set", key, value).CombinedOutput()
	if err != nil {
		return fmt.Errorf("azd env set %s: %w: %s", key, err, out)
	}
	return nil
}
