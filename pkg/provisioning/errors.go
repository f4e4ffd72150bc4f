package provisioning

import (
	"errors"
	"fmt"
)

// LimitExceededError means creating a NodeClaim would take its NodePool
// over spec.limits, counted against a fresh NodeClaim list: another pass
// created capacity this pass's snapshot did not see. The NodeClaim is not
// created; its pods wait for capacity to be freed.
type LimitExceededError struct {
	NodePool, NodeClaim string
	// Over lists the exceeded resources, "cpu 12 > 8".
	Over string
}

func (e *LimitExceededError) Error() string {
	return fmt.Sprintf("NodeClaim %s not created: NodePool %s would exceed its limits (%s)", e.NodeClaim, e.NodePool, e.Over)
}

// NewLimitExceededError returns a LimitExceededError.
func NewLimitExceededError(nodePool, nodeClaim, over string) error {
	return &LimitExceededError{NodePool: nodePool, NodeClaim: nodeClaim, Over: over}
}

// IsLimitExceeded reports whether err is, or wraps, a LimitExceededError.
func IsLimitExceeded(err error) bool {
	var exceeded *LimitExceededError
	return errors.As(err, &exceeded)
}

// NameRetiredError means a NodeClaim was not created because the name
// counter moved past its name's generation after the pass's view and no
// claim of that name exists: the name may have been used and removed since,
// and a name is never used twice. Its pods wait for the next pass, whose
// view starts above the counter.
type NameRetiredError struct {
	NodeClaim  string
	Generation int64
	Counter    int64
}

func (e *NameRetiredError) Error() string {
	return fmt.Sprintf("NodeClaim %s not created: the name counter is at %d, past the name's generation %d, since this pass looked (a concurrent pass created NodeClaims); a fresh pass names it again",
		e.NodeClaim, e.Counter, e.Generation)
}

// IsNameRetired reports whether err is, or wraps, a NameRetiredError.
func IsNameRetired(err error) bool {
	var retired *NameRetiredError
	return errors.As(err, &retired)
}
