package nodepoolstatus

import (
	"context"
	"fmt"
	"strings"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// Reasons on a NodePool's conditions, Karpenter's (sigs.k8s.io/karpenter
// pkg/controllers/nodepool/validation and readiness).
const (
	ReasonNodePoolValidationFailed  = "NodePoolValidationFailed"
	ReasonNodeClassNotFound         = "NodeClassNotFound"
	ReasonNodeClassTerminating      = "NodeClassTerminating"
	ReasonNodeClassReadinessUnknown = "NodeClassReadinessUnknown"
)

// baseResources are the resources Karpenter's NodePool counter always
// writes, zero when no NodeClaim holds any (pkg/controllers/nodepool/
// counter BaseResources).
var baseResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods,
	corev1.ResourceEphemeralStorage, resourceNodes}

const resourceNodes corev1.ResourceName = "nodes"

// Counts returns status.resources and status.nodes as Karpenter's counter
// writes them: Resources over the base resources, nodes its "nodes".
func Counts(nodePool string, claims []karpv1.NodeClaim) (corev1.ResourceList, int64) {
	total := Resources(nodePool, claims)
	for _, name := range baseResources {
		if _, ok := total[name]; !ok {
			total[name] = resource.MustParse("0")
		}
	}
	nodes := total[resourceNodes]
	return total, nodes.Value()
}

// PoolStatus returns np's status as Karpenter's NodePool controllers write
// it: the counts of its NodeClaims, ValidationSucceeded (Karpenter's runtime
// validation), NodeClassReady (the referenced AKSNodeClass's Ready, whose
// status is in classes) and Ready from them. NodeRegistrationHealthy is
// kept as it is (lifecycle writes it). Pure: np is not modified.
func PoolStatus(ctx context.Context, np *karpv1.NodePool, classes map[string]*v1beta1.AKSNodeClass, claims []karpv1.NodeClaim, clk clock.Clock) karpv1.NodePoolStatus {
	out := np.DeepCopy()
	res, nodes := Counts(np.Name, claims)
	out.Status.Resources = res
	out.Status.Nodes = &nodes
	conds := out.StatusConditions(status.WithClock(clk))
	if err := out.RuntimeValidate(ctx); err != nil {
		conds.SetFalse(karpv1.ConditionTypeValidationSucceeded, ReasonNodePoolValidationFailed, err.Error())
	} else {
		conds.SetTrue(karpv1.ConditionTypeValidationSucceeded)
	}
	reason, msg := nodeClassReadiness(np, classes)
	if reason == "" {
		conds.SetTrue(karpv1.ConditionTypeNodeClassReady)
	} else {
		conds.SetFalse(karpv1.ConditionTypeNodeClassReady, reason, msg)
	}
	return out.Status
}

// nodeClassReadiness mirrors Karpenter's nodepool readiness controller:
// the class's Ready, NodeClassNotFound when it does not exist,
// NodeClassTerminating while it is deleted. "" when Ready.
func nodeClassReadiness(np *karpv1.NodePool, classes map[string]*v1beta1.AKSNodeClass) (string, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || ref.Group != v1beta1.Group || ref.Kind != "AKSNodeClass" {
		return ReasonNodeClassNotFound, fmt.Sprintf("NodePool %s does not reference an AKSNodeClass (group %s); karpfunc launches only those", np.Name, v1beta1.Group)
	}
	class := classes[ref.Name]
	switch {
	case class == nil:
		return ReasonNodeClassNotFound, fmt.Sprintf("AKSNodeClass %s not found", ref.Name)
	case class.DeletionTimestamp != nil:
		return ReasonNodeClassTerminating, fmt.Sprintf("AKSNodeClass %s is terminating", ref.Name)
	}
	ready := class.StatusConditions().Get(status.ConditionReady)
	switch {
	case ready == nil || ready.IsUnknown():
		return ReasonNodeClassReadinessUnknown, fmt.Sprintf("AKSNodeClass %s readiness unknown", ref.Name)
	case ready.IsFalse():
		return ready.Reason, fmt.Sprintf("AKSNodeClass %s: %s", ref.Name, unhealthy(class))
	}
	return "", ""
}

// unhealthy says which of class's conditions are not True and why, e.g.
// "SubnetsReady=False (SubnetIDInvalid: vnetSubnetID does not match …)":
// its Ready says only "SubnetsReady=False" (operatorpkg's root condition),
// the NodePool's NodeClassReady says what to fix.
func unhealthy(class *v1beta1.AKSNodeClass) string {
	var parts []string
	for _, condition := range class.StatusConditions().List() {
		if condition.Type != status.ConditionReady && !condition.IsTrue() {
			parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", condition.Type, condition.Status, condition.Reason, condition.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// NotReadyReason says why np is not Ready ("" when it is): the message of
// its first False condition among ValidationSucceeded and NodeClassReady.
func NotReadyReason(np *karpv1.NodePool) string {
	conds := np.StatusConditions()
	if conds.Root().IsTrue() {
		return ""
	}
	for _, condType := range []string{karpv1.ConditionTypeValidationSucceeded, karpv1.ConditionTypeNodeClassReady} {
		if condition := conds.Get(condType); condition != nil && !condition.IsTrue() {
			return fmt.Sprintf("%s=%s (%s: %s)", condType, condition.Status, condition.Reason, condition.Message)
		}
	}
	return "Ready=" + string(conds.Root().Status)
}
