package armemulator

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

func networkClients(t *testing.T, s *Server) (*armnetwork.LoadBalancersClient, *armnetwork.SecurityGroupsClient) {
	lbs, err := armnetwork.NewLoadBalancersClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	nsgs, err := armnetwork.NewSecurityGroupsClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return lbs, nsgs
}

func poolID(name string) string {
	return rgID(sub, rg) + networkProviderPath + "loadBalancers/" + AKSLoadBalancer + "/backendAddressPools/" + name
}

func nsgID(name string) string {
	return rgID(sub, rg) + networkProviderPath + "networkSecurityGroups/" + name
}

// aksNIC is a NIC on the AKS node subnet in the given pools, with nsg ("" none).
func aksNIC(nsg string, pools ...string) armnetwork.Interface {
	n := nicBody()
	n.Properties.IPConfigurations[0].Properties.Subnet.ID = ptr(AKSSubnetID(sub, rg))
	for _, p := range pools {
		n.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = append(
			n.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: ptr(p)})
	}
	if nsg != "" {
		n.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: ptr(nsg)}
	}
	return n
}

// TestNodeNetworkServed: the AKS node network is read through the real SDK
// clients, and a NIC in its pools shows up in them.
func TestNodeNetworkServed(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, Network: AKSNetwork(sub, rg, loc)})
	lbs, nsgs := networkClients(t, s)
	_, nics := clients(t, s)
	ctx := context.Background()

	page, err := lbs.NewListPager(rg, nil).NextPage(ctx)
	if err != nil || len(page.Value) != 1 {
		t.Fatalf("load balancers: %v, %d", err, len(page.Value))
	}
	var names []string
	for _, p := range page.Value[0].Properties.BackendAddressPools {
		names = append(names, *p.Name)
	}
	if strings.Join(names, ",") != "kubernetes,aksOutboundBackendPool" {
		t.Fatalf("pools = %v", names)
	}
	g, err := nsgs.Get(ctx, rg, AKSSecurityGroup, nil)
	if err != nil || !strings.EqualFold(*g.ID, nsgID(AKSSecurityGroup)) {
		t.Fatalf("NSG: %v", err)
	}
	if _, err := nsgs.Get(ctx, rg, "other-nsg", nil); armCode(err) != "ResourceNotFound" {
		t.Fatalf("missing NSG: %v, want ResourceNotFound", err)
	}

	p, err := nics.BeginCreateOrUpdate(ctx, rg, "n1", aksNIC(nsgID(AKSSecurityGroup), poolID(AKSOutboundPool), poolID(AKSInboundPool)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	lb, err := lbs.Get(ctx, rg, AKSLoadBalancer, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pool := range lb.Properties.BackendAddressPools {
		members := pool.Properties.BackendIPConfigurations
		if len(members) != 1 || !strings.HasSuffix(*members[0].ID, "/networkInterfaces/n1/ipConfigurations/ipconfig1") {
			t.Errorf("pool %s members = %v", *pool.Name, members)
		}
	}
}

// TestNICNetworkReferenceRefusals: ARM refuses a NIC that references a
// backend pool or NSG that does not exist (InvalidResourceReference, the
// referenced ID in the message) or a malformed one (LinkedInvalidPropertyId).
func TestNICNetworkReferenceRefusals(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, Network: AKSNetwork(sub, rg, loc)})
	_, nics := clients(t, s)
	for _, tc := range []struct {
		name     string
		nic      armnetwork.Interface
		code     string
		contains string
	}{
		{"pool that does not exist", aksNIC("", poolID("gone")), "InvalidResourceReference",
			"backendAddressPools/gone referenced by resource " + azure.NICResourceID(sub, rg, "nic-x")},
		{"pool of a load balancer that does not exist",
			aksNIC("", strings.Replace(poolID(AKSOutboundPool), "/kubernetes/", "/kubernetes-internal/", 1)),
			"InvalidResourceReference", "loadBalancers/kubernetes-internal/backendAddressPools"},
		{"NSG that does not exist", aksNIC(nsgID("aks-agentpool-00000000-nsg")), "InvalidResourceReference",
			"aks-agentpool-00000000-nsg referenced by resource"},
		{"malformed pool ID", aksNIC("", "/subscriptions/x/backendAddressPools/y"), "LinkedInvalidPropertyId",
			"properties.ipConfigurations[0].properties.loadBalancerBackendAddressPools[0].id"},
		{"malformed NSG ID", aksNIC("/subscriptions/x/nsg"), "LinkedInvalidPropertyId", "properties.networkSecurityGroup.id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nics.BeginCreateOrUpdate(context.Background(), rg, "nic-x", tc.nic, nil)
			var re *azcore.ResponseError
			if err == nil || !asResponseError(err, &re) || re.StatusCode != 400 || re.ErrorCode != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("create = %v, want 400 %s containing %q", err, tc.code, tc.contains)
			}
		})
	}
	if c := s.Counters(); c.NICCreates != 0 {
		t.Fatalf("%d NICs created by refused requests", c.NICCreates)
	}
}

// syncBuffer is a log sink tests read while the emulator writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestVMWithoutOutboundNeverJoins: on the private AKS node subnet, a VM whose
// NIC is not in the outbound pool boots without a way to the API server:
// BootError and the log say why. In the outbound pool, on a subnet with a
// NAT gateway, or on a subnet with default outbound access, it has one.
func TestVMWithoutOutboundNeverJoins(t *testing.T) {
	withNAT := AKSNetwork(sub, rg, loc)
	withNAT.Subnets[0].Properties.NatGateway = subResource(rgID(sub, rg) + networkProviderPath + "natGateways/nat")
	withDefault := AKSNetwork(sub, rg, loc)
	withDefault.Subnets[0].Properties.DefaultOutboundAccess = ptr(true)
	for _, tc := range []struct {
		name    string
		network Network
		pools   []string
		want    string // "" = has outbound
	}{
		{"private subnet, no pool", AKSNetwork(sub, rg, loc), nil, "no outbound connectivity"},
		{"private subnet, inbound pool only", AKSNetwork(sub, rg, loc), []string{poolID(AKSInboundPool)}, "is private (defaultOutboundAccess false)"},
		{"private subnet, outbound pool", AKSNetwork(sub, rg, loc), []string{poolID(AKSOutboundPool), poolID(AKSInboundPool)}, ""},
		{"NAT gateway on the subnet", withNAT, nil, ""},
		{"default outbound access", withDefault, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			s, err := Start(context.Background(), Options{SubscriptionIDs: []string{sub}, OpDelay: 10 * time.Millisecond,
				Network: tc.network, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			vms, nics := clients(t, s)
			ctx := context.Background()
			np, err := nics.BeginCreateOrUpdate(ctx, rg, "n", aksNIC("", tc.pools...), nil)
			if err != nil {
				t.Fatal(err)
			}
			nic, err := np.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			vp, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(*nic.ID, ""), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := vp.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			// The settle loop boots the VM within a few ticks.
			deadline := time.Now().Add(5 * time.Second)
			for tc.want != "" && s.BootError("vm-1") == "" && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if tc.want == "" {
				time.Sleep(200 * time.Millisecond)
			}
			got := s.BootError("vm-1")
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("BootError = %q, want none", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Fatalf("BootError = %q, want it to contain %q", got, tc.want)
			case tc.want != "" && !strings.Contains(logs.String(), "cannot reach the API server"):
				t.Fatalf("the log does not say why:\n%s", logs.String())
			}
		})
	}
}
