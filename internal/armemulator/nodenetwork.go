package armemulator

// The node network: the node resource group's load balancers and network
// security groups, and the node subnets with what gives them a way out.
//
// Invariants:
//   - A NIC PUT that references a load balancer backend pool or an NSG that
//     does not exist is refused with 400 InvalidResourceReference, the code
//     and message shape ARM answers (Azure/karpenter-provider-azure
//     pkg/providers/instance/lberrors.go matches that code and the pool ID in
//     the message to refresh its pool cache). A malformed ID is refused with
//     LinkedInvalidPropertyId, as a malformed subnet ID is.
//   - A booted VM whose NIC has no outbound path never starts a kubelet that
//     reaches the API server: BootError and the log say why. Outbound paths
//     (Learn, "Default outbound access in Azure",
//     virtual-network/ip-services/default-outbound-access): a NAT gateway on
//     the subnet, the backend pool of a load balancer that has an outbound
//     rule (or a load-balancing rule with outbound SNAT) for that pool, a
//     public IP on the IP configuration, a route table on the subnet
//     (outboundType userDefinedRouting: the appliance it routes to is assumed
//     to forward), or the subnet's default outbound access. A subnet with
//     defaultOutboundAccess false is a private subnet: no default outbound.
//   - A subnet the emulator only knows by ID (Options.Subnets, or any
//     well-formed subnet ID when Options.Subnets is nil) has default outbound
//     access, as subnets created before private subnets became the default.
//   - A load balancer's backend pools list the NIC IP configurations that
//     joined them (backendIPConfigurations), computed from the NICs, as ARM
//     shows them.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Network is the node network the emulator serves: load balancers and NSGs
// (GET and list in their resource group; NICs reference their pools and
// them) and subnets with their outbound settings. Every resource needs its
// full ARM ID (ID); child pools and rules need theirs too.
type Network struct {
	LoadBalancers  []*armnetwork.LoadBalancer
	SecurityGroups []*armnetwork.SecurityGroup
	// Subnets exist in addition to Options.Subnets, with their properties:
	// DefaultOutboundAccess, NatGateway, RouteTable.
	Subnets []*armnetwork.Subnet
}

// Names AKS gives the node resource group's network (outboundType
// loadBalancer). Azure/karpenter-provider-azure pkg/providers/loadbalancer
// (SLBName, SLBOutboundBackendPoolName, SLBInboundBackendPoolName) and
// pkg/providers/networksecuritygroup (aks-agentpool-<8 digits>-nsg).
const (
	AKSLoadBalancer      = "kubernetes"
	AKSOutboundPool      = "aksOutboundBackendPool"
	AKSInboundPool       = "kubernetes"
	AKSOutboundRule      = "aksOutboundRule"
	aksClusterID         = "12345678"
	AKSSecurityGroup     = "aks-agentpool-" + aksClusterID + "-nsg"
	AKSVirtualNetwork    = "aks-vnet-" + aksClusterID
	AKSSubnet            = "aks-subnet"
	networkProviderPath  = "/providers/Microsoft.Network/"
	defaultNetworkRegion = "eastus"
)

// AKSSubnetID is the node subnet of the VNet AKS manages in node resource
// group rg (aks-vnet-<id>/aks-subnet).
func AKSSubnetID(sub, rg string) string {
	return rgID(sub, rg) + networkProviderPath + "virtualNetworks/" + AKSVirtualNetwork + "/subnets/" + AKSSubnet
}

func rgID(sub, rg string) string { return "/subscriptions/" + sub + "/resourceGroups/" + rg }

