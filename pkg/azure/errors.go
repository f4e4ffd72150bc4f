package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// ARM error codes the classifiers look at. They are the codes ARM puts in
// {"error":{"code": ...}}, synchronously or in a failed async operation.
const (
	CodeNotFound                              = "NotFound"
	CodeResourceNotFound                      = "ResourceNotFound"
	CodeSkuNotAvailable                       = "SkuNotAvailable"
	CodeAllocationFailed                      = "AllocationFailed"
	CodeZonalAllocationFailed                 = "ZonalAllocationFailed"
	CodeOverconstrainedAllocationRequest      = "OverconstrainedAllocationRequest"
	CodeOverconstrainedZonalAllocationRequest = "OverconstrainedZonalAllocationRequest"
	CodeOperationNotAllowed                   = "OperationNotAllowed"
	CodeQuotaExceeded                         = "QuotaExceeded"
	CodeTooManyRequests                       = "TooManyRequests"
	CodeSubscriptionRequestsThrottled         = "SubscriptionRequestsThrottled"
	CodeInvalidParameter                      = "InvalidParameter"
	CodeNicInUse                              = "NicInUse"
	// CodeInvalidResourceReference: a resource a request references (subnet,
	// backend pool, NSG) does not exist.
	CodeInvalidResourceReference = "InvalidResourceReference"
	// CodeProvisioningFailed stands for a VM in state Failed whose instance
	// view names no error.
	CodeProvisioningFailed = "ProvisioningFailed"
)

// ARMError is an error answered by Azure Resource Manager, reduced to what
// the callers decide on: the HTTP status, the ARM error code and message, and
// how long ARM asked us to wait before retrying.
//
// For a long-running operation that failed asynchronously, StatusCode is the
// status of the operation-status response (usually 200) and Code/Message come
// from its "error" object.
type ARMError struct {
	StatusCode int
	Code       string
	Message    string
	RetryAfter time.Duration
}

// NewARMError builds an ARMError; useful for callers that classify errors
// from other sources the same way.
func NewARMError(statusCode int, code, message string) *ARMError {
	return &ARMError{StatusCode: statusCode, Code: code, Message: message}
}

func (e *ARMError) Error() string {
	var msg strings.Builder
	msg.WriteString("ARM error")
	if e.Code != "" {
		msg.WriteString(" " + e.Code)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&msg, " (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		msg.WriteString(": " + e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&msg, " (retry after %s)", e.RetryAfter)
	}
	return msg.String()
}

// AsARMError returns the ARMError in err's chain, converting an
// *azcore.ResponseError on the way, or false if err did not come from ARM.
func AsARMError(err error) (*ARMError, bool) {
	if err == nil {
		return nil, false
	}
	var ae *ARMError
	if errors.As(err, &ae) {
		return ae, true
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fromResponseError(re), true
	}
	return nil, false
}

// fromResponseError reads the ARM error body that azcore buffered on the
// response. azcore already extracted the code; we also want the message,
// which only the body has.
func fromResponseError(re *azcore.ResponseError) *ARMError {
	ae := &ARMError{StatusCode: re.StatusCode, Code: re.ErrorCode}
	if re.RawResponse == nil {
		return ae
	}
	ae.RetryAfter = retryAfter(re.RawResponse.Header)
	body, err := runtime.Payload(re.RawResponse)
	if err != nil || len(body) == 0 {
		return ae
	}
	var doc struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ae
	}
	switch {
	case doc.Error != nil:
		if ae.Code == "" {
			ae.Code = doc.Error.Code
		}
		ae.Message = doc.Error.Message
	default:
		if ae.Code == "" {
			ae.Code = doc.Code
		}
		ae.Message = doc.Message
	}
	return ae
}

// retryAfter reads the retry hints ARM uses, most precise first, like azcore
// does for its own retries.
func retryAfter(h http.Header) time.Duration {
	for _, header := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if value := h.Get(header); value != "" {
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
	}
	value := h.Get("Retry-After")
	if value == "" {
		return 0
	}
	if seconds, err := strconv.Atoi(value); err == nil && seconds > 0 {
		return time.Duration(seconds) * time.Second
	}
	if at, err := http.ParseTime(value); err == nil {
		if wait := time.Until(at); wait > 0 {
			return wait
		}
	}
	return 0
}

