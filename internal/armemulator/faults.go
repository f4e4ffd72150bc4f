package armemulator

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// Operation names one kind of ARM request the emulator serves; faults are
// matched on it.
type Operation string

const (
	OpPutVM        Operation = "PutVM"
	OpGetVM        Operation = "GetVM"
	OpDeleteVM     Operation = "DeleteVM"
	OpListVMs      Operation = "ListVMs"
	OpPutNIC       Operation = "PutNIC"
	OpGetNIC       Operation = "GetNIC"
	OpDeleteNIC    Operation = "DeleteNIC"
	OpListNICs     Operation = "ListNICs"
	OpGetDisk      Operation = "GetDisk"
	OpDeleteDisk   Operation = "DeleteDisk"
	OpListDisks    Operation = "ListDisks"
	OpListSKUs     Operation = "ListSKUs"
	OpListUsages   Operation = "ListUsages"
	OpGetOperation Operation = "GetOperation"

	OpGetLoadBalancer    Operation = "GetLoadBalancer"
	OpListLoadBalancers  Operation = "ListLoadBalancers"
	OpGetSecurityGroup   Operation = "GetSecurityGroup"
	OpListSecurityGroups Operation = "ListSecurityGroups"
	// OpListGalleryVersions lists a community gallery image's versions.
	OpListGalleryVersions Operation = "ListGalleryVersions"
	// The managed cluster's maintenance configurations.
	OpListMaintenanceConfigs Operation = "ListMaintenanceConfigurations"
	OpGetMaintenanceConfig   Operation = "GetMaintenanceConfiguration"
	OpPutMaintenanceConfig   Operation = "PutMaintenanceConfiguration"
)

// Request is what an Injector sees of an incoming request.
type Request struct {
	Operation      Operation
	SubscriptionID string
	ResourceGroup  string
	Name           string
	// SKU and Zone are set for OpPutVM; Zone is the Kubernetes form
	// "<location>-<n>" (empty for a regional VM).
	SKU  string
	Zone string
}

// Fault is what an Injector asks the emulator to do instead of (or before)
// serving a request.
type Fault struct {
	// Delay holds the request this long before it is served (or failed).
	Delay time.Duration
	// Code (ARM error code) and StatusCode make the request fail. With
	// neither set the fault is only a delay. StatusCode defaults from the
	// code (429 for TooManyRequests, 409 for capacity and quota codes, 404
	// for NotFound, else 400).
	Code       string
	StatusCode int
	Message    string
	// RetryAfter is sent as Retry-After (whole seconds, rounded up) and,
	// when it is not a whole number of seconds, also as Retry-After-Ms.
	RetryAfter time.Duration
	// Async makes a PUT or DELETE be accepted and its long-running operation
	// fail with Code instead, the way ARM reports allocation failures; a
	// failed VM create leaves the VM in provisioningState Failed.
	Async bool
	// Drop aborts the request without an answer: the client sees its
	// connection (HTTP/1) or stream (HTTP/2) reset.
	Drop bool
}

func (f *Fault) fails() bool { return f != nil && (f.Code != "" || f.StatusCode != 0 || f.Drop) }

func (f *Fault) status() int {
	if f.StatusCode != 0 {
		return f.StatusCode
	}
	switch f.Code {
	case "TooManyRequests", "SubscriptionRequestsThrottled":
		return http.StatusTooManyRequests
	case "NotFound", "ResourceNotFound":
		return http.StatusNotFound
	case "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest",
		"OverconstrainedZonalAllocationRequest", "OperationNotAllowed", "QuotaExceeded":
		return http.StatusConflict
	case "InternalServerError":
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func (f *Fault) message() string {
	if f.Message != "" {
		return f.Message
	}
	return "injected fault " + f.Code
}

// Injector decides, per request, whether to inject a fault. It is the hook
// for richer fault models (probabilistic, time-windowed, scripted); return
// nil to serve the request normally. It must be safe for concurrent use.
type Injector interface {
	Inject(Request) *Fault
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(Request) *Fault

// Inject implements Injector.
func (f InjectorFunc) Inject(r Request) *Fault { return f(r) }

// Rule is a simple fault: requests matching Operation (and SKU, Zone, Name
// when set) get the fault, Count times (0 = every time).
type Rule struct {
	Operation  Operation
	SKU        string // matched case-insensitively
	Zone       string // "<location>-<n>" or just "<n>"
	Name       string // resource name
	Code       string
	StatusCode int
	Message    string
	RetryAfter time.Duration
	Delay      time.Duration
	Async      bool
	Drop       bool
	Count      int
}

func (r *Rule) matches(req Request) bool {
	if r.Operation != req.Operation {
		return false
	}
	if r.SKU != "" && !strings.EqualFold(r.SKU, req.SKU) {
		return false
	}
	if r.Zone != "" && r.Zone != req.Zone && !strings.HasSuffix(req.Zone, "-"+r.Zone) {
		return false
	}
	if r.Name != "" && !strings.EqualFold(r.Name, req.Name) {
		return false
	}
	return true
}

// Rules is an Injector over a list of Rules; the first matching rule with
// uses left fires.
type Rules struct {
	mu    sync.Mutex
	rules []*ruleState
}

type ruleState struct {
	Rule
	fired int
}

// NewRules returns an Injector for rules.
func NewRules(rules ...Rule) *Rules {
	set := &Rules{}
	for _, rule := range rules {
		set.Add(rule)
	}
	return set
}

// Add appends a rule.
func (r *Rules) Add(rule Rule) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, &ruleState{Rule: rule})
}

// Reset removes all rules.
func (r *Rules) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = nil
}

// Inject implements Injector.
func (r *Rules) Inject(req Request) *Fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range r.rules {
		if !rs.matches(req) || (rs.Count > 0 && rs.fired >= rs.Count) {
			continue
		}
		rs.fired++
		return &Fault{
			Delay: rs.Delay, Code: rs.Code, StatusCode: rs.StatusCode, Message: rs.Message,
			RetryAfter: rs.RetryAfter, Async: rs.Async, Drop: rs.Drop,
		}
	}
	return nil
}
