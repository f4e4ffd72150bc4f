package armemulator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestClassicCNINodeNeedsPodIPs: the node image of a classic Azure CNI VM
// (NETWORK_PLUGIN azure, no overlay pod network label) hands pods the NIC's
// secondary IP configurations, so a NIC with fewer IP configurations than
// --max-pods leaves pods without addresses and the emulated node does not
// join; with max pods of them, or on overlay, it does.
func TestClassicCNINodeNeedsPodIPs(t *testing.T) {
	classic := func(nb *azure.NodeBootstrap) { nb.Cluster.NetworkPluginMode, nb.Cluster.NetworkDataplane = "", "azure" }
	for _, tc := range []struct {
		name      string
		bootstrap func(*azure.NodeBootstrap) // nil: overlay
		ipConfigs int
		want      string // join refusal; "" joins
	}{
		{"overlay, primary only", nil, 1, ""},
		{"classic CNI, primary only", classic, 1, "the NIC has 1 IP configurations for --max-pods=50"},
		{"classic CNI, one short", classic, 49, "pods beyond 48"},
		{"classic CNI, max pods", classic, 50, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := ManagedCluster{} // overlay
			if tc.bootstrap != nil {
				cluster = ManagedCluster{NetworkPlugin: "azure", NetworkDataplane: "azure"}
			}
			s := start(t, Options{OpDelay: time.Millisecond, Cluster: cluster, NodeResources: func(string, int32) (corev1.ResourceList, string, bool) {
				return corev1.ResourceList{}, "amd64", true
			}})
			vms, nics := clients(t, s)
			ctx := context.Background()
			nic := nicBody()
			for i := 2; i <= tc.ipConfigs; i++ {
				nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, &armnetwork.InterfaceIPConfiguration{
					Name:       ptr(fmt.Sprintf("ipconfig%d", i)),
					Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: ptr(testSubnetID)}}})
			}
			np, err := nics.BeginCreateOrUpdate(ctx, rg, "n", nic, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := np.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(azure.NICResourceID(sub, rg, "n"), testCustomData(t, tc.bootstrap)), nil); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			_, err = s.kubeletFor(s.vms[resourceKey(sub, rg, "vm-1")])
			s.mu.Unlock()
			if err == nil && s.BootError("vm-1") != "" {
				t.Fatalf("node registers but not Ready: %s", s.BootError("vm-1"))
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("node does not join: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("join error = %v, want %q", err, tc.want)
			}
		})
	}
}
