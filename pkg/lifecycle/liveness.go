package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/awslabs/operatorpkg/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Reasons written on the NodePool's NodeRegistrationHealthy condition, as
// Karpenter writes them.
const (
	ReasonRegistrationFailed = "RegistrationFailed"
)

// LivenessResult says what a liveness check did.
type LivenessResult struct {
	Deleted    bool      // the NodeClaim did not register in time and was deleted
	RecheckAt  time.Time // the check came early and looks again then
	Registered bool      // nothing to do: the NodeClaim registered
	// Outcome holds the recheck (triggers.LivenessRecheck) for the caller
	// to send: the controller does not publish it.
	Outcome triggers.Outcome
}

// Liveness is the scheduled check at the end of a NodeClaim's registration
// timeout (Karpenter's liveness controller): a NodeClaim that launched but
// has not registered after RegistrationTTL is deleted, and its NodePool gets
// NodeRegistrationHealthy=False. uid guards against a NodeClaim that was
// deleted and created again under the same name.
func (c *Controller) Liveness(ctx context.Context, name, uid string) (LivenessResult, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return LivenessResult{}, nil
		}
		return LivenessResult{}, fmt.Errorf("reading NodeClaim %s: %w", name, err)
	}
	if (uid != "" && string(nc.UID) != uid) || nc.DeletionTimestamp != nil || !ownership.Owns(nc) {
		return LivenessResult{}, nil
	}
	if nc.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
		return LivenessResult{Registered: true}, nil
	}
	// The check is scheduled when the VM exists, just before Launched is
	// written. If that write failed, the launch's retry schedules the check
	// again under the same MessageId, which duplicate detection drops: so a
	// check that finds the NodeClaim not launched yet must look again
	// itself, or a VM that never joins would hold its pods forever.
	var left time.Duration
	if launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched); launched == nil || !launched.IsTrue() {
		left = c.regTTL
	} else {
		left = c.regTTL - c.clock.Since(launched.LastTransitionTime.Time)
	}
	if left > 0 {
		at := c.clock.Now().Add(left)
		return LivenessResult{RecheckAt: at, Outcome: triggers.Outcome{Continuations: []triggers.Continuation{
			triggers.LivenessRecheck(c.cluster, nc.Name, string(nc.UID), at)}}}, nil
	}
	if err := c.setRegistrationHealth(ctx, nc, false); err != nil {
		return LivenessResult{}, err
	}
	c.warn(ctx, nc, events.ReasonRegistrationTimeout, fmt.Sprintf("NodeClaim %s did not register within %s of its launch; deleting it", nc.Name, c.regTTL))
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
		return LivenessResult{}, fmt.Errorf("deleting NodeClaim %s after its registration timeout: %w", nc.Name, err)
	}
	c.log.Warn("nodeclaim did not register in time; deleted", "nodeclaim", nc.Name, "ttl", c.regTTL)
	RecordDisrupted(ctx, nc, DisruptedLiveness)
	return LivenessResult{Deleted: true}, nil
}

// setRegistrationHealth writes NodeRegistrationHealthy on the NodeClaim's
// NodePool (True after a registration, False after a registration timeout),
// only when it changes, guarded by resourceVersion.
func (c *Controller) setRegistrationHealth(ctx context.Context, nc *karpv1.NodeClaim, healthy bool) error {
	name := nc.Labels[karpv1.NodePoolLabelKey]
	if name == "" {
		return nil
	}
	for range 5 {
		np := &karpv1.NodePool{}
		if err := c.kube.Get(ctx, types.NamespacedName{Name: name}, np); err != nil {
			return client.IgnoreNotFound(err)
		}
		cond := np.StatusConditions(status.WithClock(c.clock)).Get(karpv1.ConditionTypeNodeRegistrationHealthy)
		if healthy && cond.IsTrue() || !healthy && cond.IsFalse() {
			return nil
		}
		stored := np.DeepCopy()
		if healthy {
			np.StatusConditions(status.WithClock(c.clock)).SetTrue(karpv1.ConditionTypeNodeRegistrationHealthy)
		} else {
			np.StatusConditions(status.WithClock(c.clock)).SetFalse(karpv1.ConditionTypeNodeRegistrationHealthy, ReasonRegistrationFailed,
				fmt.Sprintf("Failed to register node: NodeClaim %s did not register within %s", nc.Name, c.regTTL))
		}
		err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			continue
		default:
			return fmt.Errorf("writing NodePool %s NodeRegistrationHealthy: %w", name, client.IgnoreNotFound(err))
		}
	}
	return fmt.Errorf("writing NodePool %s NodeRegistrationHealthy: still conflicting after 5 attempts", name)
}

func (c *Controller) warn(ctx context.Context, obj client.Object, reason, msg string) {
	if err := c.recorder.Publish(ctx, events.Event{Object: obj, Type: "Warning", Reason: reason, Message: msg}); err != nil {
		c.log.Warn("writing event", "error", err)
	}
}
