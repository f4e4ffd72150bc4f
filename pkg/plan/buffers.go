package plan

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// CapacityBuffer is the room one CapacityBuffer keeps in the plan: its
// chunks (status.replicas) and where their virtual pods went, or why it
// keeps none.
type CapacityBuffer struct {
	Name     string `json:"name"` // namespace/name
	Ready    bool   `json:"ready"`
	Reason   string `json:"reason"`
	Message  string `json:"message,omitempty"`
	Replicas int32  `json:"replicas"`
	// Existing: virtual pods on existing nodes or in-flight NodeClaims;
	// New: on the plan's new NodeClaims; Failed: nowhere.
	Existing int      `json:"existing"`
	New      int      `json:"new"`
	Failed   int      `json:"failed"`
	Nodes    []string `json:"nodes"`
	Why      string   `json:"why,omitempty"`
}

// Buffers evaluates the input's CapacityBuffers against its PodTemplates
// and workloads, as the live pass does.
func (o *Objects) Buffers() []capacitybuffer.Buffer {
	return capacitybuffer.Evaluate(o.CapacityBuffers, o.BufferObjects, capacitybuffer.Options{})
}

// addBufferObject files a CapacityBuffer, PodTemplate or apps workload.
func (o *Objects) addBufferObject(obj any) {
	switch obj := obj.(type) {
	case *autoscalingv1beta1.CapacityBuffer:
		o.CapacityBuffers = append(o.CapacityBuffers, obj)
	case *corev1.PodTemplate:
		o.BufferObjects.PodTemplates = append(o.BufferObjects.PodTemplates, obj)
	case *appsv1.Deployment:
		o.BufferObjects.Deployments = append(o.BufferObjects.Deployments, obj)
	case *appsv1.ReplicaSet:
		o.BufferObjects.ReplicaSets = append(o.BufferObjects.ReplicaSets, obj)
	case *appsv1.StatefulSet:
		o.BufferObjects.StatefulSets = append(o.BufferObjects.StatefulSets, obj)
	}
}

// WithBuffers adds what room each buffer keeps in res (solved with the
// buffers' virtual pods among the pending pods).
func (o Output) WithBuffers(bufs []capacitybuffer.Buffer, res scheduler.Result) Output {
	rooms := capacitybuffer.Rooms(res)
	o.CapacityBuffers = make([]CapacityBuffer, 0, len(bufs))
	for i := range bufs {
		b := &bufs[i]
		cb := CapacityBuffer{Name: b.Key(), Ready: b.Ready, Reason: b.Reason, Replicas: b.Replicas, Nodes: []string{}}
		if !b.Ready {
			cb.Message = b.Message
		}
		if room := rooms[b.Key()]; room != nil {
			cb.Existing, cb.New, cb.Failed, cb.Why = room.Existing, room.New, room.Failed, room.Why
			cb.Nodes = append(cb.Nodes, room.Nodes...)
		}
		o.CapacityBuffers = append(o.CapacityBuffers, cb)
	}
	return o
}

// realOnly is r without virtual pods anywhere, new NodeClaims included:
// what the pods' accounting counts.
func realOnly(r scheduler.Result) scheduler.Result {
	out := capacitybuffer.WithoutVirtual(r)
	out.NewNodeClaims = make([]*scheduler.NodeClaimPlan, 0, len(r.NewNodeClaims))
	for _, plan := range r.NewNodeClaims {
		cp := *plan
		cp.Pods = capacitybuffer.RealPods(plan.Pods)
		out.NewNodeClaims = append(out.NewNodeClaims, &cp)
	}
	return out
}

// bufferRow is a buffer's line in the table.
func bufferRow(b CapacityBuffer) string {
	where := strings.Join(b.Nodes, ",")
	if !b.Ready {
		where = b.Reason + ": " + b.Message
	} else if b.Failed > 0 {
		where = strings.TrimPrefix(where+"; ", "; ") + fmt.Sprintf("%d nowhere: %s", b.Failed, b.Why)
	}
	return fmt.Sprintf("%s\t%d\t%d\t%d\t%s", b.Name, b.Replicas, b.Existing, b.New, orDash(where))
}