// wrapARM converts an SDK error into an *ARMError (keeping context) so that
// callers never need to know about azcore.
func wrapARM(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	if ae, ok := AsARMError(err); ok {
		return fmt.Errorf("%s: %w", msg, ae)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// IsNotFound reports whether err says the resource (or its resource group)
// does not exist.
func IsNotFound(err error) bool {
	ae, ok := AsARMError(err)
	if !ok {
		return false
	}
	return ae.StatusCode == http.StatusNotFound || ae.Code == CodeResourceNotFound || ae.Code == CodeNotFound
}

// IsCapacityError reports whether Azure could not place the VM size in the
// requested zone/region right now. The offering (SKU, zone, capacity type)
// should be marked unavailable for a while and another one tried.
func IsCapacityError(err error) bool {
	ae, ok := AsARMError(err)
	if !ok {
		return false
	}
	switch ae.Code {
	case CodeSkuNotAvailable, CodeAllocationFailed, CodeZonalAllocationFailed,
		CodeOverconstrainedAllocationRequest, CodeOverconstrainedZonalAllocationRequest:
		return true
	}
	return false
}

// IsQuotaError reports whether the subscription's quota (regional cores, VM
// family cores, spot/low-priority cores) would be exceeded. ARM answers
// quota with OperationNotAllowed and says "quota" in the message, or with a
// *QuotaExceeded code.
func IsQuotaError(err error) bool {
	ae, ok := AsARMError(err)
	if !ok {
		return false
	}
	if strings.HasSuffix(ae.Code, CodeQuotaExceeded) {
		return true
	}
	return ae.Code == CodeOperationNotAllowed && strings.Contains(strings.ToLower(ae.Message), "quota")
}

// IsThrottled reports whether ARM rejected the request for exceeding a rate
// limit; ARMError.RetryAfter says how long to wait.
func IsThrottled(err error) bool {
	ae, ok := AsARMError(err)
	if !ok {
		return false
	}
	return ae.StatusCode == http.StatusTooManyRequests || ae.Code == CodeTooManyRequests || ae.Code == CodeSubscriptionRequestsThrottled
}

// InvalidRequestError means a LaunchRequest or an argument can never succeed
// as given; retrying it is pointless.
type InvalidRequestError struct{ msg string }

func (e *InvalidRequestError) Error() string { return "invalid request: " + e.msg }

// NewInvalidRequestError formats an InvalidRequestError.
func NewInvalidRequestError(format string, args ...any) error {
	return &InvalidRequestError{msg: fmt.Sprintf(format, args...)}
}

// IsInvalidRequest reports whether err is, or wraps, an InvalidRequestError.
func IsInvalidRequest(err error) bool {
	var invalid *InvalidRequestError
	return errors.As(err, &invalid)
}

// Quota scopes, from the message of a quota error.
const (
	QuotaScopeLowPriority = "LowPriority" // the subscription's spot (low-priority) cores
	QuotaScopeFamily      = "Family"      // a VM family's cores, e.g. standardDSv3Family
	QuotaScopeRegional    = "Regional"    // Total Regional Cores
)

// QuotaScope says which quota a quota error (IsQuotaError) is about, from
// ARM's message ("... exceeding approved LowPriorityCores quota",
// "... standardDSv3Family Cores quota", "... Total Regional Cores quota").
// It returns "" for anything else; callers then treat it as the family's.
func QuotaScope(err error) string {
	if !IsQuotaError(err) {
		return ""
	}
	ae, _ := AsARMError(err)
	msg := strings.ToLower(ae.Message)
	switch {
	case strings.Contains(msg, "lowpriority") || strings.Contains(msg, "low priority") || strings.Contains(msg, "spot"):
		return QuotaScopeLowPriority
	case strings.Contains(msg, "regional"):
		return QuotaScopeRegional
	case strings.Contains(msg, "family"):
		return QuotaScopeFamily
	}
	return ""
}

// IsServerError reports whether ARM answered 5xx: transient, retry later.
func IsServerError(err error) bool {
	ae, ok := AsARMError(err)
	return ok && ae.StatusCode >= 500
}

// ErrorCode returns the ARM error code in err, or "".
func ErrorCode(err error) string {
	if ae, ok := AsARMError(err); ok {
		return ae.Code
	}
	return ""
}

// RetryAfter returns how long ARM asked to wait (zero when it did not say).
func RetryAfter(err error) time.Duration {
	if ae, ok := AsARMError(err); ok {
		return ae.RetryAfter
	}
	return 0
}

// QuotaNumbers are the figures ARM gives in a quota error's message: the
// quota's limit, its usage and the vCPUs the request needed.
type QuotaNumbers struct {
	Limit, Usage, Required int64
}

func (q QuotaNumbers) String() string {
	return fmt.Sprintf("limit %d, usage %d, required %d", q.Limit, q.Usage, q.Required)
}

// quotaNumbersRE reads ARM's "Current Limit: 100, Current Usage: 96,
// Additional Required: 64" (the family, regional and low-priority
// messages; Azure/karpenter-provider-azure#192) and the older "Maximum
// allowed: 4, Current in use: 4, Additional requested: 8" (Learn, "Resolve
// errors for resource quotas", https://learn.microsoft.com/azure/
// azure-resource-manager/troubleshooting/error-resource-quota).
var quotaNumbersRE = regexp.MustCompile(`(?i)(?:Current Limit|Maximum allowed):\s*(\d+),\s*(?:Current Usage|Current in use):\s*(\d+),\s*(?:Additional Required|Additional requested):\s*(\d+)`)

// QuotaNumbersOf returns the figures of quota error err, when its message
// has them.
func QuotaNumbersOf(err error) (QuotaNumbers, bool) {
	if !IsQuotaError(err) {
		return QuotaNumbers{}, false
	}
	ae, _ := AsARMError(err)
	match := quotaNumbersRE.FindStringSubmatch(ae.Message)
	if match == nil {
		return QuotaNumbers{}, false
	}
	var q QuotaNumbers
	q.Limit, _ = strconv.ParseInt(match[1], 10, 64)
	q.Usage, _ = strconv.ParseInt(match[2], 10, 64)
	q.Required, _ = strconv.ParseInt(match[3], 10, 64)
	return q, true
}
