package azure

// Node network: where a node NIC plugs into the cluster's network besides
// its subnet, decided the way Azure/karpenter-provider-azure decides it
// (pkg/providers/instance/vminstance.go, around newNetworkInterfaceForVM):
//
//   - Load balancer backend pools: every pool of the node resource group's
//     load balancers "kubernetes" and "kubernetes-internal", except the IPv6
//     pools and IP-based pools (pkg/providers/loadbalancer). With outboundType
//     loadBalancer, "aksOutboundBackendPool" is the node's way out (a private
//     subnet has no default outbound access); "kubernetes" carries the
//     Services of type LoadBalancer. Other outbound types create no such load
//     balancer, so there is nothing to join.
//   - NSG: on a bring-your-own VNet the NIC carries the cluster's NSG,
//     aks-agentpool-<8 digits>-nsg in the node resource group
//     (pkg/providers/networksecuritygroup); on the VNet AKS manages
//     (aks-vnet-<8 digits>/aks-subnet in the node resource group,
//     pkg/utils IsAKSManagedVNET) the NSG sits on the subnet and the NIC
//     carries none. A bring-your-own VNet without exactly one such NSG is an
//     error: a node without it would not get the cluster's rules.
//
// Both are read from ARM (list in the node resource group) and cached for
// nodeNetworkTTL; a NIC create refused with InvalidResourceReference for a
// pool drops the cache, so the next attempt reads the load balancers again.
// The Functions identity's Virtual Machine Contributor on the node resource
// group grants the reads and the joins (loadBalancers/read,
// loadBalancers/backendAddressPools/join/action, networkSecurityGroups/read,
// networkSecurityGroups/join/action; infra/modules/node-access.bicep).

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Names AKS gives the node resource group's load balancers and pools.
const (
	ClusterLoadBalancer         = "kubernetes"
	ClusterInternalLoadBalancer = "kubernetes-internal"
	OutboundBackendPool         = "aksOutboundBackendPool"
	InboundBackendPool          = "kubernetes"
	outboundBackendPoolIPv6     = "aksOutboundBackendPool-ipv6"
	inboundBackendPoolIPv6      = "kubernetes-ipv6"
)

// nodeNetworkTTL is how long the discovered pools and NSG are reused.
const nodeNetworkTTL = 10 * time.Minute

