package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// DrainPendingError means pods are still leaving the node; the caller should
// look again later (ScheduleTerminate, after DrainRetryDelay), not treat it
// as a failure.
type DrainPendingError struct {
	Node      string
	Remaining int
	// Blocked counts the evictions a PodDisruptionBudget refused in this pass.
	Blocked int
	// RetryAfter is the shortest Retry-After the API server suggested for
	// those refusals (EvictionBlockedError.RetryAfter); 0 if it gave none.
	RetryAfter time.Duration
	// ForceIn, for an interrupted NodeClaim, is the time left until the
	// deadline overrides PodDisruptionBudgets (InterruptionForceWindow
	// before it); the next pass must not come later.
	ForceIn time.Duration
	// Interrupted: the NodeClaim drains against a spot interruption deadline.
	Interrupted bool
}

func (e *DrainPendingError) Error() string {
	msg := fmt.Sprintf("node %s is draining: %d pods still terminating or blocked by a PodDisruptionBudget", e.Node, e.Remaining)
	if e.Blocked > 0 {
		msg += fmt.Sprintf(" (%d evictions refused", e.Blocked)
		if e.RetryAfter > 0 {
			msg += fmt.Sprintf("; the API server suggests retrying after %s", e.RetryAfter)
		}
		msg += ")"
	}
	return msg
}

// InstanceDeletePendingError means the NodeClaim's VM (or its NIC) is
// being deleted: the termination looks again after RetryAfter rather than
// wait inside the invocation, and the finalizer stays until both are gone.
type InstanceDeletePendingError struct {
	NodeClaim  string
	RetryAfter time.Duration
}

func (e *InstanceDeletePendingError) Error() string {
	return fmt.Sprintf("the VM of NodeClaim %s is being deleted; its finalizer stays until the VM and NIC are gone", e.NodeClaim)
}

// IsInstanceDeletePending reports whether err is, or wraps, an
// InstanceDeletePendingError.
func IsInstanceDeletePending(err error) bool {
	var pending *InstanceDeletePendingError
	return errors.As(err, &pending)
}

// NewDrainPendingError returns a DrainPendingError.
func NewDrainPendingError(node string, remaining int) error {
	return &DrainPendingError{Node: node, Remaining: remaining}
}

// IsDrainPending reports whether err is, or wraps, a DrainPendingError.
func IsDrainPending(err error) bool {
	var pending *DrainPendingError
	return errors.As(err, &pending)
}

// TerminateResult says what Terminate did.
type TerminateResult struct {
	Evicted int
	Deleted int // pods deleted because the NodeClaim's terminationGracePeriod ran out
	// Blocked counts evictions the API server refused with 429 (a
	// PodDisruptionBudget said no, or its status is not observed yet).
	Blocked  int
	Finished bool // VM deleted and finalizer removed
	// GracePeriodExpired: the NodeClaim's terminationGracePeriod ran out and
	// the VM was deleted with pods still on it.
	GracePeriodExpired bool
	// Outcome holds the provisioning pass a finished termination asks for
	// (its pods are pending again), for the caller to send.
	Outcome triggers.Outcome
}

// Terminate finishes the deletion of a NodeClaim that has a deletion
// timestamp: taint its Node karpenter.sh/disrupted:NoSchedule, drain it
// through the Eviction API (so the API server enforces PDBs) in Karpenter's
// order — non-critical pods, then non-critical DaemonSet pods, then critical
// pods, then critical DaemonSet pods, each group only once the one before is
// gone — delete the VM and NIC, delete the Node, and remove the termination
// finalizer. It returns a DrainPendingError while pods remain.
//
// spec.terminationGracePeriod bounds it: a pod is deleted (PDBs bypassed)
// when only its own terminationGracePeriodSeconds is left before the
// NodeClaim's grace period ends, and once it has ended the VM goes whatever
// is still running. karpenter.sh/do-not-disrupt, on the node or a pod, does
// not block an explicit deletion: it guards against voluntary disruption.
func (c *Controller) Terminate(ctx context.Context, name string) (TerminateResult, error) {
	nc, gone, err := c.terminating(ctx, name)
	if nc == nil || err != nil {
		return TerminateResult{Finished: gone}, err
	}
	var res TerminateResult
	expire, interrupted := terminationDeadline(nc)
	node, err := c.nodeFor(ctx, nc)
	if err != nil {
		return res, err
	}
	if node == nil && interrupted && nc.Status.NodeName != "" {
		// The VM and its Node are gone already: nothing drains; the pods
		// bound to it go now so they are recreated elsewhere.
		n, err := c.forceDeleteOrphans(ctx, nc.Status.NodeName)
		res.Deleted += n
		if err != nil {
			return res, err
		}
	}
	if node != nil {
		if err := c.drainPhase(ctx, nc, node, expire, interrupted, &res); err != nil {
			return res, err
		}
	}
	if err := c.deletePhase(ctx, nc, node, interrupted, &res); err != nil {
		return res, err
	}
	err = c.release(ctx, nc, &res)
	return res, err
}

