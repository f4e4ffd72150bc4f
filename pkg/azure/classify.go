package azure

import (
	"regexp"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// This file is the one place an ARM answer becomes the provider contract's
// typed error (package cloudprovider): the controllers read errors by
// their type, never by ARM's codes.

// offeringOf is the offering a create was for.
type offeringOf struct{ instanceType, zone, capacityType string }

func requestOffering(req LaunchRequest) offeringOf {
	capacityType := req.CapacityType
	if capacityType == "" {
		capacityType = CapacityTypeOnDemand
	}
	return offeringOf{instanceType: req.InstanceType, zone: req.Zone, capacityType: capacityType}
}

// classifyCreate types an error of a create step (BeginNIC, BeginVM) of
// offering: an invalid request or an ARM refusal is a verdict
// (InsufficientCapacityError for capacity and quota, with the offerings to
// exclude; CreateError with ARM's code otherwise), throttling a
// ThrottledError, and a server error or an error that did not come from
// ARM (transport, timeout) a TransientError.
func classifyCreate(err error, offering offeringOf) error {
	if err == nil || cloudprovider.IsVerdict(err) || cloudprovider.IsRetryable(err) {
		return err
	}
	if IsInvalidRequest(err) {
		return cloudprovider.NewCreateError(err, "InvalidRequest")
	}
	ae, ok := AsARMError(err)
	switch {
	case !ok:
		return cloudprovider.NewTransientError(err, 0)
	case IsThrottled(err):
		return cloudprovider.NewThrottledError(err, ae.RetryAfter)
	case IsServerError(err):
		return cloudprovider.NewTransientError(err, ae.RetryAfter)
	}
	return createVerdict(err, ae, offering)
}

// createVerdict is the verdict of ARM's refusal ae of a create of
// offering: capacity and quota errors mark offerings, anything else is a
// CreateError with ARM's code.
func createVerdict(err error, ae *ARMError, offering offeringOf) error {
	if unavailable := unavailableFor(err, ae.Code, offering); len(unavailable) > 0 {
		return cloudprovider.NewInsufficientCapacityError(err, ae.Code, unavailable...)
	}
	return cloudprovider.NewCreateError(err, ae.Code)
}

// classifyFailure types the error ARM recorded for a create that ended
// Failed: always a verdict (there is no call to repeat).
func classifyFailure(failure *ARMError, in *Instance) error {
	return createVerdict(failure, failure, offeringOf{instanceType: in.InstanceType, zone: in.Zone, capacityType: in.CapacityType})
}

// classifyRead types an error of a read or a delete: NotFound (Status
// only, notFound set) a NodeClaimNotFoundError, throttling a
// ThrottledError, a server or non-ARM error a TransientError; any other
// ARM refusal is returned as it is.
func classifyRead(err error, notFound bool) error {
	if err == nil || cloudprovider.IsRetryable(err) || cloudprovider.IsNodeClaimNotFound(err) {
		return err
	}
	ae, ok := AsARMError(err)
	switch {
	case IsInvalidRequest(err):
		return err
	case !ok:
		return cloudprovider.NewTransientError(err, 0)
	case notFound && IsNotFound(err):
		return cloudprovider.NewNodeClaimNotFoundError(err)
	case IsThrottled(err):
		return cloudprovider.NewThrottledError(err, ae.RetryAfter)
	case IsServerError(err):
		return cloudprovider.NewTransientError(err, ae.RetryAfter)
	}
	return err
}

// unavailableFor is what a capacity or quota error of offering marks
// unavailable, as broad as the Azure Karpenter provider marks it: a zonal
// allocation failure the size in that zone, a regional one (and
// SkuNotAvailable) the size in every zone, a family quota the whole
// family, low-priority quota every spot offering, regional quota every
// offering of the capacity type. Nil for any other error.
func unavailableFor(err error, code string, offering offeringOf) []cloudprovider.Unavailable {
	base := cloudprovider.Unavailable{CapacityType: offering.capacityType, InstanceType: offering.instanceType, Zone: offering.zone, Reason: code}
	switch {
	case IsCapacityError(err):
		return []cloudprovider.Unavailable{capacityScope(base, code)}
	case IsQuotaError(err):
		return []cloudprovider.Unavailable{quotaScope(err, offering)}
	}
	return nil
}

// capacityScope narrows or widens base for capacity error code.
func capacityScope(base cloudprovider.Unavailable, code string) cloudprovider.Unavailable {
	switch code {
	case CodeAllocationFailed:
		base.Zone = ""
		base.TTL = offerings.AllocationFailureTTL
	case CodeSkuNotAvailable:
		base.Zone = ""
		base.TTL = offerings.SKUNotAvailableOnDemandTTL
		if base.CapacityType == CapacityTypeSpot {
			base.TTL = offerings.SKUNotAvailableSpotTTL
		}
	default: // zonal allocation failures, OverconstrainedAllocationRequest: this exact offering
		base.TTL = offerings.DefaultTTL
	}
	return base
}

// quotaScope is what quota error err marks: spot quota every spot
// offering, regional quota every offering of the capacity type, a family's
// quota every size of the family. The reason carries ARM's figures when
// the message has them. A family quota whose limit is 0 stays marked for
// SubscriptionQuotaTTL, one with room for SubscriptionQuotaWithRoomTTL
// (usage changes as nodes go), as the Azure provider times them
// (pkg/providers/instance/offerings/commonerrorhandlers.go:40-55,159-186
// @352646f5). Without figures it is SubscriptionQuotaTTL, where the
// provider takes 10 minutes: a message that does not say the limit is
// not taken as room.
func quotaScope(err error, offering offeringOf) cloudprovider.Unavailable {
	numbers, known := QuotaNumbersOf(err)
	reason := func(name string) string {
		if known {
			return name + " (" + numbers.String() + ")"
		}
		return name
	}
	switch QuotaScope(err) {
	case QuotaScopeLowPriority:
		return cloudprovider.Unavailable{CapacityType: CapacityTypeSpot, Reason: reason("LowPriorityQuota"), TTL: offerings.SubscriptionQuotaTTL}
	case QuotaScopeRegional:
		return cloudprovider.Unavailable{CapacityType: offering.capacityType, Reason: reason("RegionalQuota"), TTL: offerings.RegionalQuotaTTL}
	}
	ttl := offerings.SubscriptionQuotaTTL
	if known && numbers.Limit > 0 {
		ttl = offerings.SubscriptionQuotaWithRoomTTL
	}
	family := quotaFamilyInMessage(err)
	if family == "" {
		family = offerings.QuotaFamily(offering.instanceType)
	}
	if family == "" {
		return cloudprovider.Unavailable{CapacityType: offering.capacityType, InstanceType: offering.instanceType, Reason: reason("FamilyQuota"), TTL: ttl}
	}
	return cloudprovider.Unavailable{CapacityType: offering.capacityType, Family: family, Reason: reason("FamilyQuota " + family), TTL: ttl}
}

var quotaFamilyRE = regexp.MustCompile(`(?i)\b(standard[A-Za-z0-9]*Family)\b`)

// quotaFamilyInMessage finds the quota family ARM names in a quota error
// ("... exceeding approved standardDSv5Family Cores quota").
func quotaFamilyInMessage(err error) string {
	match := quotaFamilyRE.FindStringSubmatch(err.Error())
	if match == nil {
		return ""
	}
	return match[1]
}