var (
	managedNSGRE   = regexp.MustCompile(`(?i)^aks-agentpool-\d{8}-nsg$`)
	managedVNetRE  = regexp.MustCompile(`(?i)^aks-vnet-\d{8}$`)
	managedSubnet  = "aks-subnet"
	subnetIDPartRE = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Network/virtualNetworks/([^/]+)/subnets/([^/]+)$`)
)

// NodeNetwork is what a node NIC joins besides its subnet.
type NodeNetwork struct {
	// BackendPools are the load balancer backend pool IDs of the primary
	// IP configuration.
	BackendPools []string
	// SecurityGroupID is the NSG of the NIC; "" on the VNet AKS manages.
	SecurityGroupID string
}

// NodeNetworkError says why the node network could not be worked out.
type NodeNetworkError struct{ error }

func (e NodeNetworkError) Unwrap() error { return e.error }

// ClusterBackendPools picks the backend pools a node NIC joins from the
// node resource group's load balancers.
func ClusterBackendPools(lbs []*armnetwork.LoadBalancer) []string {
	var out []string
	for _, lb := range lbs {
		name := deref(lb.Name)
		if lb.Properties == nil || !(strings.EqualFold(name, ClusterLoadBalancer) || strings.EqualFold(name, ClusterInternalLoadBalancer)) {
			continue
		}
		for _, pool := range lb.Properties.BackendAddressPools {
			if pool != nil && deref(pool.ID) != "" && nodePool(pool) {
				out = append(out, *pool.ID)
			}
		}
	}
	return out
}

// nodePool reports whether NICs join pool p: not an IPv6 pool (IPv6 would
// need a secondary IP configuration) and not an IP-based pool (its members
// are addresses, not NICs).
func nodePool(p *armnetwork.BackendAddressPool) bool {
	name := deref(p.Name)
	if strings.EqualFold(name, outboundBackendPoolIPv6) || strings.EqualFold(name, inboundBackendPoolIPv6) {
		return false
	}
	if p.Properties == nil {
		return true
	}
	for _, address := range p.Properties.LoadBalancerBackendAddresses {
		if address != nil && address.Properties != nil && deref(address.Properties.IPAddress) != "" {
			return false
		}
	}
	return true
}

// ManagedSecurityGroup picks the cluster's NSG from the node resource
// group's NSGs: exactly one aks-agentpool-<8 digits>-nsg. It returns its ID
// and name.
func ManagedSecurityGroup(nsgs []*armnetwork.SecurityGroup, resourceGroup string) (id, name string, err error) {
	var found []string
	for _, nsg := range nsgs {
		if nsg != nil && managedNSGRE.MatchString(deref(nsg.Name)) {
			found = append(found, deref(nsg.Name))
			id, name = deref(nsg.ID), deref(nsg.Name)
		}
	}
	switch len(found) {
	case 1:
		return id, name, nil
	case 0:
		return "", "", NodeNetworkError{fmt.Errorf("node resource group %q has no NSG named aks-agentpool-<8 digits>-nsg: every node's customData names the cluster's NSG "+
			"(and on a bring-your-own VNet its NIC carries it), which AKS creates there; check Options.ResourceGroup (%s)", resourceGroup, EnvResourceGroup)}
	default:
		return "", "", NodeNetworkError{fmt.Errorf("node resource group %q has %d cluster NSGs (%s); expected one", resourceGroup, len(found), strings.Join(found, ", "))}
	}
}

// IsAKSManagedSubnet reports whether subnetID is the node subnet of the VNet
// AKS manages in nodeResourceGroup (aks-vnet-<8 digits>/aks-subnet).
func IsAKSManagedSubnet(nodeResourceGroup, subnetID string) bool {
	match := subnetIDPartRE.FindStringSubmatch(subnetID)
	return match != nil && strings.EqualFold(match[1], nodeResourceGroup) && managedVNetRE.MatchString(match[2]) && strings.EqualFold(match[3], managedSubnet)
}

// withNodeNetwork puts nic's primary IP configuration into the backend
// pools and gives nic the NSG.
func withNodeNetwork(nic *armnetwork.Interface, nn NodeNetwork) {
	if nn.SecurityGroupID != "" {
		nic.Properties.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: ptr(nn.SecurityGroupID)}
	}
	if len(nn.BackendPools) == 0 {
		return
	}
	for _, ipc := range nic.Properties.IPConfigurations {
		if ipc.Properties == nil || !deref(ipc.Properties.Primary) {
			continue
		}
		for _, id := range nn.BackendPools {
			ipc.Properties.LoadBalancerBackendAddressPools = append(ipc.Properties.LoadBalancerBackendAddressPools,
				&armnetwork.BackendAddressPool{ID: ptr(id)})
		}
	}
}

// nodeNetworkCache holds the last discovered pools and NSG.
type nodeNetworkCache struct {
	mu      sync.Mutex
	pools   []string
	nsgID   string
	nsgName string
	readAt  time.Time
	haveNSG bool
}

// NodeNetworkFor is what a NIC on subnetID joins (see the comment at the top
// of nodenetwork.go).
func (l *Launcher) NodeNetworkFor(ctx context.Context, subnetID string) (NodeNetwork, error) {
	cache := l.netCache
	cache.mu.Lock()
	defer cache.mu.Unlock()
	managed := IsAKSManagedSubnet(l.opts.ResourceGroup, subnetID)
	fresh := !cache.readAt.IsZero() && time.Since(cache.readAt) < nodeNetworkTTL
	if !fresh {
		pools, err := l.listBackendPools(ctx)
		if err != nil {
			return NodeNetwork{}, err
		}
		cache.pools = pools
		cache.readAt = time.Now()
		cache.haveNSG = false
	}
	if !managed && !cache.haveNSG {
		if err := l.readSecurityGroupLocked(ctx); err != nil {
			return NodeNetwork{}, err
		}
	}
	nn := NodeNetwork{BackendPools: append([]string(nil), cache.pools...)}
	if !managed {
		nn.SecurityGroupID = cache.nsgID
	}
	return nn, nil
}

// readSecurityGroupLocked finds the cluster NSG into the cache (its lock
// held).
func (l *Launcher) readSecurityGroupLocked(ctx context.Context) error {
	id, name, err := l.findSecurityGroup(ctx)
	if err != nil {
		return err
	}
	l.netCache.nsgID, l.netCache.nsgName, l.netCache.haveNSG = id, name, true
	return nil
}

// SecurityGroupName is the cluster NSG's name (aks-agentpool-<8 digits>-nsg)
// for the node's customData (NETWORK_SECURITY_GROUP, and the cluster ID in
// ROUTE_TABLE), read from ARM and kept with the pools, as the Azure
// provider reads it for every node (launchtemplate.go:169-175 through
// pkg/providers/networksecuritygroup ManagedNetworkSecurityGroup, which
// errors when there is not exactly one).
func (l *Launcher) SecurityGroupName(ctx context.Context) (string, error) {
	l.netCache.mu.Lock()
	defer l.netCache.mu.Unlock()
	if !l.netCache.haveNSG {
		if err := l.readSecurityGroupLocked(ctx); err != nil {
			return "", err
		}
	}
	return l.netCache.nsgName, nil
}

// forgetNodeNetwork drops the cache when err is ARM refusing a NIC for a
// backend pool that no longer exists.
func (l *Launcher) forgetNodeNetwork(err error, nn NodeNetwork) {
	ae, ok := AsARMError(err)
	if !ok || !strings.EqualFold(ae.Code, CodeInvalidResourceReference) {
		return
	}
	msg := strings.ToLower(ae.Message)
	for _, id := range append(nn.BackendPools, nn.SecurityGroupID) {
		if id != "" && strings.Contains(msg, strings.ToLower(id)) {
			l.netCache.mu.Lock()
			l.netCache.readAt = time.Time{}
			l.netCache.mu.Unlock()
			return
		}
	}
}

// newNetworkClients builds the clients that read the node network.
func (l *Launcher) newNetworkClients(cred azcore.TokenCredential, armOpts *arm.ClientOptions) error {
	var err error
	if l.lbs, err = armnetwork.NewLoadBalancersClient(l.opts.SubscriptionID, cred, armOpts); err != nil {
		return fmt.Errorf("creating load balancer client: %w", err)
	}
	if l.nsgs, err = armnetwork.NewSecurityGroupsClient(l.opts.SubscriptionID, cred, armOpts); err != nil {
		return fmt.Errorf("creating network security group client: %w", err)
	}
	l.netCache = &nodeNetworkCache{}
	return nil
}

func (l *Launcher) listBackendPools(ctx context.Context) ([]string, error) {
	var lbs []*armnetwork.LoadBalancer
	pager := l.lbs.NewListPager(l.opts.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, wrapARM(err, "listing load balancers in %q", l.opts.ResourceGroup)
		}
		lbs = append(lbs, page.Value...)
	}
	return ClusterBackendPools(lbs), nil
}

func (l *Launcher) findSecurityGroup(ctx context.Context) (id, name string, err error) {
	var nsgs []*armnetwork.SecurityGroup
	pager := l.nsgs.NewListPager(l.opts.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "", "", wrapARM(err, "listing network security groups in %q", l.opts.ResourceGroup)
		}
		nsgs = append(nsgs, page.Value...)
	}
	return ManagedSecurityGroup(nsgs, l.opts.ResourceGroup)
}
