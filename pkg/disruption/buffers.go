package disruption

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// placeBuffers places the CapacityBuffers' virtual pods (State.BufferPods)
// with the pending pods on the cluster as it is, as a provisioning pass
// would: the nodes that take some hold buffer room, and emptiness leaves
// them (Karpenter's HasBufferPods, pkg/controllers/disruption/
// emptiness.go:51-57). Consolidation and drift simulations place the
// virtual pods again (see withBuffers), as Karpenter's SimulateScheduling
// does with GetPendingPods.
func (e *Engine) placeBuffers() {
	if len(e.st.BufferPods) == 0 {
		return
	}
	in := e.base
	in.Pods = append(slices.Clone(e.base.Pods), e.st.BufferPods...)
	res := scheduler.Solve(in)
	e.bufferRooms = capacitybuffer.Rooms(res)
	holders := map[string][]string{}
	for _, pl := range res.Existing {
		if pl.Node == "" {
			continue
		}
		for _, pod := range pl.Pods {
			if key := capacitybuffer.KeyOf(pod); key != "" && !slices.Contains(holders[pl.Node], key) {
				holders[pl.Node] = append(holders[pl.Node], key)
			}
		}
	}
	for _, candidate := range e.Candidates {
		if keys := holders[candidate.Node.Name]; len(keys) > 0 {
			sort.Strings(keys)
			candidate.HoldsBuffer = strings.Join(keys, ", ")
		}
	}
}

// withBuffers is pods followed by the buffers' virtual pods.
func (e *Engine) withBuffers(pods []*corev1.Pod) []*corev1.Pod {
	if len(e.st.BufferPods) == 0 {
		return pods
	}
	return append(slices.Clone(pods), e.st.BufferPods...)
}