// AKSNetwork is the network AKS creates in node resource group rg for a
// cluster with outboundType loadBalancer: the load balancer "kubernetes"
// with the backend pools "kubernetes" (Services) and
// "aksOutboundBackendPool" (outbound rule "aksOutboundRule"), the NSG
// aks-agentpool-<id>-nsg, and the managed VNet's node subnet, private
// (defaultOutboundAccess false), so the outbound pool is the nodes' only way
// out.
func AKSNetwork(sub, rg, location string) Network {
	if location == "" {
		location = defaultNetworkRegion
	}
	lbID := rgID(sub, rg) + networkProviderPath + "loadBalancers/" + AKSLoadBalancer
	frontend := lbID + "/frontendIPConfigurations/" + newUUID()
	outPool := lbID + "/backendAddressPools/" + AKSOutboundPool
	lb := &armnetwork.LoadBalancer{
		ID: ptr(lbID), Name: ptr(AKSLoadBalancer), Location: ptr(location),
		SKU: &armnetwork.LoadBalancerSKU{Name: ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: ptr(frontend)}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{
				{ID: ptr(lbID + "/backendAddressPools/" + AKSInboundPool), Name: ptr(AKSInboundPool)},
				{ID: ptr(outPool), Name: ptr(AKSOutboundPool)},
			},
			OutboundRules: []*armnetwork.OutboundRule{{
				ID: ptr(lbID + "/outboundRules/" + AKSOutboundRule), Name: ptr(AKSOutboundRule),
				Properties: &armnetwork.OutboundRulePropertiesFormat{
					BackendAddressPool:       subResource(outPool),
					FrontendIPConfigurations: []*armnetwork.SubResource{subResource(frontend)},
					Protocol:                 ptr(armnetwork.LoadBalancerOutboundRuleProtocolAll),
				},
			}},
		},
	}
	nsg := &armnetwork.SecurityGroup{
		ID:       ptr(rgID(sub, rg) + networkProviderPath + "networkSecurityGroups/" + AKSSecurityGroup),
		Name:     ptr(AKSSecurityGroup),
		Location: ptr(location),
	}
	subnet := &armnetwork.Subnet{ID: ptr(AKSSubnetID(sub, rg)), Name: ptr(AKSSubnet),
		Properties: &armnetwork.SubnetPropertiesFormat{DefaultOutboundAccess: ptr(false),
			NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: nsg.ID}}}
	return Network{LoadBalancers: []*armnetwork.LoadBalancer{lb}, SecurityGroups: []*armnetwork.SecurityGroup{nsg},
		Subnets: []*armnetwork.Subnet{subnet}}
}

// validate checks that every resource has an ID the emulator can serve.
func (n Network) validate() error {
	for _, lb := range n.LoadBalancers {
		if lb == nil || parentKey(deref(lb.ID), "loadBalancers") == "" {
			return fmt.Errorf("armemulator: Network.LoadBalancers: %q is not a load balancer ID", idOf(lb))
		}
	}
	for _, nsg := range n.SecurityGroups {
		if nsg == nil || parentKey(deref(nsg.ID), "networkSecurityGroups") == "" {
			return fmt.Errorf("armemulator: Network.SecurityGroups: %q is not a network security group ID", idOfNSG(nsg))
		}
	}
	for _, sn := range n.Subnets {
		if sn == nil || !subnetIDRE.MatchString(deref(sn.ID)) {
			return fmt.Errorf("armemulator: Network.Subnets: a subnet needs a well-formed ID")
		}
	}
	return nil
}

func idOf(lb *armnetwork.LoadBalancer) string {
	if lb == nil {
		return ""
	}
	return deref(lb.ID)
}

func idOfNSG(g *armnetwork.SecurityGroup) string {
	if g == nil {
		return ""
	}
	return deref(g.ID)
}

// parentKey is the resourceKey of a Microsoft.Network/<typ>/<name> ID, ""
// when id is not one.
func parentKey(id, typ string) string {
	seg := strings.Split(strings.Trim(id, "/"), "/")
	if len(seg) != 8 || !strings.EqualFold(seg[0], "subscriptions") || !strings.EqualFold(seg[2], "resourceGroups") ||
		!strings.EqualFold(seg[5], "Microsoft.Network") || !strings.EqualFold(seg[6], typ) {
		return ""
	}
	return resourceKey(seg[1], seg[3], seg[7])
}

