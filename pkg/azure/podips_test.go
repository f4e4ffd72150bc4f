package azure_test

import (
	"fmt"
	"testing"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestDefaultMaxPods: the provider's GetMaxPods by network
// (pkg/utils/utils.go:159-176 @352646f5).
func TestDefaultMaxPods(t *testing.T) {
	for _, tc := range []struct {
		plugin, mode, dataplane string
		want                    int32
	}{
		{"azure", "overlay", "cilium", 250},
		{"azure", "overlay", "azure", 250},
		{"azure", "", "azure", 30},
		{"azure", "", "cilium", 30},
		{"none", "", "azure", 250},
	} {
		c := azure.ClusterBootstrap{NetworkPlugin: tc.plugin, NetworkPluginMode: tc.mode, NetworkDataplane: tc.dataplane}
		if got := azure.DefaultMaxPods(c); got != tc.want {
			t.Errorf("DefaultMaxPods(%s/%q/%s) = %d, want %d", tc.plugin, tc.mode, tc.dataplane, got, tc.want)
		}
	}
}

// TestNICPodIPConfigurations: through the real SDK client, a classic Azure
// CNI node's NIC carries one IP configuration per pod (max pods in all, the
// first primary, ipconfig1..N, all in the node subnet), as the Azure
// provider's NIC build does; overlay and plugin none NICs carry the primary
// only; max pods beyond Azure's 256 per NIC is refused before any ARM call.
func TestNICPodIPConfigurations(t *testing.T) {
	classic := func(o *azure.Options) { o.Bootstrap.NetworkPluginMode, o.Bootstrap.NetworkDataplane = "", "azure" }
	none := func(o *azure.Options) { o.Bootstrap.NetworkPlugin, o.Bootstrap.NetworkPluginMode = "none", "" }
	for _, tc := range []struct {
		name    string
		mutate  func(*azure.Options)
		maxPods int32
		want    int // IP configurations; 0: refused
	}{
		{"overlay", nil, 30, 1},
		{"network plugin none", none, 30, 1},
		{"classic Azure CNI", classic, 30, 30},
		// The provider's GetMaxPods: 30 on the node subnet (utils.go:159-176).
		{"classic Azure CNI, default max pods", classic, 0, 30},
		{"classic Azure CNI over Azure's limit", classic, 300, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := startEmulator(t, armemulator.Options{})
			mutate := []func(*azure.Options){}
			if tc.mutate != nil {
				mutate = append(mutate, tc.mutate)
			}
			l := newLauncher(t, emu, "c", mutate...)
			req := request("node-ip")
			req.MaxPods = tc.maxPods
			_, err := l.Create(ctx(t), req)
			if tc.want == 0 {
				if err == nil || !azure.IsInvalidRequest(err) || len(emu.NICs()) != 0 {
					t.Fatalf("Create = %v with %d NICs; want an invalid request before any NIC", err, len(emu.NICs()))
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			nics := emu.NICs()
			if len(nics) != 1 {
				t.Fatalf("%d NICs, want 1", len(nics))
			}
			ipcs := nics[0].Properties.IPConfigurations
			if len(ipcs) != tc.want {
				t.Fatalf("NIC has %d IP configurations, want %d", len(ipcs), tc.want)
			}
			for i, ipc := range ipcs {
				name, primary := fmt.Sprintf("ipconfig%d", i+1), i == 0
				if *ipc.Name != name || ipc.Properties.Primary == nil || *ipc.Properties.Primary != primary ||
					*ipc.Properties.Subnet.ID != testSubnet || *ipc.Properties.PrivateIPAddress == "" {
					t.Fatalf("IP configuration %d: name %s primary %v subnet %s address %q; want %s primary %v in the node subnet with an address",
						i, *ipc.Name, ipc.Properties.Primary, *ipc.Properties.Subnet.ID, *ipc.Properties.PrivateIPAddress, name, primary)
				}
			}
		})
	}
}
