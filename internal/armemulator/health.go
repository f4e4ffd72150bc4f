package armemulator

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Node health faults a test or the chaos run can inject on a running VM.
// They change nothing in ARM: the VM stays Running, as a VM whose kubelet
// died or whose node failed its health check does in Azure.

// StoppedKubeletHolder is the Lease holder StopKubelet writes.
const StoppedKubeletHolder = "armemulator-kubelet-stopped"

// stoppedLeaseSeconds is the duration written on a stopped kubelet's
// Lease: long enough that kwok never takes it back.
const stoppedLeaseSeconds = 10 * 365 * 24 * 3600

// StopKubelet stops the kubelet of VM name: its Node's Lease is no longer
// renewed and its status no longer posted. kwok plays the kubelet in two
// ways, and both are stopped:
//
//   - it renews the node's Lease in kube-node-lease while it holds it: the
//     Lease is handed to StoppedKubeletHolder with its renewTime unchanged,
//     so kwok neither renews it (it takes only a Lease it holds or one that
//     expired) nor acts on the node's later changes (it treats a node whose
//     Lease it does not hold as read-only);
//   - its node-heartbeat stage rewrites the node's conditions every 20-45 s
//     for nodes whose status.phase is Running (sigs.k8s.io/kwok
//     kustomize/stage/node/heartbeat/node-heartbeat.yaml): the phase is set
//     to Pending, which a kubelet never reads (the field is deprecated),
//     so the stage no longer matches after the one heartbeat already
//     queued.
//
// No heartbeat then reaches the API server. kube-controller-manager's node
// lifecycle controller then does what it does for a dead kubelet: after
// --node-monitor-grace-period (50 s by default) without a Lease renewal or
// a status update it sets Ready (and the kubelet's other conditions) to
// Unknown, reason NodeStatusUnknown, "Kubelet stopped posting node
// status." (k8s.io/kubernetes pkg/controller/nodelifecycle
// node_lifecycle_controller.go, tryUpdateNodeHealth; Kubernetes docs,
// "Nodes", section "Node heartbeats"), and taints the node
// node.kubernetes.io/unreachable.
func (s *Server) StopKubelet(name string) error {
	node, err := s.bootedNode(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.nodes.ctx, 30*time.Second)
	defer cancel()
	leases := s.nodes.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		holder, seconds := StoppedKubeletHolder, int32(stoppedLeaseSeconds)
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &holder, &seconds
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("armemulator: node %s of VM %s has no Lease yet: its kubelet has not started", node, name)
	}
	if err != nil {
		return fmt.Errorf("armemulator: stopping the kubelet of VM %s (node %s): %w", name, node, err)
	}
	phase := []byte(`{"status":{"phase":"Pending"}}`)
	if _, err := s.nodes.admin.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, phase, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("armemulator: stopping the heartbeat of VM %s (node %s): %w", name, node, err)
	}
	s.log.Info("kubelet stopped", "vm", name, "node", node)
	return nil
}

// ReportNodeHealthy sets VM name's Node condition
// kubernetes.azure.com/NodeHealthy as AKS's Cluster Health Monitor does
// after its node health check (pod scheduling and pod networking): True
// when the node passed, False when it failed (Learn, "Use Cluster Health
// Monitor checker in AKS", section "Check node health status with
// On-Demand Monitor"). The reason strings the monitor writes are not
// documented; NodeHealthCheckPassed and NodeHealthCheckFailed stand in.
func (s *Server) ReportNodeHealthy(name string, healthy bool, message string) error {
	node, err := s.bootedNode(name)
	if err != nil {
		return err
	}
	status, reason := corev1.ConditionTrue, "NodeHealthCheckPassed"
	if !healthy {
		status, reason = corev1.ConditionFalse, "NodeHealthCheckFailed"
	}
	now := metav1.NewTime(s.clock.Now())
	s.nodes.condition(node, corev1.NodeCondition{Type: "kubernetes.azure.com/NodeHealthy", Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: now, LastTransitionTime: now})
	return nil
}

// bootedNode is the Node name of VM name, which must have booted.
func (s *Server) bootedNode(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	if s.nodes == nil {
		return "", fmt.Errorf("armemulator: no cluster: VM %s has no kubelet", name)
	}
	for _, v := range s.vms {
		if strings.EqualFold(v.name(), name) {
			if !v.booted {
				return "", fmt.Errorf("armemulator: VM %s has not booted", name)
			}
			return nodeName(v), nil
		}
	}
	return "", fmt.Errorf("armemulator: no VM %q", name)
}
