package provisioning

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// Outcome is where one pending pod went in one provisioning pass. Every
// pending pod the pass saw gets exactly one.
type Outcome string

const (
	// OnNode: the engine placed the pod on a Node that exists;
	// kube-scheduler binds it.
	OnNode Outcome = "node"
	// OnInFlight: on a NodeClaim that exists but has no Node yet.
	OnInFlight Outcome = "in-flight"
	// OnNew: on a NodeClaim this pass created (or a concurrent pass created
	// for exactly these pods after this pass's snapshot).
	OnNew Outcome = "new"
	// Unschedulable: no NodePool can take the pod; Reason says why.
	Unschedulable Outcome = "unschedulable"
	// Deferred: the pod has a place but it could not be made this pass;
	// Reason says what it waits for. A later pass (scheduled, or the
	// relay's next announcement) tries again.
	Deferred Outcome = "deferred"
)

// Outcomes in the order a pass log lists them.
var Outcomes = []Outcome{OnNode, OnInFlight, OnNew, Unschedulable, Deferred}

// PodOutcome is one pending pod's outcome.
type PodOutcome struct {
	Pod     types.NamespacedName
	Outcome Outcome
	// Target is the Node or NodeClaim the pod was placed on.
	Target string
	// Reason: why the pod is unschedulable or what it waits for.
	Reason string
	// PendingSince is when kube-scheduler last marked the pod
	// Unschedulable.
	PendingSince time.Time
}

// Accounting is the outcomes of one pass, one per pending pod.
type Accounting []PodOutcome

// Count returns how many pods had outcome o.
func (a Accounting) Count(o Outcome) int {
	count := 0
	for _, outcome := range a {
		if outcome.Outcome == o {
			count++
		}
	}
	return count
}

// Targets returns the distinct Nodes or NodeClaims pods with outcome o went
// to, sorted.
func (a Accounting) Targets(o Outcome) []string {
	seen := map[string]bool{}
	var out []string
	for _, outcome := range a {
		if outcome.Outcome == o && outcome.Target != "" && !seen[outcome.Target] {
			seen[outcome.Target] = true
			out = append(out, outcome.Target)
		}
	}
	sort.Strings(out)
	return out
}

// String is the pass log's summary: "5 pending: 1 on nodes, 2 on in-flight
// NodeClaims [a b], 2 on new NodeClaims [c], 0 unschedulable, 0 deferred".
func (a Accounting) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pending: %d on nodes, %d on in-flight NodeClaims %v, %d on new NodeClaims %v, %d unschedulable, %d deferred",
		len(a), a.Count(OnNode), a.Count(OnInFlight), a.Targets(OnInFlight), a.Count(OnNew), a.Targets(OnNew),
		a.Count(Unschedulable), a.Count(Deferred))
	return b.String()
}

// pendingSince is when kube-scheduler last marked pod Unschedulable (the
// pod's creation when it never did).
func pendingSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

// PlacedOutcomes are the outcomes the engine decides alone: pods on Nodes,
// on in-flight NodeClaims, and unschedulable ones. Pods it plans new
// NodeClaims for get theirs when the claims are created (or not).
func PlacedOutcomes(r scheduler.Result) Accounting {
	var out Accounting
	for _, pl := range r.Existing {
		outcome, target := OnNode, pl.Node
		if pl.Node == "" {
			outcome, target = OnInFlight, pl.NodeClaim
		}
		for _, pod := range pl.Pods {
			out = append(out, outcomeOf(pod, outcome, target, ""))
		}
	}
	for _, refused := range r.Unschedulable {
		out = append(out, outcomeOf(refused.Pod, Unschedulable, "", refused.Reason))
	}
	return out
}

// PlannedOutcomes is the accounting of a plan nothing acts on (karpfunc
// plan): PlacedOutcomes, and OnNew without a name for the pods of each
// NodeClaim the plan would create.
func PlannedOutcomes(r scheduler.Result) Accounting {
	out := PlacedOutcomes(r)
	for _, plan := range r.NewNodeClaims {
		for _, pod := range plan.Pods {
			out = append(out, outcomeOf(pod, OnNew, "", ""))
		}
	}
	return out
}

func outcomeOf(pod *corev1.Pod, o Outcome, target, reason string) PodOutcome {
	return PodOutcome{Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, Outcome: o, Target: target,
		Reason: reason, PendingSince: pendingSince(pod)}
}
