package nodepoolstatus

import (
	"context"
	"fmt"

	"github.com/awslabs/operatorpkg/status"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// ConditionTypeQuotaAvailable is karpfunc's NodePool condition for the
// subscription's compute quota: False (ReasonQuotaExhausted) when quota
// left pending pods without an offering, its message naming each quota
// with its use, what is left and the increase to ask for. It is not one of
// the conditions Ready depends on: Karpenter's Ready is the NodePool's
// configuration, and quota is the subscription's.
const (
	ConditionTypeQuotaAvailable = "QuotaAvailable"
	ReasonQuotaExhausted        = "QuotaExhausted"
)

// SetQuotaCondition writes np's QuotaAvailable condition (available, or
// not with message) when it changes; np is updated in place. A True
// condition is only written over a False one: a NodePool quota never
// stopped carries none.
func SetQuotaCondition(ctx context.Context, kube client.Client, np *karpv1.NodePool, available bool, message string, clk clock.Clock) error {
	_, err := writeFresh(ctx, kube, np, func(p *karpv1.NodePool) bool {
		conds := p.StatusConditions(status.WithClock(clk))
		current := conds.Get(ConditionTypeQuotaAvailable)
		if available {
			if current == nil || current.IsTrue() {
				return false
			}
			return conds.SetTrue(ConditionTypeQuotaAvailable)
		}
		return conds.SetFalse(ConditionTypeQuotaAvailable, ReasonQuotaExhausted, message)
	})
	if err != nil {
		return fmt.Errorf("writing NodePool %s condition %s: %w", np.Name, ConditionTypeQuotaAvailable, err)
	}
	return nil
}
