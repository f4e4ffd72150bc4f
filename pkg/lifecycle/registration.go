package lifecycle

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/events"
)

// NodeResult says what NodeChanged did.
type NodeResult = Result

// NodeChanged reconciles the NodeClaim behind a Node that joined or
// changed: its launch (a Node joining completes a launch whose check is not
// due yet), registration and initialization. A Node that no NodeClaim
// launched (not ours) is left alone.
func (c *Controller) NodeChanged(ctx context.Context, nodeName string) (NodeResult, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return NodeResult{}, nil // gone already: nothing to register
		}
		return NodeResult{}, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	nc, err := c.nodeClaimForProviderID(ctx, node.Spec.ProviderID)
	if err != nil {
		return NodeResult{}, err
	}
	if nc == nil {
		if nc, err = c.launchingNodeClaim(ctx, node); err != nil || nc == nil {
			return NodeResult{}, err
		}
	}
	if nc.DeletionTimestamp != nil {
		return NodeResult{NodeClaim: nc.Name}, nil
	}
	return c.reconcile(ctx, &claim{nc: nc, node: node, res: Result{NodeClaim: nc.Name}})
}

// launchingNodeClaim is the NodeClaim a Node joined for before its launch
// was recorded: named like the Node (the VM's computer name) and not
// Launched yet. The launch reconciler then confirms it from the VM.
func (c *Controller) launchingNodeClaim(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	if node.Spec.ProviderID == "" || c.launch == nil {
		return nil, nil
	}
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: node.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading NodeClaim %s: %w", node.Name, err)
	}
	if nc.Status.ProviderID != "" || nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		return nil, nil // launched as another VM: not this Node's
	}
	return nc, nil
}

// register syncs the NodeClaim's labels and taints onto the Node, removes the
// unregistered taint, makes the NodeClaim the Node's owner (so the Node goes
// when the NodeClaim does), then records Registered and nodeName. Both writes
// converge on a conflict (see converge), so a heartbeat that bumps the Node's
// resourceVersion between the read and the patch costs a re-read, not the
// invocation. It returns the Node and NodeClaim as stored after its writes,
// and whether this call recorded Registered (false: a concurrent delivery
// did it first).
func (c *Controller) register(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (*karpv1.NodeClaim, *corev1.Node, bool, error) {
	node, _, err := converge(ctx, c.kube, node, newNode, writeObject, func(n *corev1.Node) bool { return syncNode(n, nc) })
	if err != nil {
		return nc, node, false, fmt.Errorf("syncing node %s for NodeClaim %s: %w", node.Name, nc.Name, err)
	}
	nc, wrote, err := converge(ctx, c.kube, nc, newNodeClaim, writeStatus, func(cur *karpv1.NodeClaim) bool {
		if cur.Status.NodeName == node.Name && cur.StatusConditions().Get(karpv1.ConditionTypeRegistered).IsTrue() {
			return false
		}
		cur.Status.NodeName = node.Name
		cur.StatusConditions().SetTrue(karpv1.ConditionTypeRegistered)
		return true
	})
	if err != nil {
		return nc, node, false, fmt.Errorf("marking NodeClaim %s registered: %w", nc.Name, err)
	}
	if !wrote {
		return nc, node, false, nil
	}
	c.log.Info("registered nodeclaim", "nodeclaim", nc.Name, "node", node.Name)
	if err := c.setRegistrationHealth(ctx, nc, true); err != nil {
		c.log.Warn("marking nodepool registration healthy", "nodepool", nc.Labels[karpv1.NodePoolLabelKey], "error", err)
	}
	c.event(ctx, nc, events.ReasonRegistered, fmt.Sprintf("Status condition transitioned, Type: Registered, Status: True, Node: %s", node.Name))
	return nc, node, true, nil
}

// syncNode makes node carry what registration puts on it for nc; it reports
// whether anything changed.
func syncNode(node *corev1.Node, nc *karpv1.NodeClaim) bool {
	before := node.DeepCopy()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for key, value := range nc.Labels {
		node.Labels[key] = value
	}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	if len(nc.Annotations) > 0 && node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for key, value := range nc.Annotations {
		node.Annotations[key] = value
	}
	var taints []corev1.Taint
	for _, taint := range node.Spec.Taints {
		if taint.MatchTaint(&karpv1.UnregisteredNoExecuteTaint) {
			continue
		}
		taints = append(taints, taint)
	}
	if node.Labels[karpv1.NodeDoNotSyncTaintsLabelKey] != "true" {
		for _, want := range nc.Spec.Taints {
			if !hasTaint(taints, want) {
				taints = append(taints, want)
			}
		}
	}
	node.Spec.Taints = taints
	if !hasOwner(node, nc) {
		node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{
			APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr(true),
		})
	}
	return !equality.Semantic.DeepEqual(before, node)
}

