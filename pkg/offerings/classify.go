package offerings

import (
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// ForLaunchError returns the entries a failed launch of offering o of it
// should record, and false when err is not a capacity or quota error (then
// nothing is marked and the launch is simply retried).
func ForLaunchError(err error, it *catalog.InstanceType, o catalog.Offering, now time.Time) ([]Entry, bool) {
	code := azure.ErrorCode(err)
	base := Entry{CapacityType: o.CapacityType, InstanceType: it.Name, Zone: o.Zone, Reason: code}
	switch {
	case azure.IsCapacityError(err):
		switch code {
		case azure.CodeZonalAllocationFailed, azure.CodeOverconstrainedZonalAllocationRequest:
			base.Until = now.Add(DefaultTTL)
		case azure.CodeAllocationFailed:
			base.Zone, base.Until = "", now.Add(AllocationFailureTTL)
		case azure.CodeSkuNotAvailable:
			base.Zone, base.Until = "", now.Add(SKUNotAvailableOnDemandTTL)
			if o.CapacityType == azure.CapacityTypeSpot {
				base.Until = now.Add(SKUNotAvailableSpotTTL)
			}
		default: // OverconstrainedAllocationRequest: this exact offering
			base.Until = now.Add(DefaultTTL)
		}
		return []Entry{base}, true
	case azure.IsQuotaError(err):
		switch azure.QuotaScope(err) {
		case azure.QuotaScopeLowPriority:
			return []Entry{{CapacityType: azure.CapacityTypeSpot, Reason: "LowPriorityQuota", Until: now.Add(SubscriptionQuotaTTL)}}, true
		case azure.QuotaScopeRegional:
			return []Entry{{CapacityType: o.CapacityType, Reason: "RegionalQuota", Until: now.Add(RegionalQuotaTTL)}}, true
		default:
			fam := quotaFamilyInMessage(err)
			if fam == "" {
				fam = QuotaFamily(it.Name)
			}
			if fam == "" {
				return []Entry{{CapacityType: o.CapacityType, InstanceType: it.Name, Reason: "FamilyQuota", Until: now.Add(SubscriptionQuotaTTL)}}, true
			}
			return []Entry{{CapacityType: o.CapacityType, Family: fam, Reason: "FamilyQuota", Until: now.Add(SubscriptionQuotaTTL)}}, true
		}
	}
	return nil, false
}

var quotaFamilyRE = regexp.MustCompile(`(?i)\b(standard[A-Za-z0-9]*Family)\b`)

// quotaFamilyInMessage finds the quota family ARM names in a quota error
// ("... exceeding approved standardDSv5Family Cores quota").
func quotaFamilyInMessage(err error) string {
	if err == nil {
		return ""
	}
	m := quotaFamilyRE.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	return m[1]
}

// QuotaFamily is the Azure quota family of a VM size, the name quota errors
// and the Usage API use: Standard_D4s_v5 -> standardDSv5Family,
// Standard_D8as_v5 -> standardDASv5Family, Standard_E4_v3 ->
// standardEv3Family. It returns "" for a name it cannot read.
func QuotaFamily(size string) string {
	parts := strings.Split(strings.TrimPrefix(size, "Standard_"), "_")
	if len(parts) == 0 || parts[0] == "" {
		return ""
	}
	base := parts[0]
	i := 0
	for i < len(base) && unicode.IsLetter(rune(base[i])) {
		i++
	}
	j := i
	for j < len(base) && (unicode.IsDigit(rune(base[j])) || base[j] == '-') {
		j++
	}
	if i == 0 || j == i {
		return ""
	}
	fam := base[:i] + strings.ToUpper(base[j:])
	version := ""
	for _, p := range parts[1:] {
		if strings.HasPrefix(strings.ToLower(p), "v") {
			version = strings.ToLower(p)
		}
	}
	return "standard" + strings.ToUpper(fam[:1]) + fam[1:] + version + "Family"
}