// terminating reads NodeClaim name and returns it when its termination is
// ours to finish: being deleted, with the termination finalizer, owned by
// karpfunc. Nil otherwise: gone (true), a stale message or another
// controller's NodeClaim.
func (c *Controller) terminating(ctx context.Context, name string) (*karpv1.NodeClaim, bool, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("reading NodeClaim %s: %w", name, err)
	}
	if nc.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return nil, false, nil // stale message: not being deleted, or already done
	}
	if !ownership.Owns(nc) {
		return nil, false, nil // another controller's NodeClaim: its finalizer is theirs to release
	}
	return nc, false, nil
}

// terminationDeadline is when the VM goes whatever still runs on it: the
// end of spec.terminationGracePeriod, or a spot interruption's or a
// repair's deadline when that is earlier (nil: no deadline); interrupted
// says the NodeClaim has one of those.
func terminationDeadline(nc *karpv1.NodeClaim) (*time.Time, bool) {
	var expire *time.Time
	if nc.Spec.TerminationGracePeriod != nil {
		graceEnd := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration)
		expire = &graceEnd
	}
	// A spot interruption's or a repair's deadline is harder than any
	// grace period: the VM goes then whatever is still on it.
	deadline, interrupted := forcedDeadline(nc)
	if interrupted && (expire == nil || deadline.Before(*expire)) {
		expire = &deadline
	}
	return expire, interrupted
}

// drainPhase taints node and drains it, unless expire has passed; a
// DrainPendingError while pods remain.
func (c *Controller) drainPhase(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, expire *time.Time, interrupted bool, res *TerminateResult) error {
	node, err := c.taintDisrupted(ctx, node)
	if err != nil {
		return err
	}
	if expire != nil && !c.clock.Now().Before(*expire) {
		res.GracePeriodExpired = true
		c.log.Warn("terminationGracePeriod ran out; deleting the instance with pods still on it", "nodeclaim", nc.Name, "node", node.Name)
		return nil
	}
	drained, err := c.drain(ctx, node, expire, interrupted)
	res.Evicted, res.Deleted, res.Blocked = drained.evicted, drained.deleted, drained.blocked
	if err != nil || drained.remaining == 0 {
		return err
	}
	pending := &DrainPendingError{Node: node.Name, Remaining: drained.remaining, Blocked: drained.blocked, RetryAfter: drained.retryAfter}
	if interrupted {
		pending.Interrupted = true
		pending.ForceIn = max(expire.Add(-InterruptionForceWindow).Sub(c.clock.Now()), 0)
	}
	return pending
}

// deletePhase deletes the VM and NIC (an InstanceDeletePendingError until
// both are gone), then the Node, then, for an interrupted NodeClaim whose
// deadline passed, the pods still bound to it.
func (c *Controller) deletePhase(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node, interrupted bool, res *TerminateResult) error {
	gone, err := c.deleter.DeleteStep(ctx, nc.Name)
	if err != nil {
		return fmt.Errorf("deleting VM of NodeClaim %s: %w", nc.Name, err)
	}
	if !gone {
		return &InstanceDeletePendingError{NodeClaim: nc.Name, RetryAfter: c.deleteChk}
	}
	if node == nil {
		return nil
	}
	if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting node %s: %w", node.Name, err)
	}
	if interrupted && res.GracePeriodExpired {
		n, err := c.forceDeleteOrphans(ctx, node.Name)
		res.Deleted += n
		return err
	}
	return nil
}

