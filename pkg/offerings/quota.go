package offerings

import (
	"fmt"
	"sort"
	"strings"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Usage names of the compute usages API: total regional vCPUs and spot
// (low-priority) vCPUs; every other name is a VM family's
// (standardDSv5Family).
const (
	UsageRegional = "cores"
	UsageSpot     = "lowPriorityCores"
)

// QuotaCounter is one quota of the usages API: vCPUs used of Limit.
type QuotaCounter struct {
	// Name is the usages API's name (cores, lowPriorityCores,
	// standardDSv5Family).
	Name        string
	Used, Limit int64
}

// Left is what the quota still allows (never negative).
func (c QuotaCounter) Left() int64 { return max(c.Limit-c.Used, 0) }

// Usage is the subscription's compute quota and use in one region, as the
// usages API answered at Read.
type Usage struct {
	Region string
	Read   time.Time
	// Families by lower-case family name.
	Families map[string]QuotaCounter
	Regional QuotaCounter
	Spot     QuotaCounter
}

// InFlight is a launch that the usages do not show yet: a NodeClaim not
// launched, or launched after the usages were read.
type InFlight struct {
	InstanceType *catalog.InstanceType
	CapacityType string
}

// Headroom is what quota leaves for one pass: the usages minus the vCPUs of
// launches in flight, taken down as the pass plans launches (Take). It is
// not safe for concurrent use. A nil Headroom limits nothing.
//
// Spot VMs count against the spot (low-priority) quota only; on-demand
// VMs against their family's and the regional quota. A family the usages
// do not list is not limited (as the Azure provider's quota check, which
// fails open for an unknown family: karpenter-provider-azure
// pkg/providers/quota/quota.go:122-143 @352646f5).
type Headroom struct {
	usage    Usage
	families map[string]int64
	regional int64
	spot     int64
}

// NewHeadroom is u with the vCPUs of inFlight taken.
func NewHeadroom(u Usage, inFlight []InFlight) *Headroom {
	h := &Headroom{usage: u, families: map[string]int64{}, regional: u.Regional.Left(), spot: u.Spot.Left()}
	for family, counter := range u.Families {
		h.families[family] = counter.Left()
	}
	for _, launch := range inFlight {
		if launch.InstanceType != nil {
			h.Take(launch.InstanceType, launch.CapacityType)
		}
	}
	return h
}

// VCPUs is the vCPU count quota charges for it.
func VCPUs(it *catalog.InstanceType) int64 { return it.Capacity.Cpu().Value() }

// QuotaShortfall says which quota cannot hold one more VM: the quota's
// name, its limit, what is used (usage plus launches in flight), what is
// left, and what the VM needs.
type QuotaShortfall struct {
	Quota                     string
	Region                    string
	Limit, Used, Left, Needed int64
}

func (s QuotaShortfall) Error() string {
	return fmt.Sprintf("%s quota in %s: %d of %d vCPUs used or launching, %d left, %d needed; ask for a quota increase of %s in %s to at least %d vCPUs",
		s.displayName(), s.Region, s.Used, s.Limit, s.Left, s.Needed, s.displayName(), s.Region, s.Used+s.Needed)
}

func (s QuotaShortfall) displayName() string {
	switch s.Quota {
	case UsageRegional:
		return "Total Regional vCPUs (cores)"
	case UsageSpot:
		return "Total Regional Spot vCPUs (lowPriorityCores)"
	}
	return s.Quota
}

// Fits reports whether one more VM of it with capacityType fits, and if
// not, which quota refuses it.
func (h *Headroom) Fits(it *catalog.InstanceType, capacityType string) (QuotaShortfall, bool) {
	if h == nil {
		return QuotaShortfall{}, true
	}
	need := VCPUs(it)
	check := func(counter QuotaCounter, left int64) (QuotaShortfall, bool) {
		if need <= left {
			return QuotaShortfall{}, true
		}
		return QuotaShortfall{Quota: counter.Name, Region: h.usage.Region, Limit: counter.Limit, Used: counter.Limit - left, Left: left, Needed: need}, false
	}
	if capacityType == karpv1.CapacityTypeSpot {
		if h.usage.Spot.Limit == 0 && h.usage.Spot.Name == "" {
			return QuotaShortfall{}, true
		}
		return check(h.usage.Spot, h.spot)
	}
	family := strings.ToLower(QuotaFamily(it.Name))
	if left, ok := h.families[family]; ok {
		if short, fits := check(h.usage.Families[family], left); !fits {
			return short, false
		}
	}
	if h.usage.Regional.Name == "" {
		return QuotaShortfall{}, true
	}
	return check(h.usage.Regional, h.regional)
}

// Counted names the quotas one VM of it with capacityType counts against,
// as Quotas names them: the spot quota for spot; the family's and the
// regional quota for on-demand. A quota the usages do not list is left
// out: it limits nothing.
func (h *Headroom) Counted(it *catalog.InstanceType, capacityType string) []string {
	if h == nil {
		return nil
	}
	if capacityType == karpv1.CapacityTypeSpot {
		if h.usage.Spot.Name == "" {
			return nil
		}
		return []string{h.usage.Spot.Name}
	}
	var out []string
	if counter, ok := h.usage.Families[strings.ToLower(QuotaFamily(it.Name))]; ok {
		out = append(out, counter.Name)
	}
	if h.usage.Regional.Name != "" {
		out = append(out, h.usage.Regional.Name)
	}
	return out
}

// Take charges one VM of it with capacityType.
func (h *Headroom) Take(it *catalog.InstanceType, capacityType string) {
	if h == nil {
		return
	}
	need := VCPUs(it)
	if capacityType == karpv1.CapacityTypeSpot {
		h.spot -= need
		return
	}
	family := strings.ToLower(QuotaFamily(it.Name))
	if _, ok := h.families[family]; ok {
		h.families[family] -= need
	}
	h.regional -= need
}

// Entries are the offerings of cat that quota rules out now: one entry per
// instance type and capacity type that does not fit, its reason the
// shortfall, until expiry (they are for this pass; they are never
// stored).
func (h *Headroom) Entries(cat *catalog.Catalog, until time.Time) []Entry {
	if h == nil || cat == nil {
		return nil
	}
	var out []Entry
	for _, it := range cat.InstanceTypes {
		seen := map[string]bool{}
		for _, o := range it.Offerings {
			if seen[o.CapacityType] {
				continue
			}
			seen[o.CapacityType] = true
			if short, ok := h.Fits(it, o.CapacityType); !ok {
				out = append(out, Entry{CapacityType: o.CapacityType, InstanceType: it.Name, Reason: "QuotaExhausted: " + short.Error(), Until: until})
			}
		}
	}
	return out
}

// Exhausted lists the quotas that rule out offerings of cat now, one
// shortfall each (for the smallest VM it rules out), sorted by quota name.
func (h *Headroom) Exhausted(cat *catalog.Catalog) []QuotaShortfall {
	if h == nil || cat == nil {
		return nil
	}
	byQuota := map[string]QuotaShortfall{}
	for _, it := range cat.InstanceTypes {
		for _, o := range it.Offerings {
			short, ok := h.Fits(it, o.CapacityType)
			if ok {
				continue
			}
			if prev, seen := byQuota[short.Quota]; !seen || short.Needed < prev.Needed {
				byQuota[short.Quota] = short
			}
		}
	}
	out := make([]QuotaShortfall, 0, len(byQuota))
	for _, short := range byQuota {
		out = append(out, short)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Quota < out[j].Quota })
	return out
}

