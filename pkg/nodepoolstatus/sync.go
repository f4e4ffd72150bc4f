package nodepoolstatus

import (
	"context"
	"errors"
	"fmt"

	"github.com/awslabs/operatorpkg/status"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// Objects are the objects status is computed from, as one snapshot lists
// them.
type Objects struct {
	NodePools   []*karpv1.NodePool
	NodeClasses []*v1beta1.AKSNodeClass
	NodeClaims  []*karpv1.NodeClaim
}

// Synced is what a Sync wrote and found.
type Synced struct {
	// NotReady holds, for every NodePool that is not Ready, why (see
	// NotReadyReason); a NodePool not in it is Ready.
	NotReady map[string]string
	// BecameReady are NodePools that were not Ready before this Sync and
	// are now: their pending pods deserve a provisioning pass.
	BecameReady []string
	// Written counts the status writes.
	Written int
}

// Sync computes every AKSNodeClass's and NodePool's status from objs
// (ClassStatus, then PoolStatus against the fresh class statuses) and
// writes those that changed, with the objects' resourceVersion (after a
// Conflict the object is read again and its status recomputed). The objects in objs are updated
// in place, so the caller decides on what it just wrote. Writing nothing
// when nothing changed keeps an idle cluster idle.
func Sync(ctx context.Context, kube client.Client, objs Objects, opts ClassOptions, clk clock.Clock) (Synced, error) {
	out := Synced{NotReady: map[string]string{}}
	var errs []error
	if opts.Versions != nil {
		node, controlPlane, err := opts.Versions(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the Kubernetes versions for AKSNodeClass status: %w", err))
		} else {
			opts.KubernetesVersion = node
			opts.ControlPlaneVersion = controlPlane
		}
	}
	classes := map[string]*v1beta1.AKSNodeClass{}
	for _, class := range objs.NodeClasses {
		classes[class.Name] = class
		wrote, err := writeFresh(ctx, kube, class, func(c *v1beta1.AKSNodeClass) bool {
			want := ClassStatus(ctx, c, opts, clk)
			changed := !equality.Semantic.DeepEqual(c.Status, want)
			c.Status = want
			return changed
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("writing AKSNodeClass %s status: %w", class.Name, err))
		} else if wrote {
			out.Written++
		}
	}
	claims := make([]karpv1.NodeClaim, 0, len(objs.NodeClaims))
	for _, nc := range objs.NodeClaims {
		claims = append(claims, *nc)
	}
	for _, np := range objs.NodePools {
		wasReady := np.StatusConditions().Root().IsTrue()
		wrote, err := writeFresh(ctx, kube, np, func(p *karpv1.NodePool) bool {
			want := PoolStatus(ctx, p, classes, claims, clk)
			if opts.RefuseStatic {
				want = RefuseStatic(p, want, clk)
			}
			changed := !equality.Semantic.DeepEqual(p.Status, want)
			p.Status = want
			return changed
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("writing NodePool %s status: %w", np.Name, err))
		} else if wrote {
			out.Written++
		}
		if reason := NotReadyReason(np); reason != "" {
			out.NotReady[np.Name] = reason
		} else if !wasReady {
			out.BecameReady = append(out.BecameReady, np.Name)
		}
	}
	return out, errors.Join(errs...)
}

// writeFresh sets obj's status with set and, when set changed it, patches
// it guarded by resourceVersion; on a Conflict it reads obj again and starts
// over (a few times), so a concurrent writer's newer object is never
// overwritten with an older status. An object deleted meanwhile is not an
// error. obj ends as the object written (or read).
func writeFresh[T client.Object](ctx context.Context, kube client.Client, obj T, set func(T) bool) (bool, error) {
	for range 4 {
		stored := obj.DeepCopyObject().(T)
		if !set(obj) {
			return false, nil
		}
		err := kube.Status().Patch(ctx, obj, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, err
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	}
	return false, fmt.Errorf("still conflicting after 4 attempts")
}

// RefuseStatic returns st with ValidationSucceeded=False
// (staticcapacity.ReasonDisabled) when np sets spec.replicas, st unchanged
// otherwise: the status of a static NodePool while static capacity is off.
func RefuseStatic(np *karpv1.NodePool, st karpv1.NodePoolStatus, clk clock.Clock) karpv1.NodePoolStatus {
	if !staticcapacity.IsStatic(np) {
		return st
	}
	refused := np.DeepCopy()
	refused.Status = st
	refused.StatusConditions(status.WithClock(clk)).SetFalse(karpv1.ConditionTypeValidationSucceeded,
		staticcapacity.ReasonDisabled, staticcapacity.DisabledMessage(np))
	return refused.Status
}
