package provisioning

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// DefaultLimitsLeaseDuration is how long a NodePool's limits lease is held
// at most: a pass that dies holding it blocks others for no longer.
const DefaultLimitsLeaseDuration = 10 * time.Second

// limitsLeasePoll is how often a pass looks again at a lease another holds.
const limitsLeasePoll = 50 * time.Millisecond

// limitGuard serializes the check-and-create of NodeClaims for NodePools
// that have limits, across passes and function instances, with one
// coordination.k8s.io Lease per NodePool ("karpfunc-limits-<nodepool>").
// Acquiring writes the holder with the Lease's resourceVersion as the
// precondition, so two passes cannot both hold it; a holder that crashed
// loses it when leaseDurationSeconds have passed since its renewTime.
// NodePools without limits never touch a Lease.
type limitGuard struct {
	kube      client.Client
	namespace string
	clock     clock.Clock
	duration  time.Duration
}

// guard runs fn while holding np's limits lease (or directly when np has no
// limits). It gives up with an error when the lease stays held by another
// pass for longer than twice the lease duration.
func (g *limitGuard) guard(ctx context.Context, np *karpv1.NodePool, fn func() error) error {
	if len(np.Spec.Limits) == 0 {
		return fn()
	}
	lease, err := g.acquire(ctx, np.Name)
	if err != nil {
		return err
	}
	defer g.release(context.WithoutCancel(ctx), lease)
	return fn()
}

// LimitsLeaseName is the Lease that serializes np's limit checks.
func LimitsLeaseName(nodePool string) string { return "karpfunc-limits-" + nodePool }

func (g *limitGuard) acquire(ctx context.Context, nodePool string) (*coordinationv1.Lease, error) {
	holder := newHolderID()
	key := client.ObjectKey{Namespace: g.namespace, Name: LimitsLeaseName(nodePool)}
	giveUp := g.clock.Now().Add(2 * g.duration)
	for {
		lease := &coordinationv1.Lease{}
		err := g.kube.Get(ctx, key, lease)
		now := metav1.NewMicroTime(g.clock.Now())
		seconds := int32(g.duration / time.Second)
		switch {
		case apierrors.IsNotFound(err):
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now}}
			err = g.kube.Create(ctx, lease)
		case err != nil:
		case g.free(lease):
			lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &seconds
			lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
			err = g.kube.Update(ctx, lease) // the resourceVersion read above is the precondition
		default:
			err = errLeaseHeld
		}
		switch {
		case err == nil:
			return lease, nil
		case errors.Is(err, errLeaseHeld) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			if g.clock.Now().After(giveUp) {
				return nil, fmt.Errorf("NodePool %s: Lease %s/%s that serializes limit checks is still held by %s; a later pass retries",
					nodePool, key.Namespace, key.Name, holderOf(lease))
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-g.clock.After(limitsLeasePoll):
			}
		default:
			return nil, fmt.Errorf("NodePool %s: taking Lease %s/%s that serializes limit checks: %w", nodePool, key.Namespace, key.Name, err)
		}
	}
}

var errLeaseHeld = fmt.Errorf("lease held")

// free reports whether nobody holds lease or its holder's time is up.
func (g *limitGuard) free(lease *coordinationv1.Lease) bool {
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return true
	}
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	return !g.clock.Now().Before(expires)
}

// release clears the holder; if that fails the lease simply expires.
func (g *limitGuard) release(ctx context.Context, lease *coordinationv1.Lease) {
	empty := ""
	lease.Spec.HolderIdentity = &empty
	_ = g.kube.Update(ctx, lease)
}

func holderOf(lease *coordinationv1.Lease) string {
	if lease == nil || lease.Spec.HolderIdentity == nil {
		return "another pass"
	}
	return *lease.Spec.HolderIdentity
}

func newHolderID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "provision-" + hex.EncodeToString(b[:])
}
