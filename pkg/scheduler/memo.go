package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Memo keeps what a solve derives from objects that do not change between
// solves over one snapshot: the requests of pods (bound or pending), the
// requirements of nodes' labels, and each instance type as a pool would
// launch it. A caller that solves many times over the same cluster (the
// disruption engine simulates each set of candidates against it) passes
// one Memo in every Input and so pays for these once.
//
// Entries are keyed by pointer: the pods, nodes and instance types must
// not be changed while the Memo is in use. A Memo is not safe for
// concurrent solves. A nil Memo computes everything afresh.
type Memo struct {
	requests map[*corev1.Pod]corev1.ResourceList
	nodeReqs map[*corev1.Node]scheduling.Requirements
	types    map[memoTypeKey]*memoType
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{requests: map[*corev1.Pod]corev1.ResourceList{}, nodeReqs: map[*corev1.Node]scheduling.Requirements{},
		types: map[memoTypeKey]*memoType{}}
}

type memoTypeKey struct {
	it      *catalog.InstanceType
	maxPods int32
}

// memoType is an instance type with a pool's maxPods, its requirements and
// allocatable.
type memoType struct {
	it    *catalog.InstanceType
	reqs  scheduling.Requirements
	alloc corev1.ResourceList
}

// podRequests are the pod's effective requests (Karpenter's Ceiling:
// containers, sidecars, init containers, overhead, resized resources) and
// one pod slot, as resources.RequestsForPods(p) gives them. Callers must
// not change the list.
func (m *Memo) podRequests(p *corev1.Pod) corev1.ResourceList {
	if m == nil {
		return resources.RequestsForPods(p)
	}
	list, ok := m.requests[p]
	if !ok {
		list = resources.RequestsForPods(p)
		m.requests[p] = list
	}
	return list
}

// nodeRequirements are the requirements of n's labels, built with shared
// (see labelRequirements). Callers must not change them
// (scheduling.Requirements.Add replaces, it does not mutate, so a copy
// made with copyRequirements is safe to narrow).
func (m *Memo) nodeRequirements(n *corev1.Node, shared *labelRequirements) scheduling.Requirements {
	if m == nil {
		return shared.of(n.Labels)
	}
	reqs, ok := m.nodeReqs[n]
	if !ok {
		reqs = shared.of(n.Labels)
		m.nodeReqs[n] = reqs
	}
	return reqs
}

// labelRequirements builds the requirements of label sets as
// scheduling.NewLabelRequirements does, with one Requirement per distinct
// label (key In value) shared by every set that carries it: the nodes of a
// cluster carry mostly the same labels, so 5,000 nodes need a few thousand
// Requirements, not 120,000. Sharing is safe because a Requirement is never
// changed once built: Requirements.Add puts an intersection in its place.
type labelRequirements struct {
	byLabel map[labelPair]*scheduling.Requirement
}

type labelPair struct{ key, value string }

func newLabelRequirements() *labelRequirements {
	return &labelRequirements{byLabel: map[labelPair]*scheduling.Requirement{}}
}

// of is scheduling.NewLabelRequirements(labels), from shared Requirements.
func (lr *labelRequirements) of(labels map[string]string) scheduling.Requirements {
	reqs := make(scheduling.Requirements, len(labels))
	for key, value := range labels {
		label := labelPair{key, value}
		req, ok := lr.byLabel[label]
		if !ok {
			req = scheduling.NewRequirement(key, corev1.NodeSelectorOpIn, value)
			lr.byLabel[label] = req
		}
		reqs.Add(req)
	}
	return reqs
}

// instanceType is it with maxPods, its requirements and allocatable.
func (m *Memo) instanceType(it *catalog.InstanceType, maxPods int32) *memoType {
	key := memoTypeKey{it, maxPods}
	if m != nil {
		if memoType, ok := m.types[key]; ok {
			return memoType
		}
	}
	withPods := it.WithMaxPods(maxPods)
	launchable := &memoType{it: withPods, reqs: withPods.Requirements(), alloc: withPods.Allocatable()}
	if m != nil {
		m.types[key] = launchable
	}
	return launchable
}

// boundOnNode is what the pods bound to one node take.
type boundOnNode struct {
	// pods is how many there are (each takes a pod slot).
	pods int64
	// requested is the sum of their requests, per resource of the
	// solver's resIndex ("pods" left out: pods counts it). Quantities sum
	// exactly, so the sum is the same in any order.
	requested []resource.Quantity
	// counted are the counters each pod counts in, pod after pod, in
	// input order (one entry per pod and counter).
	counted []*counter
	// ports are the host ports they hold: a pending pod wanting one of
	// them cannot go there (Karpenter's state.StateNode tracks the same
	// HostPortUsage of the pods bound to a node).
	ports []hostPort
}

// addBoundPod adds pod's requests (from memo, if any) to onNode.
func (s *solver) addBoundPod(onNode *boundOnNode, pod *corev1.Pod, memo *Memo) {
	requests := boundRequests(pod, memo)
	for i, name := range s.res.names {
		if name == corev1.ResourcePods {
			continue
		}
		if request, ok := requests[name]; ok {
			onNode.requested[i].Add(request)
		}
	}
	onNode.pods++
	onNode.ports = append(onNode.ports, podHostPorts(pod)...)
}

// roomLeft is allocatable less what the pods bound there take (onNode;
// nil: no pods), as a vector: what resources.Subtract(allocatable,
// resources.RequestsForPods(pods...)) gives, without building the sum. A
// resource the node does not report has no room.
func (s *solver) roomLeft(allocatable corev1.ResourceList, onNode *boundOnNode) resVec {
	room := make(resVec, len(s.res.names))
	for i, name := range s.res.names {
		reported, ok := allocatable[name]
		if !ok {
			continue
		}
		left := reported.DeepCopy()
		switch {
		case onNode == nil:
		case name == corev1.ResourcePods:
			left.Sub(*resource.NewQuantity(onNode.pods, resource.DecimalSI))
		default:
			left.Sub(onNode.requested[i])
		}
		room[i] = quantityValue(name, left)
	}
	return room
}

// boundRequests are a pod's requests as addBoundPod counts them: from the
// Memo when there is one, else computed (its "pods" entry, if any, is not
// read).
func boundRequests(p *corev1.Pod, memo *Memo) corev1.ResourceList {
	if memo != nil {
		return memo.podRequests(p)
	}
	return requestsForPod(p)
}