var backendPoolIDRE = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/loadBalancers/[^/]+/backendAddressPools/[^/]+$`)

// networkState is the emulator's copy of Options.Network, by resourceKey.
type networkState struct {
	lbs     map[string]*armnetwork.LoadBalancer
	nsgs    map[string]*armnetwork.SecurityGroup
	subnets map[string]*armnetwork.Subnet // key: lower-case subnet ID
}

func newNetworkState(n Network) *networkState {
	st := &networkState{lbs: map[string]*armnetwork.LoadBalancer{}, nsgs: map[string]*armnetwork.SecurityGroup{},
		subnets: map[string]*armnetwork.Subnet{}}
	for _, lb := range n.LoadBalancers {
		cp := deepCopyJSON(lb)
		cp.Type = ptr("Microsoft.Network/loadBalancers")
		st.lbs[parentKey(deref(lb.ID), "loadBalancers")] = cp
	}
	for _, nsg := range n.SecurityGroups {
		cp := deepCopyJSON(nsg)
		cp.Type = ptr("Microsoft.Network/networkSecurityGroups")
		st.nsgs[parentKey(deref(nsg.ID), "networkSecurityGroups")] = cp
	}
	for _, sn := range n.Subnets {
		st.subnets[strings.ToLower(deref(sn.ID))] = deepCopyJSON(sn)
	}
	return st
}

func deepCopyJSON[T any](v *T) *T {
	raw, _ := json.Marshal(v)
	var out T
	_ = json.Unmarshal(raw, &out)
	return &out
}

// pool finds a backend pool by its ID.
func (st *networkState) pool(id string) (*armnetwork.LoadBalancer, *armnetwork.BackendAddressPool) {
	lbID, _, ok := strings.Cut(strings.ToLower(id), "/backendaddresspools/")
	if !ok {
		return nil, nil
	}
	lb := st.lbs[parentKey(lbID, "loadBalancers")]
	if lb == nil || lb.Properties == nil {
		return nil, nil
	}
	for _, pool := range lb.Properties.BackendAddressPools {
		if pool != nil && strings.EqualFold(deref(pool.ID), id) {
			return lb, pool
		}
	}
	return nil, nil
}

// checkNICReferences checks the backend pools and the NSG a NIC references.
func (s *Server) checkNICReferences(nic *armnetwork.Interface, nicID string) refusal {
	for i, ipc := range nic.Properties.IPConfigurations {
		for j, pool := range ipc.Properties.LoadBalancerBackendAddressPools {
			path := fmt.Sprintf("properties.ipConfigurations[%d].properties.loadBalancerBackendAddressPools[%d].id", i, j)
			id := ""
			if pool != nil {
				id = deref(pool.ID)
			}
			if !backendPoolIDRE.MatchString(id) {
				return invalidPropertyID(id, path)
			}
			if _, pool := s.network.pool(id); pool == nil {
				return missingReference(id, nicID)
			}
		}
	}
	if nsg := nic.Properties.NetworkSecurityGroup; nsg != nil {
		id := deref(nsg.ID)
		key := parentKey(id, "networkSecurityGroups")
		if key == "" {
			return invalidPropertyID(id, "properties.networkSecurityGroup.id")
		}
		if s.network.nsgs[key] == nil {
			return missingReference(id, nicID)
		}
	}
	return refusal{}
}

func invalidPropertyID(id, path string) refusal {
	return refusal{status: http.StatusBadRequest, code: "LinkedInvalidPropertyId", message: fmt.Sprintf(
		"Property id '%s' at path '%s' is invalid. Expect fully qualified resource Id that start with '/subscriptions/{subscriptionId}' or '/providers/{resourceProviderNamespace}/'.", id, path)}
}

func missingReference(id, nicID string) refusal {
	return refusal{status: http.StatusBadRequest, code: "InvalidResourceReference", message: fmt.Sprintf(
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.", id, nicID)}
}

// noOutboundLocked says why VM v has no way to the internet (and so to the
// API server's public FQDN), "" when it has one. Every IP configuration of
// every NIC counts.
func (s *Server) noOutboundLocked(v *vmState) string {
	var reasons []string
	for _, nk := range v.nicKeys {
		nicRecord, ok := s.nics[nk]
		if !ok || nicRecord.nic.Properties == nil {
			continue
		}
		for _, ipc := range nicRecord.nic.Properties.IPConfigurations {
			if ipc == nil || ipc.Properties == nil {
				continue
			}
			reason := s.ipConfigNoOutbound(ipc.Properties)
			if reason == "" {
				return ""
			}
			reasons = append(reasons, fmt.Sprintf("%s: %s", deref(ipc.ID), reason))
		}
	}
	if len(reasons) == 0 {
		return "no network interface: the kubelet cannot reach the API server"
	}
	return "no outbound connectivity, so the kubelet cannot reach the API server: " + strings.Join(reasons, "; ")
}

// ipConfigNoOutbound says why one IP configuration has no way out.
func (s *Server) ipConfigNoOutbound(p *armnetwork.InterfaceIPConfigurationPropertiesFormat) string {
	if p.PublicIPAddress != nil || s.network == nil {
		return ""
	}
	for _, ref := range p.LoadBalancerBackendAddressPools {
		if ref != nil && s.network.poolHasOutbound(deref(ref.ID)) {
			return ""
		}
	}
	subnetID := ""
	if p.Subnet != nil {
		subnetID = deref(p.Subnet.ID)
	}
	sn := s.network.subnets[strings.ToLower(subnetID)]
	if sn == nil || sn.Properties == nil {
		return "" // known by ID only: default outbound access
	}
	sp := sn.Properties
	switch {
	case sp.NatGateway != nil, sp.RouteTable != nil:
		return ""
	case sp.DefaultOutboundAccess == nil || *sp.DefaultOutboundAccess:
		return ""
	}
	pools := make([]string, 0, len(p.LoadBalancerBackendAddressPools))
	for _, ref := range p.LoadBalancerBackendAddressPools {
		if ref != nil {
			pools = append(pools, deref(ref.ID))
		}
	}
	return fmt.Sprintf("subnet %s is private (defaultOutboundAccess false) with no NAT gateway or route table, "+
		"no public IP, and no backend pool with an outbound rule (pools: %v)", subnetID, pools)
}

// poolHasOutbound reports whether a load balancer gives backend pool id a
// way out: an outbound rule for the pool, or a load-balancing rule for it
// that does not disable outbound SNAT (Learn, load-balancer/outbound-rules).
func (st *networkState) poolHasOutbound(id string) bool {
	lb, _ := st.pool(id)
	if lb == nil {
		return false
	}
	for _, rule := range lb.Properties.OutboundRules {
		if rule != nil && rule.Properties != nil && rule.Properties.BackendAddressPool != nil &&
			strings.EqualFold(deref(rule.Properties.BackendAddressPool.ID), id) {
			return true
		}
	}
	for _, rule := range lb.Properties.LoadBalancingRules {
		if rule != nil && rule.Properties != nil && rule.Properties.BackendAddressPool != nil &&
			strings.EqualFold(deref(rule.Properties.BackendAddressPool.ID), id) && !deref(rule.Properties.DisableOutboundSnat) {
			return true
		}
	}
	return false
}

// loadBalancerLocked is lb as ARM returns it: each backend pool lists the
// NIC IP configurations in it.
func (s *Server) loadBalancerLocked(lb *armnetwork.LoadBalancer) *armnetwork.LoadBalancer {
	out := deepCopyJSON(lb)
	if out.Properties == nil {
		return out
	}
	for _, pool := range out.Properties.BackendAddressPools {
		if pool == nil {
			continue
		}
		if pool.Properties == nil {
			pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
		}
		pool.Properties.BackendIPConfigurations = s.poolMembersLocked(deref(pool.ID))
	}
	return out
}

func (s *Server) poolMembersLocked(poolID string) []*armnetwork.InterfaceIPConfiguration {
	var out []*armnetwork.InterfaceIPConfiguration
	for _, nicRecord := range s.nics {
		if nicRecord.deleting || nicRecord.nic.Properties == nil {
			continue
		}
		for _, ipc := range nicRecord.nic.Properties.IPConfigurations {
			if ipc == nil || ipc.Properties == nil {
				continue
			}
			for _, ref := range ipc.Properties.LoadBalancerBackendAddressPools {
				if ref != nil && strings.EqualFold(deref(ref.ID), poolID) {
					out = append(out, &armnetwork.InterfaceIPConfiguration{ID: ipc.ID})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return deref(out[i].ID) < deref(out[j].ID) })
	return out
}

func (s *Server) getLoadBalancer(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpGetLoadBalancer, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	lb, ok := s.network.lbs[resourceKey(sub, rg, name)]
	var out *armnetwork.LoadBalancer
	if ok {
		out = s.loadBalancerLocked(lb)
	}
	s.mu.Unlock()
	if !ok {
		notFound(w, "Microsoft.Network/loadBalancers", name, rg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listLoadBalancers(w http.ResponseWriter, r *http.Request, sub, rg string) {
	if _, done := s.inject(w, r, Request{Operation: OpListLoadBalancers, SubscriptionID: sub, ResourceGroup: rg}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	res := armnetwork.LoadBalancerListResult{Value: []*armnetwork.LoadBalancer{}}
	prefix := strings.ToLower(sub + "/" + rg + "/")
	for key, lb := range s.network.lbs {
		if strings.HasPrefix(key, prefix) {
			res.Value = append(res.Value, s.loadBalancerLocked(lb))
		}
	}
	s.mu.Unlock()
	sort.Slice(res.Value, func(i, j int) bool { return deref(res.Value[i].Name) < deref(res.Value[j].Name) })
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) getSecurityGroup(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpGetSecurityGroup, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	nsg, ok := s.network.nsgs[resourceKey(sub, rg, name)]
	var out *armnetwork.SecurityGroup
	if ok {
		out = deepCopyJSON(nsg)
	}
	s.mu.Unlock()
	if !ok {
		notFound(w, "Microsoft.Network/networkSecurityGroups", name, rg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listSecurityGroups(w http.ResponseWriter, r *http.Request, sub, rg string) {
	if _, done := s.inject(w, r, Request{Operation: OpListSecurityGroups, SubscriptionID: sub, ResourceGroup: rg}); done {
		return
	}
	s.mu.Lock()
	res := armnetwork.SecurityGroupListResult{Value: []*armnetwork.SecurityGroup{}}
	prefix := strings.ToLower(sub + "/" + rg + "/")
	for key, nsg := range s.network.nsgs {
		if strings.HasPrefix(key, prefix) {
			res.Value = append(res.Value, deepCopyJSON(nsg))
		}
	}
	s.mu.Unlock()
	sort.Slice(res.Value, func(i, j int) bool { return deref(res.Value[i].Name) < deref(res.Value[j].Name) })
	writeJSON(w, http.StatusOK, res)
}
