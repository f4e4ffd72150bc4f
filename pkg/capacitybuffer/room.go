package capacitybuffer

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Rooms says where each buffer's virtual pods went in res, by buffer key
// (Karpenter's classifyBufferPods: existing nodes and in-flight NodeClaims
// count as existing capacity).
func Rooms(res scheduler.Result) map[string]*Room {
	rooms := rooms{}
	for _, pl := range res.Existing {
		target := pl.Node
		if target == "" {
			target = pl.NodeClaim
		}
		for _, pod := range pl.Pods {
			if r := rooms.of(pod); r != nil {
				r.Existing++
				r.Nodes = append(r.Nodes, target)
			}
		}
	}
	for _, plan := range res.NewNodeClaims {
		for _, pod := range plan.Pods {
			if r := rooms.of(pod); r != nil {
				r.New++
			}
		}
	}
	for _, refused := range res.Unschedulable {
		if r := rooms.of(refused.Pod); r != nil {
			if r.Failed == 0 {
				r.Why = refused.Reason
			}
			r.Failed++
		}
	}
	for _, r := range rooms {
		sort.Strings(r.Nodes)
		r.Nodes = dedupe(r.Nodes)
	}
	return rooms
}

type rooms map[string]*Room

// of is the room of the buffer pod belongs to; nil for a real pod.
func (rs rooms) of(pod *corev1.Pod) *Room {
	key := KeyOf(pod)
	if key == "" {
		return nil
	}
	if rs[key] == nil {
		rs[key] = &Room{}
	}
	return rs[key]
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// HoldingNodes are the nodes (by name) that hold some buffer's virtual
// pods in res: emptiness leaves them, as Karpenter's HasBufferPods.
func HoldingNodes(res scheduler.Result) map[string]bool {
	out := map[string]bool{}
	for _, pl := range res.Existing {
		if pl.Node == "" {
			continue
		}
		for _, pod := range pl.Pods {
			if IsVirtual(pod) {
				out[pl.Node] = true
				break
			}
		}
	}
	return out
}

// WithoutVirtual returns res with the virtual pods taken out of Existing
// and Unschedulable (the outcomes and events of real pods); NewNodeClaims
// keep theirs, since the claims are created with room for them.
func WithoutVirtual(res scheduler.Result) scheduler.Result {
	out := res
	out.Existing = make([]scheduler.Placement, 0, len(res.Existing))
	for _, pl := range res.Existing {
		pods := RealPods(pl.Pods)
		if len(pods) == 0 {
			continue
		}
		pl.Pods = pods
		out.Existing = append(out.Existing, pl)
	}
	out.Unschedulable = nil
	for _, u := range res.Unschedulable {
		if !IsVirtual(u.Pod) {
			out.Unschedulable = append(out.Unschedulable, u)
		}
	}
	return out
}

// RealPods are pods without the virtual ones.
func RealPods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !IsVirtual(pod) {
			out = append(out, pod)
		}
	}
	if len(out) == len(pods) {
		return pods
	}
	return out
}
