package azure_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

func TestProviderID(t *testing.T) {
	got := azure.ProviderID("sub", "MC_Group_Cluster", "vm-1")
	want := "azure:///subscriptions/sub/resourceGroups/mc_group_cluster/providers/Microsoft.Compute/virtualMachines/vm-1"
	if got != want {
		t.Errorf("ProviderID = %q, want %q", got, want)
	}
	name, err := azure.ParseProviderID(got)
	if err != nil || name != "vm-1" {
		t.Errorf("ParseProviderID(ProviderID(...)) = %q, %v", name, err)
	}
}

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		id      string
		want    string
		wantErr string
	}{
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/node-a", want: "node-a"},
		{id: "azure:///subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/node-a", want: "node-a"},
		{id: "aws:///us-east-1a/i-123", wantErr: `does not start with "azure://"`},
		{id: "azure://subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/a", wantErr: "must start with '/'"},
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0", wantErr: "scale set"},
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/a", wantErr: `"Microsoft.Network", want "Microsoft.Compute"`},
		{id: "azure:///subscriptions//resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/a", wantErr: `empty segment after "subscriptions"`},
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/", wantErr: "empty segment"},
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines", wantErr: "want azure:///"},
		{id: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/Bad_Name", wantErr: "lower-case"},
		{id: "", wantErr: "does not start with"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			got, err := azure.ParseProviderID(tc.id)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !azure.IsInvalidRequest(err) {
					t.Fatalf("ParseProviderID = %q, %v; want invalid request containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseProviderID = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestBootstrapRoundTrip(t *testing.T) {
	in := azure.Bootstrap{
		ClusterName: "c", NodeName: "n", MaxPods: 42,
		Labels: map[string]string{"a": "b"},
		Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}},
	}
	enc, err := azure.EncodeBootstrap(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := azure.DecodeBootstrap(enc)
	if err != nil {
		t.Fatal(err)
	}
	if out.Version != azure.BootstrapVersion || out.ClusterName != "c" || out.NodeName != "n" || out.MaxPods != 42 ||
		out.Labels["a"] != "b" || len(out.Taints) != 1 || out.Taints[0] != in.Taints[0] {
		t.Errorf("round trip = %+v", out)
	}
}

func TestBootstrapErrors(t *testing.T) {
	if _, err := azure.EncodeBootstrap(azure.Bootstrap{}); err == nil || !strings.Contains(err.Error(), "cluster name") {
		t.Errorf("Encode without cluster: %v", err)
	}
	if _, err := azure.EncodeBootstrap(azure.Bootstrap{Version: "v0", ClusterName: "c"}); err == nil || !strings.Contains(err.Error(), `"v0"`) {
		t.Errorf("Encode with wrong version: %v", err)
	}
	tests := []struct{ name, data, want string }{
		{"not base64", "%%%", "not base64"},
		{"not json", "bm90IGpzb24=", "not a JSON document"},
		{"other version", "eyJ2ZXJzaW9uIjoidjAifQ==", `version "v0" is not supported`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azure.DecodeBootstrap(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !azure.IsInvalidRequest(err) {
				t.Errorf("DecodeBootstrap(%q) = %v, want %q", tc.data, err, tc.want)
			}
		})
	}
}
