package azure_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestNICJoinsClusterNetwork: the NIC BeginNIC creates joins the node
// resource group's load balancer pools, and carries the cluster NSG on a
// bring-your-own VNet only, as AKS's own nodes do.
func TestNICJoinsClusterNetwork(t *testing.T) {
	aks := armemulator.AKSNetwork(testSub, testRG, testLocation)
	lbID := *aks.LoadBalancers[0].ID
	pools := []string{lbID + "/backendAddressPools/kubernetes", lbID + "/backendAddressPools/aksOutboundBackendPool"}
	nsg := *aks.SecurityGroups[0].ID
	noLB := aks
	noLB.LoadBalancers = nil
	noNSG := aks
	noNSG.SecurityGroups = []*armnetwork.SecurityGroup{}
	managedSubnet := armemulator.AKSSubnetID(testSub, testRG)
	for _, tc := range []struct {
		name      string
		network   armemulator.Network
		subnet    string
		wantPools []string
		wantNSG   string
		wantErr   string
	}{
		{"bring-your-own VNet", aks, testSubnet, pools, nsg, ""},
		{"the VNet AKS manages: the NSG is on the subnet", aks, managedSubnet, pools, "", ""},
		{"no cluster load balancer (outboundType other than loadBalancer)", noLB, testSubnet, nil, nsg, ""},
		{"bring-your-own VNet without the cluster NSG", noNSG, testSubnet, nil, "", "has no NSG named aks-agentpool-<8 digits>-nsg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := startEmulator(t, armemulator.Options{Network: tc.network})
			l := newLauncher(t, emu, "c1", func(o *azure.Options) { o.SubnetID = tc.subnet })
			_, err := l.BeginNIC(ctx(t), request("vm-1"))
			if tc.wantErr != "" {
				var nne azure.NodeNetworkError
				if err == nil || !errors.As(err, &nne) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("BeginNIC = %v, want a NodeNetworkError containing %q", err, tc.wantErr)
				}
				if n := len(emu.NICs()); n != 0 {
					t.Fatalf("%d NICs created", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nics := emu.NICs()
			if len(nics) != 1 {
				t.Fatalf("%d NICs", len(nics))
			}
			var got []string
			for _, p := range nics[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools {
				got = append(got, *p.ID)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.wantPools))
			if !slices.Equal(got, want) {
				t.Errorf("backend pools = %v, want %v", got, want)
			}
			gotNSG := ""
			if g := nics[0].Properties.NetworkSecurityGroup; g != nil {
				gotNSG = *g.ID
			}
			if !strings.EqualFold(gotNSG, tc.wantNSG) {
				t.Errorf("NSG = %q, want %q", gotNSG, tc.wantNSG)
			}
		})
	}
}

func pool(lb, name string, ips ...string) *armnetwork.BackendAddressPool {
	p := &armnetwork.BackendAddressPool{ID: ptr(lb + "/backendAddressPools/" + name), Name: ptr(name),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, ip := range ips {
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses,
			&armnetwork.LoadBalancerBackendAddress{Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: ptr(ip)}})
	}
	return p
}

func lb(name string, pools ...string) *armnetwork.LoadBalancer {
	id := "/subscriptions/s/resourceGroups/mc/providers/Microsoft.Network/loadBalancers/" + name
	out := &armnetwork.LoadBalancer{ID: ptr(id), Name: ptr(name), Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	for _, p := range pools {
		out.Properties.BackendAddressPools = append(out.Properties.BackendAddressPools, pool(id, p))
	}
	return out
}

func TestClusterBackendPools(t *testing.T) {
	ipBased := lb("kubernetes-internal")
	ipBased.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{pool(*ipBased.ID, "ip", "10.0.0.4")}
	for _, tc := range []struct {
		name string
		lbs  []*armnetwork.LoadBalancer
		want []string // pool names
	}{
		{"AKS load balancer", []*armnetwork.LoadBalancer{lb("kubernetes", "kubernetes", "aksOutboundBackendPool")},
			[]string{"kubernetes", "aksOutboundBackendPool"}},
		{"IPv6 pools left out", []*armnetwork.LoadBalancer{lb("kubernetes", "kubernetes", "kubernetes-ipv6", "aksOutboundBackendPool-ipv6")},
			[]string{"kubernetes"}},
		{"internal load balancer joined", []*armnetwork.LoadBalancer{lb("kubernetes-internal", "kubernetes")}, []string{"kubernetes"}},
		{"IP-based pool left out", []*armnetwork.LoadBalancer{ipBased}, nil},
		{"other load balancers left out", []*armnetwork.LoadBalancer{lb("mine", "a")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, id := range azure.ClusterBackendPools(tc.lbs) {
				got = append(got, id[strings.LastIndex(id, "/")+1:])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pools = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsAKSManagedSubnet(t *testing.T) {
	const base = "/subscriptions/s/resourceGroups/"
	for _, tc := range []struct {
		subnet string
		want   bool
	}{
		{base + "MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet", true},
		{base + "mc_RG/providers/Microsoft.Network/virtualNetworks/AKS-VNET-12345678/subnets/AKS-SUBNET", true},
		{base + "other/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet", false},
		{base + "MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet", false},
		{base + "MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/nodes", false},
	} {
		if got := azure.IsAKSManagedSubnet("MC_rg", tc.subnet); got != tc.want {
			t.Errorf("IsAKSManagedSubnet(%s) = %v, want %v", tc.subnet, got, tc.want)
		}
	}
}
