package cloudprovider

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The typed errors keep their cause: errors.Unwrap (and so errors.As and
// errors.Is) reaches the provider's own error underneath.

// Unavailable is a set of offerings the provider says to exclude for TTL:
// empty InstanceType, Family or Zone match anything; CapacityType is
// required. Family is the provider's quota family of instance types.
type Unavailable struct {
	CapacityType string
	InstanceType string
	Family       string
	Zone         string
	// Reason names why ("ZonalAllocationFailed", "FamilyQuota", ...).
	Reason string
	TTL    time.Duration
}

// InsufficientCapacityError means the provider could not place an
// offering right now (capacity or quota). Unavailable lists the offerings
// to exclude, as broad as the provider's answer; the launch moves on to
// another offering.
type InsufficientCapacityError struct {
	Err error
	// Code is the provider's error code ("ZonalAllocationFailed", "QuotaExceeded").
	Code        string
	Unavailable []Unavailable
}

func (e *InsufficientCapacityError) Error() string { return e.Err.Error() }
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// NewInsufficientCapacityError returns an InsufficientCapacityError.
func NewInsufficientCapacityError(err error, code string, unavailable ...Unavailable) *InsufficientCapacityError {
	return &InsufficientCapacityError{Err: err, Code: code, Unavailable: unavailable}
}

// IsInsufficientCapacity reports whether err is, or wraps, an
// InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var target *InsufficientCapacityError
	return errors.As(err, &target)
}

// CreateError means the provider refused a create for a reason that is
// not capacity (a bad parameter, a missing image, a refused request):
// retrying the same offering will not help for long. ConditionReason is
// fit for a condition's reason (CamelCase, [A-Za-z0-9_,:]).
type CreateError struct {
	Err              error
	ConditionReason  string
	ConditionMessage string
}

func (e *CreateError) Error() string { return e.Err.Error() }
func (e *CreateError) Unwrap() error { return e.Err }

// NewCreateError returns a CreateError whose reason is code made fit for a
// condition reason (ConditionReason) and whose message is err's.
func NewCreateError(err error, code string) *CreateError {
	return &CreateError{Err: err, ConditionReason: ConditionReason(code), ConditionMessage: err.Error()}
}

// AsCreateError returns the CreateError in err's chain.
func AsCreateError(err error) (*CreateError, bool) {
	var target *CreateError
	ok := errors.As(err, &target)
	return target, ok
}

// ThrottledError means the provider refused the request for its rate
// limit; RetryAfter is how long it asked to wait (zero: it did not say).
type ThrottledError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string { return e.Err.Error() }
func (e *ThrottledError) Unwrap() error { return e.Err }

// NewThrottledError returns a ThrottledError.
func NewThrottledError(err error, retryAfter time.Duration) *ThrottledError {
	return &ThrottledError{Err: err, RetryAfter: retryAfter}
}

// IsThrottled reports whether err is, or wraps, a ThrottledError.
func IsThrottled(err error) bool {
	var target *ThrottledError
	return errors.As(err, &target)
}

// NodeClaimNotFoundError means the instance does not exist.
type NodeClaimNotFoundError struct{ Err error }

func (e *NodeClaimNotFoundError) Error() string { return e.Err.Error() }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.Err }

// NewNodeClaimNotFoundError returns a NodeClaimNotFoundError.
func NewNodeClaimNotFoundError(err error) *NodeClaimNotFoundError {
	return &NodeClaimNotFoundError{Err: err}
}

// IsNodeClaimNotFound reports whether err is, or wraps, a
// NodeClaimNotFoundError.
func IsNodeClaimNotFound(err error) bool {
	var target *NodeClaimNotFoundError
	return errors.As(err, &target)
}

// TransientError means the provider failed internally (a server error)
// or was not reached (transport, timeout): it says nothing about the
// request, which is repeated later. RetryAfter is how long the provider
// asked to wait (zero: it did not say).
type TransientError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// NewTransientError returns a TransientError.
func NewTransientError(err error, retryAfter time.Duration) *TransientError {
	return &TransientError{Err: err, RetryAfter: retryAfter}
}

// IsRetryable reports whether err says nothing about the request: a
// ThrottledError or a TransientError. The step is repeated after
// RetryAfter(err), counting nothing as failed.
func IsRetryable(err error) bool {
	var transient *TransientError
	return IsThrottled(err) || errors.As(err, &transient)
}

// RetryAfter is how long err asks the caller to wait: the RetryAfter of
// the ThrottledError or TransientError in its chain; zero when it says
// nothing.
func RetryAfter(err error) time.Duration {
	var throttled *ThrottledError
	if errors.As(err, &throttled) {
		return throttled.RetryAfter
	}
	var transient *TransientError
	if errors.As(err, &transient) {
		return transient.RetryAfter
	}
	return 0
}

// IsVerdict reports whether err says the create of an offering cannot
// succeed now (an InsufficientCapacityError or a CreateError).
func IsVerdict(err error) bool {
	var capacity *InsufficientCapacityError
	var create *CreateError
	return errors.As(err, &capacity) || errors.As(err, &create)
}

// ErrorCode is the provider's code for err as a metric label: a
// CreateError's condition reason, an InsufficientCapacityError's code
// ("InsufficientCapacityError" when it has none), "Throttled", or "".
func ErrorCode(err error) string {
	var capacity *InsufficientCapacityError
	var create *CreateError
	switch {
	case errors.As(err, &capacity):
		if capacity.Code == "" {
			return "InsufficientCapacityError"
		}
		return capacity.Code
	case errors.As(err, &create):
		return create.ConditionReason
	case IsThrottled(err):
		return "Throttled"
	}
	return ""
}

// ConditionReason makes a provider error code fit for a condition reason
// (CamelCase, [A-Za-z0-9_,:]): other characters become '_', a leading
// non-letter gets an 'E' before it; "" becomes "LaunchFailed".
func ConditionReason(code string) string {
	if code == "" {
		return "LaunchFailed"
	}
	out := make([]rune, 0, len(code)+1)
	for _, char := range code {
		if isLetter(char) || (char >= '0' && char <= '9') || char == '_' || char == ',' || char == ':' {
			out = append(out, char)
		} else {
			out = append(out, '_')
		}
	}
	if !isLetter(out[0]) {
		out = append([]rune{'E'}, out...)
	}
	return strings.TrimRight(string(out), ",:")
}

func isLetter(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }

// String describes u for logs.
func (u Unavailable) String() string {
	return fmt.Sprintf("%s %s/%s/%s (%s) for %s", u.CapacityType, u.InstanceType, u.Family, u.Zone, u.Reason, u.TTL)
}
