package lifecycle

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/events"
)

// DrainPendingError means pods are still leaving the node; the caller should
// retry later (the message is redelivered), not treat it as a failure.
type DrainPendingError struct {
	Node      string
	Remaining int
}

func (e *DrainPendingError) Error() string {
	return fmt.Sprintf("node %s is draining: %d pods still terminating or blocked by a PodDisruptionBudget", e.Node, e.Remaining)
}

// NewDrainPendingError returns a DrainPendingError.
func NewDrainPendingError(node string, remaining int) error {
	return &DrainPendingError{Node: node, Remaining: remaining}
}

// IsDrainPending reports whether err is, or wraps, a DrainPendingError.
func IsDrainPending(err error) bool {
	var e *DrainPendingError
	return errors.As(err, &e)
}

// TerminateResult says what Terminate did.
type TerminateResult struct {
	Evicted  int
	Finished bool // VM deleted and finalizer removed
}

// Terminate finishes the deletion of a NodeClaim that has a deletion
// timestamp: taint its Node karpenter.sh/disrupted:NoSchedule, evict its pods
// through the Eviction API (so the API server enforces PDBs), delete the VM
// and NIC, delete the Node, and remove the termination finalizer. It returns
// a DrainPendingError while pods remain.
func (c *Controller) Terminate(ctx context.Context, name string) (TerminateResult, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return TerminateResult{Finished: true}, nil
		}
		return TerminateResult{}, fmt.Errorf("reading NodeClaim %s: %w", name, err)
	}
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return TerminateResult{}, nil // stale message: not being deleted, or already done
	}
	var res TerminateResult
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return res, err
	}
	if node != nil {
		if err := c.taintDisrupted(ctx, node); err != nil {
			return res, err
		}
		evicted, remaining, err := c.drain(ctx, node)
		res.Evicted = evicted
		if err != nil {
			return res, err
		}
		if remaining > 0 {
			return res, NewDrainPendingError(node.Name, remaining)
		}
	}
	if err := c.deleter.Delete(ctx, nc.Name); err != nil {
		return res, fmt.Errorf("deleting VM of NodeClaim %s: %w", nc.Name, err)
	}
	if node != nil {
		if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return res, fmt.Errorf("deleting node %s: %w", node.Name, err)
		}
	}
	stored := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, karpv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return res, fmt.Errorf("removing finalizer from NodeClaim %s: %w", nc.Name, err)
	}
	c.log.Info("terminated nodeclaim", "nodeclaim", nc.Name, "evicted", res.Evicted)
	res.Finished = true
	return res, nil
}

func (c *Controller) nodeFor(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if (nc.Status.ProviderID != "" && n.Spec.ProviderID == nc.Status.ProviderID) || (nc.Status.NodeName != "" && n.Name == nc.Status.NodeName) {
			return n, nil
		}
	}
	return nil, nil
}

func (c *Controller) taintDisrupted(ctx context.Context, node *corev1.Node) error {
	if hasTaint(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint) {
		return nil
	}
	stored := node.DeepCopy()
	node.Spec.Taints = append(node.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
	if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("tainting node %s disrupted: %w", node.Name, err)
	}
	return nil
}

// drain evicts every pod on node that is not a DaemonSet pod, not mirrored
// and not already terminating. It reports how many pods remain; a 429 from
// the Eviction API (a PodDisruptionBudget said no) counts as remaining.
func (c *Controller) drain(ctx context.Context, node *corev1.Node) (evicted, remaining int, err error) {
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return 0, 0, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !drainable(pod) {
			continue
		}
		remaining++
		if pod.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		switch err := c.kube.SubResource("eviction").Create(ctx, pod, ev); {
		case err == nil:
			evicted++
		case apierrors.IsNotFound(err):
			remaining--
		case apierrors.IsTooManyRequests(err):
			c.podEvent(ctx, pod, fmt.Sprintf("Eviction blocked by a PodDisruptionBudget while draining node %s", node.Name))
		default:
			return evicted, remaining, fmt.Errorf("evicting pod %s/%s from node %s: %w", pod.Namespace, pod.Name, node.Name, err)
		}
	}
	return evicted, remaining, nil
}

func drainable(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

func (c *Controller) podEvent(ctx context.Context, pod *corev1.Pod, msg string) {
	if err := c.recorder.Publish(ctx, events.Event{Object: pod, Type: corev1.EventTypeWarning, Reason: events.ReasonFailedDraining, Message: msg}); err != nil {
		c.log.Warn("writing event", "error", err)
	}
}