// release retires the NodeClaim's name generation, removes its finalizer
// and asks for a provisioning pass.
func (c *Controller) release(ctx context.Context, nc *karpv1.NodeClaim, res *TerminateResult) error {
	// The name's generation is retired before the finalizer goes (the name
	// is free at the API server only then): no later pass derives the name
	// again, even when the pass that created the claim died before
	// retiring it (package claimnames).
	if generation, ok := claimnames.GenerationOf(nc); ok {
		if err := c.names.Retire(ctx, generation); err != nil {
			return fmt.Errorf("NodeClaim %s keeps its finalizer until its name is retired: %w", nc.Name, err)
		}
	}
	// The finalizer goes with an optimistic lock, so a finalizer another
	// controller added meanwhile is not dropped; on a conflict it is removed
	// from the re-read NodeClaim.
	if _, _, err := converge(ctx, c.kube, nc, newNodeClaim, writeObject, func(cur *karpv1.NodeClaim) bool {
		return controllerutil.RemoveFinalizer(cur, karpv1.TerminationFinalizer)
	}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer from NodeClaim %s: %w", nc.Name, err)
	}
	c.log.Info("terminated nodeclaim", "nodeclaim", nc.Name, "evicted", res.Evicted)
	recordTerminated(ctx, nc)
	if err := nodepoolstatus.Update(ctx, c.kube, nc.Labels[karpv1.NodePoolLabelKey]); err != nil {
		c.log.Warn("updating nodepool resources", "error", err)
	}
	res.Finished = true
	// Pods that were waiting for this NodeClaim (it never got a node, or
	// its pods were evicted) are pending again; kube-scheduler will not mark
	// them again, so ask for a provisioning pass rather than wait for the
	// relay's resync.
	res.Outcome.Then(triggers.ProvisionPass(c.cluster, "after-termination", c.clock.Now(), time.Second))
	return nil
}

// DrainRetry is the controller's drain retry delay.
func (c *Controller) DrainRetry() time.Duration { return c.drainRetry }

// Bounds on a Retry-After the API server suggests for a refused eviction.
// Below MinDrainRetry a retry would hammer the API server with evictions the
// PDB refuses; above MaxDrainRetry a budget that frees up (a replacement
// pod turned Ready) would leave the node draining for longer than the
// fixed retry ever would.
const (
	MinDrainRetry = time.Second
	MaxDrainRetry = time.Minute
)

// DrainRetryDelay is when to look at a pending drain again: the API
// server's Retry-After for the refused evictions (a DrainPendingError's or
// an EvictionBlockedError's RetryAfter), bounded to [MinDrainRetry,
// MaxDrainRetry]; fallback (the controller's DrainRetry) when err carries
// no suggestion, e.g. pods that are only still terminating.
func DrainRetryDelay(err error, fallback time.Duration) time.Duration {
	var suggested, forceIn time.Duration
	var pending *DrainPendingError
	var blocked *EvictionBlockedError
	switch {
	case errors.As(err, &pending):
		suggested, forceIn = pending.RetryAfter, pending.ForceIn
	case errors.As(err, &blocked):
		suggested = blocked.RetryAfter
	}
	delay := fallback
	if suggested > 0 {
		delay = min(max(suggested, MinDrainRetry), MaxDrainRetry)
	}
	if pending != nil && pending.Interrupted {
		delay = min(delay, max(forceIn, MinDrainRetry))
	}
	return delay
}

func (c *Controller) nodeFor(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	// Registered NodeClaims name their Node: one GET instead of listing
	// every Node on each drain pass.
	if nc.Status.NodeName != "" {
		node := &corev1.Node{}
		err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node)
		if err == nil {
			return node, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading node %s: %w", nc.Status.NodeName, err)
		}
	}
	// Not registered (or its Node is gone): a Node may still have joined
	// under the NodeClaim's providerID.
	if nc.Status.ProviderID == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.kube.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == nc.Status.ProviderID {
			return &nodes.Items[i], nil
		}
	}
	return nil, nil
}

