package azure_test

import (
	"strings"
	"testing"

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
