package nodepoolstatus

import (
	"context"
	"fmt"

	"github.com/awslabs/operatorpkg/status"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// ConditionTypeNodeRepairBlocked is karpfunc's NodePool condition for
// node repair: True (reason ReasonTooManyUnhealthy) while more than 20 %
// of the NodePool's nodes are unhealthy and repair holds off, its message
// counting them; False once a repair in the pool goes ahead again.
// Karpenter reports the same only as NodeRepairBlocked events; the
// condition keeps it visible on the NodePool. It is not one of the
// conditions Ready depends on.
const (
	ConditionTypeNodeRepairBlocked = "NodeRepairBlocked"
	ReasonTooManyUnhealthy         = "TooManyUnhealthyNodes"
	ReasonRepairAllowed            = "RepairAllowed"
)

// SetRepairBlocked writes np's NodeRepairBlocked condition when it changes:
// True with message when blocked; False only over a True one (a NodePool
// whose repair was never blocked carries none).
func SetRepairBlocked(ctx context.Context, kube client.Client, np *karpv1.NodePool, blocked bool, message string, clk clock.Clock) error {
	_, err := writeFresh(ctx, kube, np, func(p *karpv1.NodePool) bool {
		conds := p.StatusConditions(status.WithClock(clk))
		current := conds.Get(ConditionTypeNodeRepairBlocked)
		if !blocked {
			if current == nil || current.IsFalse() {
				return false
			}
			return conds.SetFalse(ConditionTypeNodeRepairBlocked, ReasonRepairAllowed, "repair is allowed: at most 20% of the NodePool's nodes are unhealthy")
		}
		return conds.SetTrueWithReason(ConditionTypeNodeRepairBlocked, ReasonTooManyUnhealthy, message)
	})
	if err != nil {
		return fmt.Errorf("writing NodePool %s condition %s: %w", np.Name, ConditionTypeNodeRepairBlocked, err)
	}
	return nil
}
