package disruption

import (
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Expiration is not a budgeted method: a NodeClaim past expireAfter is
// deleted forcefully (Decision.Expired), its pods evicted through the
// termination path, which honours terminationGracePeriod; Provision
// places them again.

// expiresAt is when nc expires; false when expireAfter is Never.
func expiresAt(nc *karpv1.NodeClaim) (time.Time, bool) {
	if nc.Spec.ExpireAfter.Duration == nil {
		return time.Time{}, false
	}
	return nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration), true
}

// ExpiresAt is exported for the Disruption function.
func ExpiresAt(nc *karpv1.NodeClaim) (time.Time, bool) { return expiresAt(nc) }