// taintDisrupted keeps new pods off the node while it drains; the write
// converges on a conflict (a heartbeat bumped the Node's resourceVersion).
func (c *Controller) taintDisrupted(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	node, _, err := converge(ctx, c.kube, node, newNode, writeObject, func(n *corev1.Node) bool {
		if hasTaint(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint) {
			return false
		}
		n.Spec.Taints = append(n.Spec.Taints, karpv1.DisruptedNoScheduleTaint)
		return true
	})
	if err != nil {
		return node, fmt.Errorf("tainting node %s disrupted: %w", node.Name, err)
	}
	return node, nil
}

type drainResult struct {
	evicted, deleted, blocked, remaining int
	// retryAfter is the shortest positive Retry-After among the refused
	// evictions: the earliest moment the API server expects one of them
	// could go, so the next pass is not later than needed.
	retryAfter time.Duration
}

// drain makes one pass over the pods on node: pods whose time under the
// NodeClaim's grace period has come are deleted, and the first non-empty
// priority group is evicted. remaining counts every pod still waiting to
// leave; a 429 from the Eviction API (a PodDisruptionBudget said no) leaves
// the pod remaining and counts it blocked.
//
// interrupted (a spot interruption's deadline is expire) changes three
// things: every pod is evicted at once, all priority groups together (the
// notice is too short for one group after another); each eviction carries
// the pod's grace period capped to the time left (DeleteOptions on the
// Eviction); and PodDisruptionBudgets are honoured until
// InterruptionForceWindow before the deadline, then the pods still there
// are deleted.
func (c *Controller) drain(ctx context.Context, node *corev1.Node, expire *time.Time, interrupted bool) (drainResult, error) {
	var drained drainResult
	if c.evict == nil {
		return drained, errors.New("draining node " + node.Name + ": the lifecycle controller has no Evictor (lifecycle.Options.Evictor, built by lifecycle.NewEvictor)")
	}
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
		return drained, fmt.Errorf("listing pods on node %s: %w", node.Name, err)
	}
	now := c.clock.Now()
	var waiting []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if waitingEviction(pod, now) {
			waiting = append(waiting, pod)
		}
	}
	drained.remaining = len(waiting)
	if expire != nil {
		if err := c.deleteOverdue(ctx, node, waiting, *expire, interrupted, now, &drained); err != nil {
			return drained, err
		}
	}
	groups := groupByPriority(waiting)
	if interrupted {
		groups = [][]*corev1.Pod{waiting}
	}
	for _, group := range groups {
		if len(group) > 0 {
			// The next group waits until this one is gone.
			err := c.evictGroup(ctx, node, group, expire, interrupted, now, &drained)
			return drained, err
		}
	}
	return drained, nil
}

// deleteOverdue deletes the waiting pods whose time is up before expire
// (their own grace period, or InterruptionForceWindow before an
// interruption's deadline), bypassing PodDisruptionBudgets.
func (c *Controller) deleteOverdue(ctx context.Context, node *corev1.Node, waiting []*corev1.Pod, expire time.Time, interrupted bool, now time.Time, d *drainResult) error {
	for _, pod := range waiting {
		if pod.DeletionTimestamp != nil || (pod.Spec.TerminationGracePeriodSeconds == nil && !interrupted) {
			continue
		}
		var deleteAt time.Time
		if interrupted {
			deleteAt = expire.Add(-InterruptionForceWindow)
		} else {
			deleteAt = expire.Add(-time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second)
		}
		if now.Before(deleteAt) {
			continue
		}
		grace := max(int64(expire.Sub(now).Seconds()), 1) // never 0: that would force-delete from etcd
		if err := c.kube.Delete(ctx, pod, client.GracePeriodSeconds(grace)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s as node %s's grace period ends: %w", pod.Namespace, pod.Name, node.Name, err)
		}
		d.deleted++
		pod.DeletionTimestamp = &metav1.Time{Time: now}
		msg := fmt.Sprintf("Deleting the pod to accommodate the terminationTime %s of the node; the pod was granted %ds of grace-period. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
			expire.UTC().Format(time.RFC3339), grace)
		if interrupted {
			msg = fmt.Sprintf("Deleting the pod: the spot VM under node %s is preempted at %s; the pod was granted %ds of grace-period. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
				node.Name, expire.UTC().Format(time.RFC3339), grace)
		}
		c.podEvent(ctx, pod, corev1.EventTypeWarning, events.ReasonDisrupted, msg)
	}
	return nil
}

