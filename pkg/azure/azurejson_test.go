package azure_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// The variables customData sets are exactly the node image's list (the
// provider's cse_cmd.sh.gtpl), and every variable configureAzureJson writes
// unquoted is on it and holds a value.
func TestVariablesAreTheNodeImageList(t *testing.T) {
	vars, err := testNode(t).Variables()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	values := map[string]string{}
	for _, v := range vars {
		names = append(names, v.Name)
		values[v.Name] = v.Value
	}
	if !slices.Equal(names, azure.NodeImageVariables) {
		for _, n := range azure.NodeImageVariables {
			if _, ok := values[n]; !ok {
				t.Errorf("customData does not set %s, which the node image reads", n)
			}
		}
		for _, n := range names {
			if !slices.Contains(azure.NodeImageVariables, n) {
				t.Errorf("customData sets %s, which is not on the node image's list", n)
			}
		}
	}
	// The unquoted ones of AgentBaker's configureAzureJson.
	want := []string{"CLOUDPROVIDER_BACKOFF", "CLOUDPROVIDER_BACKOFF_RETRIES", "CLOUDPROVIDER_BACKOFF_EXPONENT",
		"CLOUDPROVIDER_BACKOFF_DURATION", "CLOUDPROVIDER_BACKOFF_JITTER", "CLOUDPROVIDER_RATELIMIT",
		"CLOUDPROVIDER_RATELIMIT_QPS", "CLOUDPROVIDER_RATELIMIT_BUCKET", "CLOUDPROVIDER_RATELIMIT_QPS_WRITE",
		"CLOUDPROVIDER_RATELIMIT_BUCKET_WRITE", "USE_MANAGED_IDENTITY_EXTENSION", "USE_INSTANCE_METADATA",
		"LOAD_BALANCER_DISABLE_OUTBOUND_SNAT", "EXCLUDE_MASTER_FROM_STANDARD_LB", "MAXIMUM_LOADBALANCER_RULE_COUNT"}
	if !slices.Equal(azure.AzureJSONUnquoted, want) {
		t.Errorf("unquoted azure.json variables = %v, want %v", azure.AzureJSONUnquoted, want)
	}
	for _, n := range want {
		if !json.Valid([]byte(values[n])) {
			t.Errorf("%s=%q is not a JSON literal; azure.json would be invalid", n, values[n])
		}
	}
}

func TestRenderAzureJSON(t *testing.T) {
	data, err := testNode(t).CustomData()
	if err != nil {
		t.Fatal(err)
	}
	vars, err := azure.ParseCustomData(data)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := azure.RenderAzureJSON(vars)
	if err != nil {
		t.Fatalf("azure.json of karpfunc's customData: %v\n%s", err, doc)
	}
	var cfg map[string]any
	if err := json.Unmarshal(doc, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"cloud": "AzurePublicCloud", "tenantId": "tenant-1", "subscriptionId": "sub-1", "aadClientId": "msi",
		"aadClientSecret": "msi", "resourceGroup": "MC_rg_c_eastus", "vnetName": "vnet-1", "vnetResourceGroup": "net-rg",
		"subnetName": "nodes", "userAssignedIdentityID": "kubelet-id", "useManagedIdentityExtension": true,
		"cloudProviderBackoff": true, "cloudProviderRateLimitQPS": 10.0, "disableOutboundSNAT": false,
		"maximumLoadBalancerRuleCount": 250.0,
	} {
		if cfg[k] != want {
			t.Errorf("azure.json %s = %#v, want %#v", k, cfg[k], want)
		}
	}
	if _, ok := cfg["cloudProviderBackoffExponent"]; ok {
		t.Error("azure.json keeps cloudProviderBackoffExponent; configureAzureJson removes it with backoff mode v2")
	}

	tests := []struct {
		name   string
		unset  string
		value  string
		wantIn []string
	}{
		{name: "rate limit QPS unset", unset: "CLOUDPROVIDER_RATELIMIT_QPS", wantIn: []string{"CLOUDPROVIDER_RATELIMIT_QPS"}},
		{name: "outbound SNAT unset", unset: "LOAD_BALANCER_DISABLE_OUTBOUND_SNAT", wantIn: []string{"LOAD_BALANCER_DISABLE_OUTBOUND_SNAT"}},
		{name: "backoff not a literal", unset: "CLOUDPROVIDER_BACKOFF", value: "yes"},
		{name: "quote in a quoted value", unset: "LOCATION", value: `east"us`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := map[string]string{}
			for k, v := range vars {
				bad[k] = v
			}
			delete(bad, tt.unset)
			if tt.value != "" {
				bad[tt.unset] = tt.value
			}
			_, err := azure.RenderAzureJSON(bad)
			var aj *azure.AzureJSONError
			if !errors.As(err, &aj) {
				t.Fatalf("err = %v, want an *AzureJSONError", err)
			}
			if !slices.Equal(aj.Unquoted, tt.wantIn) {
				t.Errorf("empty unquoted = %v, want %v", aj.Unquoted, tt.wantIn)
			}
		})
	}
}