// FamilyHeadroom is one quota's vCPUs left after launches in flight.
type FamilyHeadroom struct {
	Quota       string
	Limit, Left int64
}

// Quotas lists every quota with what is left of it now, sorted by name:
// the regional, the spot and each family's.
func (h *Headroom) Quotas() []FamilyHeadroom {
	if h == nil {
		return nil
	}
	var out []FamilyHeadroom
	for family, left := range h.families {
		out = append(out, FamilyHeadroom{Quota: h.usage.Families[family].Name, Limit: h.usage.Families[family].Limit, Left: max(left, 0)})
	}
	if h.usage.Regional.Name != "" {
		out = append(out, FamilyHeadroom{Quota: h.usage.Regional.Name, Limit: h.usage.Regional.Limit, Left: max(h.regional, 0)})
	}
	if h.usage.Spot.Name != "" {
		out = append(out, FamilyHeadroom{Quota: h.usage.Spot.Name, Limit: h.usage.Spot.Limit, Left: max(h.spot, 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Quota < out[j].Quota })
	return out
}

// Region is the region the usages were read in.
func (h *Headroom) Region() string {
	if h == nil {
		return ""
	}
	return h.usage.Region
}

// IsQuotaReason reports whether an entry's reason is a pass's quota
// shortfall (see Entries).
func IsQuotaReason(reason string) bool { return strings.HasPrefix(reason, "QuotaExhausted: ") }