// evictGroup evicts the pods of group not already leaving through the
// Eviction API, counting evictions, pods gone and PDB refusals in d.
func (c *Controller) evictGroup(ctx context.Context, node *corev1.Node, group []*corev1.Pod, expire *time.Time, interrupted bool, now time.Time, d *drainResult) error {
	for _, pod := range group {
		if pod.DeletionTimestamp != nil {
			continue // already leaving
		}
		eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		if interrupted {
			grace := interruptionEviction(pod, expire.Sub(now))
			eviction.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: &grace}
		}
		var blocked *EvictionBlockedError
		switch err := c.evict(ctx, eviction); {
		case err == nil:
			d.evicted++
			c.podEvent(ctx, pod, corev1.EventTypeNormal, events.ReasonEvicted, "Evicted pod: draining node "+node.Name)
		case apierrors.IsNotFound(err):
			d.remaining--
		case errors.As(err, &blocked):
			d.blocked++
			if r := blocked.RetryAfter; r > 0 && (d.retryAfter == 0 || r < d.retryAfter) {
				d.retryAfter = r
			}
			c.podEvent(ctx, pod, corev1.EventTypeWarning, events.ReasonFailedDraining,
				fmt.Sprintf("Eviction blocked by a PodDisruptionBudget while draining node %s", node.Name))
		default:
			return fmt.Errorf("evicting pod %s/%s from node %s: %w", pod.Namespace, pod.Name, node.Name, err)
		}
	}
	return nil
}

// waitingEviction is Karpenter's test for a pod the drain waits on: not
// terminal, not a mirror (node-owned) pod, not tolerating the disrupted
// taint, and not stuck terminating (deleted over a minute ago).
func waitingEviction(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, owner := range pod.OwnerReferences {
		if owner.Kind == "Node" && owner.APIVersion == "v1" {
			return false
		}
	}
	if scheduling.Taints([]corev1.Taint{karpv1.DisruptedNoScheduleTaint}).ToleratesPod(pod) == nil {
		return false
	}
	if pod.DeletionTimestamp != nil && now.Sub(pod.DeletionTimestamp.Time) > time.Minute {
		return false
	}
	return true
}

// groupByPriority is Karpenter's drain order, after graceful node shutdown.
func groupByPriority(pods []*corev1.Pod) [][]*corev1.Pod {
	var nonCritical, nonCriticalDaemon, critical, criticalDaemon []*corev1.Pod
	for _, pod := range pods {
		crit := pod.Spec.PriorityClassName == "system-cluster-critical" || pod.Spec.PriorityClassName == "system-node-critical"
		daemon := false
		for _, owner := range pod.OwnerReferences {
			if owner.Kind == "DaemonSet" {
				daemon = true
			}
		}
		switch {
		case crit && daemon:
			criticalDaemon = append(criticalDaemon, pod)
		case crit:
			critical = append(critical, pod)
		case daemon:
			nonCriticalDaemon = append(nonCriticalDaemon, pod)
		default:
			nonCritical = append(nonCritical, pod)
		}
	}
	return [][]*corev1.Pod{nonCritical, nonCriticalDaemon, critical, criticalDaemon}
}

func (c *Controller) podEvent(ctx context.Context, pod *corev1.Pod, typ, reason, msg string) {
	if err := c.recorder.Publish(ctx, events.Event{Object: pod, Type: typ, Reason: reason, Message: msg}); err != nil {
		c.log.Warn("writing event", "error", err)
	}
}
