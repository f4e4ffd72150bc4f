package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// ConditionState is what a NodeClaim's disruption conditions should say.
type ConditionState struct {
	// Consolidatable is Karpenter's Consolidatable condition: True once
	// Initialized and consolidateAfter has passed since the last pod event.
	Consolidatable bool
	// ConsolidatableAt is when it turns True (zero: Never or already).
	ConsolidatableAt time.Time
	// Drifted is the Drifted condition's reason ("": not drifted).
	Drifted string
}

// Conditions computes the disruption conditions of nc (on node, nil if
// none yet; owned by np) at now; classHashes maps AKSNodeClass names to
// NodeClassHash, versions are what nodes should run. The Disruption
// function writes them and schedules a pass at ConsolidatableAt.
func Conditions(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, classHashes map[string]string, versions Versions, now time.Time) ConditionState {
	var st ConditionState
	if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		if at, ok := consolidatableAt(nc, np); ok {
			st.Consolidatable = !at.After(now)
			if !st.Consolidatable {
				st.ConsolidatableAt = at
			}
		}
	}
	classes := make(map[string]classInfo, len(classHashes))
	for name, hash := range classHashes {
		classes[name] = classInfo{hash: hash}
	}
	st.Drifted = drift(nc, node, np, desired{classes: classes, versions: versions})
	return st
}
