package azure

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// TestClassifyCreate: what an ARM answer to a create means, and what it
// marks unavailable (moved here from pkg/offerings and pkg/provisioning,
// where the meaning used to be decided).
func TestClassifyCreate(t *testing.T) {
	spot := offeringOf{instanceType: "Standard_D4s_v5", zone: "eastus-1", capacityType: "spot"}
	od := offeringOf{instanceType: "Standard_D4s_v5", zone: "eastus-2", capacityType: "on-demand"}
	arm := func(status int, code, msg string) error {
		return errors.Join(errors.New("creating VM"), NewARMError(status, code, msg))
	}
	const (
		capacity  = "capacity"
		create    = "create"
		throttled = "throttled"
		transient = "transient"
	)
	for _, c := range []struct {
		name   string
		err    error
		off    offeringOf
		kind   string
		want   []cloudprovider.Unavailable // Reason ignored
		reason string                      // CreateError's condition reason
	}{
		{"zonal allocation: this size in this zone, 3m", arm(200, "ZonalAllocationFailed", "x"), spot, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "spot", InstanceType: "Standard_D4s_v5", Zone: "eastus-1", TTL: offerings.DefaultTTL}}, ""},
		{"regional allocation: this size in every zone, 1h", arm(409, "AllocationFailed", "x"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", InstanceType: "Standard_D4s_v5", TTL: offerings.AllocationFailureTTL}}, ""},
		{"SkuNotAvailable on-demand: 23h", arm(409, "SkuNotAvailable", "x"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", InstanceType: "Standard_D4s_v5", TTL: offerings.SKUNotAvailableOnDemandTTL}}, ""},
		{"SkuNotAvailable spot: 1h", arm(409, "SkuNotAvailable", "x"), spot, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "spot", InstanceType: "Standard_D4s_v5", TTL: offerings.SKUNotAvailableSpotTTL}}, ""},
		{"low-priority quota: all spot", arm(409, "OperationNotAllowed", "Operation results in exceeding approved LowPriorityCores quota"), spot, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "spot", TTL: offerings.SubscriptionQuotaTTL}}, ""},
		{"family quota: the family named in the message", arm(409, "OperationNotAllowed", "exceeding approved standardDSv5Family Cores quota"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", Family: "standardDSv5Family", TTL: offerings.SubscriptionQuotaTTL}}, ""},
		{"family quota with ARM's figures: the family, 10m", arm(409, "OperationNotAllowed", "Operation could not be completed as it results in exceeding approved standardDASv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 100, Current Usage: 96, Additional Required: 64, (Minimum) New Limit Required: 160."), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", Family: "standardDASv5Family", TTL: offerings.SubscriptionQuotaWithRoomTTL}}, ""},
		{"family quota of limit 0: 1h", arm(409, "OperationNotAllowed", "exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 4,"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", Family: "standardDSv5Family", TTL: offerings.SubscriptionQuotaTTL}}, ""},
		{"regional quota: all on-demand", arm(409, "OperationNotAllowed", "exceeding approved Total Regional Cores quota"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", TTL: offerings.RegionalQuotaTTL}}, ""},
		{"QuotaExceeded code without a family: the size's family", arm(409, "QuotaExceeded", "no"), od, capacity,
			[]cloudprovider.Unavailable{{CapacityType: "on-demand", Family: "standardDSv5Family", TTL: offerings.SubscriptionQuotaTTL}}, ""},
		{"throttling is no verdict", arm(http.StatusTooManyRequests, "TooManyRequests", "slow down"), od, throttled, nil, ""},
		{"5xx is no verdict", arm(500, "InternalServerError", "oops"), od, transient, nil, ""},
		{"non-ARM error is no verdict", errors.New("dial tcp: refused"), od, transient, nil, ""},
		{"OperationNotAllowed without quota: a create error", arm(409, "OperationNotAllowed", "VM is being deleted"), od, create, nil, "OperationNotAllowed"},
		{"ARM's code made a condition reason", arm(400, "Invalid Parameter.x", "no"), od, create, nil, "Invalid_Parameter_x"},
		{"a request refused before ARM", NewInvalidRequestError("no image family %q", "x"), od, create, nil, "InvalidRequest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := classifyCreate(c.err, c.off)
			if !errors.Is(got, c.err) {
				t.Errorf("classified error %v does not wrap its cause", got)
			}
			var ice *cloudprovider.InsufficientCapacityError
			var ce *cloudprovider.CreateError
			switch c.kind {
			case capacity:
				if !errors.As(got, &ice) {
					t.Fatalf("%v: not an InsufficientCapacityError", got)
				}
				if len(ice.Unavailable) != len(c.want) {
					t.Fatalf("unavailable %+v, want %+v", ice.Unavailable, c.want)
				}
				for i, u := range ice.Unavailable {
					if u.Reason == "" {
						t.Errorf("entry %d has no reason", i)
					}
					u.Reason = ""
					if u != c.want[i] {
						t.Errorf("entry %d = %+v, want %+v", i, u, c.want[i])
					}
				}
			case create:
				if !errors.As(got, &ce) || ce.ConditionReason != c.reason {
					t.Fatalf("%v: want a CreateError with reason %q", got, c.reason)
				}
			case throttled:
				if !cloudprovider.IsThrottled(got) {
					t.Fatalf("%v: not a ThrottledError", got)
				}
			case transient:
				if !cloudprovider.IsRetryable(got) || cloudprovider.IsVerdict(got) {
					t.Fatalf("%v: want retryable, no verdict", got)
				}
			}
		})
	}
}

// TestClassifyRead: a read's NotFound is the contract's, throttling keeps
// ARM's Retry-After.
func TestClassifyRead(t *testing.T) {
	notFound := NewARMError(404, CodeResourceNotFound, "gone")
	if err := classifyRead(notFound, true); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Status's 404 = %v, want a NodeClaimNotFoundError", err)
	}
	if err := classifyRead(notFound, false); cloudprovider.IsNodeClaimNotFound(err) || cloudprovider.IsRetryable(err) {
		t.Errorf("a delete's 404 = %v, want it as it is", err)
	}
	slow := &ARMError{StatusCode: 429, Code: CodeTooManyRequests, RetryAfter: 7 * time.Second}
	if err := classifyRead(slow, false); !cloudprovider.IsThrottled(err) || cloudprovider.RetryAfter(err) != 7*time.Second {
		t.Errorf("429 = %v (retry after %s), want throttled for 7s", err, cloudprovider.RetryAfter(err))
	}
}

// TestQuotaNumbers: ARM's figures are read from the messages that carry
// them, current and legacy.
func TestQuotaNumbers(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want QuotaNumbers
		ok   bool
	}{
		{"Operation could not be completed as it results in exceeding approved standardDASv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 100, Current Usage: 96, Additional Required: 64, (Minimum) New Limit Required: 160.", QuotaNumbers{100, 96, 64}, true},
		{"Operation results in exceeding quota limits of Core. Maximum allowed: 4, Current in use: 4, Additional requested: 8.", QuotaNumbers{4, 4, 8}, true},
		{"Operation could not be completed as it results in exceeding approved LowPriorityCores quota.", QuotaNumbers{}, false},
	} {
		got, ok := QuotaNumbersOf(NewARMError(409, CodeOperationNotAllowed, c.msg))
		if got != c.want || ok != c.ok {
			t.Errorf("QuotaNumbersOf(%q) = %+v, %t; want %+v, %t", c.msg, got, ok, c.want, c.ok)
		}
	}
}