// initialize marks the NodeClaim Initialized once its Node is Ready, no
// startup taint or unregistered taint remains, and every extended resource
// the NodeClaim asked for is allocatable — Karpenter's definition, which is
// what makes a node count as real capacity. The test runs again on the
// re-read Node when the label write conflicts: the Node that changed under
// us may have gone NotReady or got a startup taint back.
func (c *Controller) initialize(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) (bool, error) {
	reason := ""
	node, _, err := converge(ctx, c.kube, node, newNode, writeObject, func(n *corev1.Node) bool {
		if reason = notInitializedReason(nc, n); reason != "" {
			return false
		}
		if n.Labels[karpv1.NodeInitializedLabelKey] == "true" {
			return false
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[karpv1.NodeInitializedLabelKey] = "true"
		return true
	})
	if err != nil {
		return false, fmt.Errorf("labelling node %s initialized: %w", node.Name, err)
	}
	if reason != "" {
		c.log.Debug("nodeclaim not initialized yet", "nodeclaim", nc.Name, "reason", reason)
		return false, c.markNotInitialized(ctx, nc, node)
	}
	nc, wrote, err := converge(ctx, c.kube, nc, newNodeClaim, writeStatus, func(cur *karpv1.NodeClaim) bool {
		if cur.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			return false // a concurrent delivery initialized it
		}
		// What the kubelet reports is the truth about the node's resources.
		if len(node.Status.Capacity) > 0 {
			cur.Status.Capacity = node.Status.Capacity.DeepCopy()
		}
		if len(node.Status.Allocatable) > 0 {
			cur.Status.Allocatable = node.Status.Allocatable.DeepCopy()
		}
		cur.StatusConditions().SetTrue(karpv1.ConditionTypeInitialized)
		return true
	})
	if err != nil {
		return false, fmt.Errorf("marking NodeClaim %s initialized: %w", nc.Name, err)
	}
	if !wrote {
		return false, nil
	}
	c.log.Info("initialized nodeclaim", "nodeclaim", nc.Name, "node", node.Name)
	c.event(ctx, nc, events.ReasonInitialized, fmt.Sprintf("Status condition transitioned, Type: Initialized, Status: True, Node: %s", node.Name))
	return true, nil
}

// markNotInitialized records on the NodeClaim why it is not initialized,
// with Karpenter's reasons and messages
// (controllers/nodeclaim/lifecycle/initialization.go:67-85): Initialized
// Unknown, NodeNotReady, StartupTaintsExist, KnownEphemeralTaintsExist or
// ResourceNotRegistered (`Resource "nvidia.com/gpu" was requested but not
// registered`: no device plugin advertised it). It writes only when the
// reason or message changed.
func (c *Controller) markNotInitialized(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) error {
	reason, msg := notInitializedCondition(nc, node)
	if reason == "" {
		return nil
	}
	_, _, err := converge(ctx, c.kube, nc, newNodeClaim, writeStatus, func(cur *karpv1.NodeClaim) bool {
		cond := cur.StatusConditions().Get(karpv1.ConditionTypeInitialized)
		if cond.IsTrue() || (cond.IsUnknown() && cond.Reason == reason && cond.Message == msg) {
			return false
		}
		cur.StatusConditions().SetUnknownWithReason(karpv1.ConditionTypeInitialized, reason, msg)
		return true
	})
	if err != nil {
		return fmt.Errorf("recording why NodeClaim %s is not initialized: %w", nc.Name, err)
	}
	return nil
}

// notInitializedCondition is Karpenter's reason and message for the first
// check node fails, "" when it passes them all.
func notInitializedCondition(nc *karpv1.NodeClaim, node *corev1.Node) (string, string) {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "NodeNotReady", "Node status is NotReady"
	}
	for _, taint := range node.Spec.Taints {
		for _, st := range nc.Spec.StartupTaints {
			if taint.MatchTaint(&st) {
				return "StartupTaintsExist", fmt.Sprintf("StartupTaint %q still exists", taint.ToString())
			}
		}
	}
	for _, taint := range node.Spec.Taints {
		if scheduling.IsKnownEphemeralTaint(&taint) {
			return "KnownEphemeralTaintsExist", fmt.Sprintf("KnownEphemeralTaint %q still exists", taint.ToString())
		}
	}
	names := make([]string, 0, len(nc.Spec.Resources.Requests))
	for name := range nc.Spec.Resources.Requests {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, name := range names {
		quantity := nc.Spec.Resources.Requests[corev1.ResourceName(name)]
		if quantity.IsZero() {
			continue
		}
		if alloc, ok := node.Status.Allocatable[corev1.ResourceName(name)]; !ok || alloc.IsZero() {
			return "ResourceNotRegistered", fmt.Sprintf("Resource %q was requested but not registered", name)
		}
	}
	return "", ""
}

func newNode() *corev1.Node { return &corev1.Node{} }

func newNodeClaim() *karpv1.NodeClaim { return &karpv1.NodeClaim{} }

func notInitializedReason(nc *karpv1.NodeClaim, node *corev1.Node) string {
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, taint := range node.Spec.Taints {
		if taint.MatchTaint(&karpv1.UnregisteredNoExecuteTaint) {
			return "node still has the unregistered taint"
		}
		for _, st := range nc.Spec.StartupTaints {
			if taint.MatchTaint(&st) {
				return "startup taint " + taint.Key + " still present"
			}
		}
	}
	for name, quantity := range nc.Spec.Resources.Requests {
		if isExtended(name) && !quantity.IsZero() {
			if alloc, ok := node.Status.Allocatable[name]; !ok || alloc.IsZero() {
				return "extended resource " + string(name) + " not allocatable yet"
			}
		}
	}
	return ""
}

func isExtended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
		return false
	}
	return true
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(&t) {
			return true
		}
	}
	return false
}

func hasOwner(node *corev1.Node, nc *karpv1.NodeClaim) bool {
	for _, owner := range node.OwnerReferences {
		if owner.UID == nc.UID {
			return true
		}
	}
	return false
}

func (c *Controller) event(ctx context.Context, obj client.Object, reason, msg string) {
	if err := c.recorder.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeNormal, Reason: reason, Message: msg}); err != nil {
		c.log.Warn("writing event", "error", err)
	}
}

func ptr[T any](v T) *T { return &v }
