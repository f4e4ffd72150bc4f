package armemulator

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// Quota is the subscription's compute vCPU quota in the emulated region, as
// the usages API reports it: one limit per VM family (by the SKU API's
// family name, e.g. standardDSv5Family), the total regional limit (usage
// name "cores") and the spot limit (usage name "lowPriorityCores").
//
// A nil Families map or a zero Regional/Spot is "no limit" in the emulator
// (Azure always has one; tests set what they check). A family absent from
// Families is unlimited too.
type Quota struct {
	Families map[string]int64
	Regional int64
	Spot     int64
}

// Usage names of the compute usages API (GET .../locations/{loc}/usages):
// "cores" is Total Regional vCPUs, "lowPriorityCores" Total Regional
// Low-priority (spot) vCPUs, and each family its own name
// (armcompute Usage.Name.Value; examples in Learn "Check vCPU quotas",
// https://learn.microsoft.com/azure/virtual-machines/quotas).
const (
	usageRegional = "cores"
	usageSpot     = "lowPriorityCores"
)

// SetQuota replaces the quota; creates from now on are checked against it.
func (s *Server) SetQuota(q Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	families := make(map[string]int64, len(q.Families))
	s.quotaNames = make(map[string]string, len(q.Families))
	for family, limit := range q.Families {
		families[strings.ToLower(family)] = limit
		s.quotaNames[strings.ToLower(family)] = family
	}
	q.Families = families
	s.quota = q
}

// quotaUse is the vCPUs in use: by family and regional for regular VMs,
// spot for spot VMs. Regular VMs count against two tiers, the Total
// Regional vCPUs and their family's vCPUs; spot VMs against the separate
// spot (low-priority) vCPU quota only (Learn, "Check vCPU quotas",
// https://learn.microsoft.com/azure/virtual-machines/quotas; the Azure
// provider likewise reads a LowPriorityCores refusal as all spot and
// nothing else: pkg/providers/instance/offerings/commonerrorhandlers.go:143-158
// @352646f5).
type quotaUse struct {
	families map[string]int64
	regional int64
	spot     int64
}

