package lifecycle

import (
	"errors"
	"fmt"
)

// InsufficientCapacityError means no offering of a NodeClaim could be
// launched: every one tried failed with a capacity or quota error, or none
// is left available. The NodeClaim is deleted and its pods provisioned again.
type InsufficientCapacityError struct {
	NodeClaim string
	Reason    string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("NodeClaim %s: insufficient capacity: %s", e.NodeClaim, e.Reason)
}

// NewInsufficientCapacityError returns an InsufficientCapacityError.
func NewInsufficientCapacityError(nodeClaim, format string, args ...any) error {
	return &InsufficientCapacityError{NodeClaim: nodeClaim, Reason: fmt.Sprintf(format, args...)}
}

// IsInsufficientCapacity reports whether err is, or wraps, an InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var capacity *InsufficientCapacityError
	return errors.As(err, &capacity)
}

// LaunchFailedError means a NodeClaim's launch failed for a reason other
// than capacity (ARM's code in Reason) often enough that it is given up.
type LaunchFailedError struct {
	NodeClaim string
	Reason    string
	Message   string
}

func (e *LaunchFailedError) Error() string {
	return fmt.Sprintf("NodeClaim %s: launch failed (%s): %s", e.NodeClaim, e.Reason, e.Message)
}

// NewLaunchFailedError returns a LaunchFailedError.
func NewLaunchFailedError(nodeClaim, reason, message string) error {
	return &LaunchFailedError{NodeClaim: nodeClaim, Reason: reason, Message: message}
}
