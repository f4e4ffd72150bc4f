package lifecycle

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// writeTarget says which part of an object a converging write patches.
type writeTarget int

const (
	writeObject writeTarget = iota // metadata and spec
	writeStatus                    // the status subresource
)

// converge applies mutate to obj and patches the difference with an
// optimistic lock (the patch carries obj's resourceVersion). When the API
// server answers 409 Conflict — kwok/kubelet heartbeats, the launch path or
// another delivery of the same event wrote the object since it was read —
// it reads the object again into a fresh fresh() value and re-applies
// mutate to what is stored now, up to retry.DefaultRetry's five attempts.
//
// So the write still never clobbers a concurrent one (each attempt is
// guarded by the resourceVersion it read), but a lost race costs a GET and a
// few milliseconds inside the invocation instead of a failed invocation and
// a redelivery. mutate must be a pure function of the object it is given:
// it returns false when the object already says what it would write (then
// nothing is written), which also makes it decide again on fresh state, e.g.
// "is the Node still Ready?" before labelling it initialized.
//
// It returns the object as last read or written, and whether this call
// wrote it. A conflict on every attempt comes back as the API server's
// Conflict error (apierrors.IsConflict), wrapped with the attempt count.
func converge[T client.Object](ctx context.Context, kube client.Client, obj T, fresh func() T, target writeTarget, mutate func(T) bool) (T, bool, error) {
	cur, wrote, attempts := obj, false, 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempts > 0 {
			// A fresh value, not cur: decoding into an object that still
			// holds this attempt's mutation would merge its maps (labels,
			// annotations) into what the server returns.
			next := fresh()
			if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), next); err != nil {
				return err
			}
			cur = next
		}
		attempts++
		stored, ok := cur.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("copying %T: DeepCopyObject returned %T", cur, cur.DeepCopyObject())
		}
		if !mutate(cur) {
			return nil
		}
		patch := client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})
		var err error
		if target == writeStatus {
			err = kube.Status().Patch(ctx, cur, patch)
		} else {
			err = kube.Patch(ctx, cur, patch)
		}
		if err == nil {
			wrote = true
		}
		return err
	})
	if err != nil && attempts > 1 {
		err = fmt.Errorf("after %d attempts: %w", attempts, err)
	}
	return cur, wrote, err
}

// WriteNodeClaimStatus is converge on a NodeClaim's status, for the other
// functions that write NodeClaim conditions: a status patch computed from
// an older read would replace the whole conditions list, erasing what
// another function wrote meanwhile (an Interruption's DisruptionReason,
// say), so every such write goes through the optimistic lock. It writes a
// copy of nc and leaves nc as it was: the callers hold NodeClaims a warm
// snapshot shares with its cache (package snapshot); what was written
// comes back.
func WriteNodeClaimStatus(ctx context.Context, kube client.Client, nc *karpv1.NodeClaim, mutate func(*karpv1.NodeClaim) bool) (*karpv1.NodeClaim, bool, error) {
	return converge(ctx, kube, nc.DeepCopy(), newNodeClaim, writeStatus, mutate)
}