// vmCost is what one VM of sku uses: its family (from the SKU list's
// family field) and vCPUs (its vCPUs capability). ok is false for a size
// the SKU list does not describe; such a VM counts against nothing.
func (s *Server) vmCost(sku string) (family string, vcpus int64, ok bool) {
	rs := s.vmSKU(sku)
	if rs == nil {
		return "", 0, false
	}
	n, err := strconv.ParseInt(skuCapabilitiesOf(rs).cpu, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return deref(rs.Family), n, true
}

func isSpot(vm *armcompute.VirtualMachine) bool {
	if vm.Properties == nil || vm.Properties.Priority == nil {
		return false
	}
	p := *vm.Properties.Priority
	return p == armcompute.VirtualMachinePriorityTypesSpot || p == armcompute.VirtualMachinePriorityTypesLow
}

// usageLocked sums the vCPUs of the VMs in location that exist (creating,
// running or deleting: a VM holds its cores until it is gone).
func (s *Server) usageLocked(sub, location string) quotaUse {
	use := quotaUse{families: map[string]int64{}}
	for _, vmRecord := range s.vms {
		if !strings.EqualFold(vmRecord.sub, sub) || !strings.EqualFold(vmRecord.location, location) {
			continue
		}
		size := ""
		if vmRecord.vm.Properties != nil && vmRecord.vm.Properties.HardwareProfile != nil {
			size = string(deref(vmRecord.vm.Properties.HardwareProfile.VMSize))
		}
		family, vcpus, ok := s.vmCost(size)
		if !ok {
			continue
		}
		if isSpot(&vmRecord.vm) {
			use.spot += vcpus
			continue
		}
		use.regional += vcpus
		use.families[strings.ToLower(family)] += vcpus
	}
	return use
}

// checkQuotaLocked refuses a create that would take a quota past its
// limit, as ARM does: HTTP 409, code OperationNotAllowed, and the message
// naming the quota with the limit, usage and the cores the create needs.
// The message text is ARM's (family: Azure/karpenter-provider-azure#192,
// "Operation could not be completed as it results in exceeding approved
// standardDASv5Family Cores quota. Additional details - Deployment Model:
// Resource Manager, Location: eastus, Current Limit: 100, Current Usage:
// 96, Additional Required: 64, (Minimum) New Limit Required: 160. Submit a
// request for Quota increase at ..."; regional "Total Regional Cores
// quota", nforgeio/neonKUBE#1671; spot "LowPriorityCores quota",
// scylladb/scylla-cluster-tests#4994). Spot is checked first, then the
// family, then the region, the order in which the Azure provider matches
// them (karpenter-provider-azure pkg/providers/instance/offerings/
// resperrorhandlers.go:44-80 @352646f5).
func (s *Server) checkQuotaLocked(sub, location, sku string, vm *armcompute.VirtualMachine) refusal {
	family, vcpus, ok := s.vmCost(sku)
	if !ok {
		return refusal{}
	}
	use := s.usageLocked(sub, location)
	over := func(name string, limit, used int64) refusal {
		return refusal{status: http.StatusConflict, code: "OperationNotAllowed", message: fmt.Sprintf(
			"Operation could not be completed as it results in exceeding approved %s quota. Additional details - Deployment Model: Resource Manager, "+
				"Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d, (Minimum) New Limit Required: %d. "+
				"Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/"+
				"%%7B%%22subscriptionId%%22:%%22%s%%22,%%22command%%22:%%22openQuotaApprovalBlade%%22,%%22quotas%%22:[%%7B%%22location%%22:%%22%s%%22,%%22providerId%%22:%%22Microsoft.Compute%%22,%%22resourceName%%22:%%22%s%%22,%%22quotaRequest%%22:%%7B%%22properties%%22:%%7B%%22limit%%22:%d,%%22unit%%22:%%22Count%%22,%%22name%%22:%%7B%%22value%%22:%%22%s%%22%%7D%%7D%%7D%%7D]%%7D "+
				"by specifying parameters listed in the ‘Details’ section for deployment to succeed. Please read more about quota limits at https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests",
			name, location, limit, used, vcpus, used+vcpus, sub, location, usageNameOf(name), used+vcpus, usageNameOf(name))}
	}
	q := s.quota
	if isSpot(vm) {
		if q.Spot > 0 && use.spot+vcpus > q.Spot {
			return over("LowPriorityCores", q.Spot, use.spot)
		}
		return refusal{}
	}
	if limit, ok := q.Families[strings.ToLower(family)]; ok && family != "" && use.families[strings.ToLower(family)]+vcpus > limit {
		return over(family+" Cores", limit, use.families[strings.ToLower(family)])
	}
	if q.Regional > 0 && use.regional+vcpus > q.Regional {
		return over("Total Regional Cores", q.Regional, use.regional)
	}
	return refusal{}
}

// usageNameOf is the usages API name of the quota a refusal names.
func usageNameOf(quotaName string) string {
	switch quotaName {
	case "LowPriorityCores":
		return usageSpot
	case "Total Regional Cores":
		return usageRegional
	}
	return strings.TrimSuffix(quotaName, " Cores")
}

// listUsages serves GET /subscriptions/{sub}/providers/Microsoft.Compute/
// locations/{loc}/usages (armcompute UsageClient.NewListPager): the
// regional and spot vCPUs and one entry per family of the SKU list, each
// {unit "Count", currentValue, limit, name {value, localizedValue}}. A
// limit the test did not set is reported as 100000, so readers see room.
func (s *Server) listUsages(w http.ResponseWriter, r *http.Request, sub, location string) {
	if _, done := s.inject(w, r, Request{Operation: OpListUsages, SubscriptionID: sub}); done {
		return
	}
	if loc := s.location(); loc != "" && !strings.EqualFold(loc, location) {
		writeError(w, http.StatusNotFound, "NoRegisteredProviderFound", fmt.Sprintf("No registered resource provider found for location '%s'.", location))
		return
	}
	s.mu.Lock()
	s.settleLocked()
	use := s.usageLocked(sub, location)
	q := s.quota
	families := map[string]string{} // lower -> as the SKU list or the test spells it
	for lower, name := range s.quotaNames {
		families[lower] = name
	}
	s.mu.Unlock()
	const unlimited = 100000
	limitOr := func(limit int64) int64 {
		if limit > 0 {
			return limit
		}
		return unlimited
	}
	usage := func(name, localized string, current, limit int64) *armcompute.Usage {
		return &armcompute.Usage{Unit: ptr("Count"), CurrentValue: ptr(int32(current)), Limit: ptr(limit),
			Name: &armcompute.UsageName{Value: ptr(name), LocalizedValue: ptr(localized)}}
	}
	res := armcompute.ListUsagesResult{Value: []*armcompute.Usage{
		usage(usageRegional, "Total Regional vCPUs", use.regional, limitOr(q.Regional)),
		usage(usageSpot, "Total Regional Spot vCPUs", use.spot, limitOr(q.Spot)),
	}}
	for _, rs := range s.opts.SKUs {
		if rs != nil && deref(rs.Family) != "" {
			families[strings.ToLower(deref(rs.Family))] = deref(rs.Family)
		}
	}
	keys := make([]string, 0, len(families))
	for key := range families {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		limit, ok := q.Families[key]
		if !ok {
			limit = unlimited
		}
		res.Value = append(res.Value, usage(families[key], families[key]+" vCPUs", use.families[key], limit))
	}
	writeJSON(w, http.StatusOK, res)
}

// isUsages: seg addresses /subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages.
func isUsages(seg []string) bool {
	return len(seg) == 7 && segIs(seg, 2, "providers") && segIs(seg, 3, "Microsoft.Compute") && segIs(seg, 4, "locations") && segIs(seg, 6, "usages")
}
