// Package staticcapacity decides how a static NodePool (one that sets
// spec.replicas) reaches its replica count: how many NodeClaims to create
// and which to delete. It is pure: objects in, a Decision out, no I/O.
//
// The semantics are Karpenter v1.14.1's (sigs.k8s.io/karpenter
// pkg/controllers/static/provisioning/controller.go:76-124 and
// pkg/controllers/static/deprovisioning/controller.go:84-135,185-310):
//
//   - Running claims are the pool's NodeClaims not being deleted and not
//     pending disruption (a candidate of a disruption command whose
//     replacement is on its way).
//   - Scale up when running + pending disruption < replicas: create
//     replicas - running, but never more than limits.nodes leaves after
//     every claim of the pool (running, pending disruption, deleting).
//   - Scale down when running > replicas: delete running - replicas,
//     directly (no disruption budgets), choosing first the claims not
//     launched yet, then empty nodes (DaemonSet pods only, none with an
//     active karpenter.sh/do-not-disrupt), then nodes without a
//     do-not-disrupt pod, cheapest to disrupt first.
//
// Invariants: a Decision never both creates and deletes; Delete never
// holds a claim being deleted or pending disruption; Create never takes
// the pool's claims past limits.nodes.
package staticcapacity

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

// IsStatic reports whether np keeps a fixed number of nodes (spec.replicas
// set), as Karpenter's nodepoolutils.IsStatic.
func IsStatic(np *karpv1.NodePool) bool { return np != nil && np.Spec.Replicas != nil }

// Claim is one NodeClaim of a static pool with what the choice of which to
// delete needs.
type Claim struct {
	NodeClaim *karpv1.NodeClaim
	// Deleting: the claim has a deletion timestamp.
	Deleting bool
	// PendingDisruption: a disruption command is replacing or validating it.
	PendingDisruption bool
	// Launched: the claim has a provider ID (Karpenter's "resolved").
	Launched bool
	// Pods are the pods on its node that would need a new place (not
	// DaemonSet pods, not finished, not mirror pods).
	Pods []*corev1.Pod
	// DoNotDisrupt: a pod on its node has an active
	// karpenter.sh/do-not-disrupt annotation.
	DoNotDisrupt bool
	// LifetimeRemaining is the share of expireAfter left (1 when the pool
	// never expires its nodes), Karpenter's LifetimeRemaining.
	LifetimeRemaining float64
}

// Decision is what a static pool needs now.
type Decision struct {
	NodePool string
	Replicas int64
	// Running, PendingDisruption and Deleting count the pool's claims.
	Running, PendingDisruption, Deleting int
	// Create is how many NodeClaims to create (0 when none).
	Create int64
	// Delete are the NodeClaims to delete, in the order chosen.
	Delete []*karpv1.NodeClaim
	// LimitReached says why fewer than wanted are created: limits.nodes.
	LimitReached string
}

// Nodes is the pool's node count as status.nodes reports it: every claim
// of the pool that is not being deleted.
func (d Decision) Nodes() int64 { return int64(d.Running + d.PendingDisruption) }

// Decide computes the Decision for np from its claims. np must be static.
func Decide(np *karpv1.NodePool, claims []Claim) Decision {
	d := Decision{NodePool: np.Name, Replicas: *np.Spec.Replicas}
	var running []Claim
	for _, c := range claims {
		switch {
		case c.Deleting:
			d.Deleting++
		case c.PendingDisruption:
			d.PendingDisruption++
		default:
			d.Running++
			running = append(running, c)
		}
	}
	switch {
	case int64(d.Running)+int64(d.PendingDisruption) < d.Replicas:
		want := d.Replicas - int64(d.Running)
		limit := int64(math.MaxInt64)
		if quantity, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
			limit = quantity.Value()
		}
		room := max(limit-int64(d.Running+d.PendingDisruption+d.Deleting), 0)
		d.Create = min(want, room)
		if d.Create < want {
			d.LimitReached = fmt.Sprintf("nodepool node limit reached: limits.nodes is %d and the NodePool has %d NodeClaims (%d deleting); %d of the %d wanted are not created",
				limit, d.Running+d.PendingDisruption+d.Deleting, d.Deleting, want-d.Create, want)
		}
	case int64(d.Running) > d.Replicas:
		d.Delete = choose(running, int(int64(d.Running)-d.Replicas))
	}
	return d
}

// choose picks count claims to delete in Karpenter's order: not launched,
// then empty, then the rest without do-not-disrupt pods first, cheapest
// to disrupt (rescheduling cost × lifetime remaining) first; ties by name.
func choose(running []Claim, count int) []*karpv1.NodeClaim {
	rank := func(c Claim) int {
		switch {
		case !c.Launched:
			return 0
		case len(c.Pods) == 0 && !c.DoNotDisrupt:
			return 1
		case !c.DoNotDisrupt:
			return 2
		default:
			return 3
		}
	}
	ordered := slices.Clone(running)
	slices.SortStableFunc(ordered, func(a, b Claim) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)),
			cmp.Compare(ReschedulingCost(a.Pods)*a.LifetimeRemaining, ReschedulingCost(b.Pods)*b.LifetimeRemaining),
			strings.Compare(a.NodeClaim.Name, b.NodeClaim.Name))
	})
	out := make([]*karpv1.NodeClaim, 0, count)
	for _, c := range ordered[:min(count, len(ordered))] {
		out = append(out, c.NodeClaim)
	}
	return out
}

// ReschedulingCost is Karpenter's (pkg/utils/disruption/disruption.go):
// the sum over pods of 1 + deletion cost/2^27 + priority/2^25, each
// clamped to [-10, 10].
func ReschedulingCost(pods []*corev1.Pod) float64 {
	total := 0.0
	for _, p := range pods {
		cost := 1.0
		if value, ok := p.Annotations[corev1.PodDeletionCost]; ok {
			if deletionCost, err := strconv.ParseFloat(value, 64); err == nil {
				cost += deletionCost / math.Pow(2, 27)
			}
		}
		if p.Spec.Priority != nil {
			cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
		}
		total += math.Max(-10, math.Min(10, cost))
	}
	return total
}

// Objects are the cluster objects ClaimsOf reads.
type Objects struct {
	NodeClaims []*karpv1.NodeClaim
	Nodes      []*corev1.Node
	// Pods bound to nodes (others are ignored).
	Pods []*corev1.Pod
}

// ClaimsOf returns the claims of np in objs, with their nodes' pods, as
// Decide needs them, at now.
func ClaimsOf(np *karpv1.NodePool, objs Objects, now time.Time) []Claim {
	nodes := map[string]*corev1.Node{}
	byProvider := map[string]string{}
	for _, n := range objs.Nodes {
		nodes[n.Name] = n
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = n.Name
		}
	}
	podsOn := map[string][]*corev1.Pod{}
	for _, p := range objs.Pods {
		if p.Spec.NodeName != "" {
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	pending := pendingDisruption(objs.NodeClaims)
	var out []Claim
	for _, nc := range objs.NodeClaims {
		if nc.Labels[karpv1.NodePoolLabelKey] != np.Name {
			continue
		}
		c := Claim{NodeClaim: nc, Deleting: nc.DeletionTimestamp != nil, PendingDisruption: pending[nc.Name],
			Launched: nc.Status.ProviderID != "", LifetimeRemaining: lifetimeRemaining(np, nc, now)}
		nodeName := nc.Status.NodeName
		if nodeName == "" {
			nodeName = byProvider[nc.Status.ProviderID]
		}
		for _, p := range podsOn[nodeName] {
			if doNotDisrupt(p, now) {
				c.DoNotDisrupt = true
			}
			if reschedulable(p) {
				c.Pods = append(c.Pods, p)
			}
		}
		out = append(out, c)
	}
	return out
}

// pendingDisruption names the candidates of live disruption commands:
// those a replacement not being deleted names, and those awaiting their
// command's validation.
func pendingDisruption(claims []*karpv1.NodeClaim) map[string]bool {
	pending := map[string]bool{}
	for _, nc := range claims {
		if nc.DeletionTimestamp != nil {
			continue
		}
		if _, ok := nc.Annotations[apis.AnnotationDisruptionValidating]; ok {
			pending[nc.Name] = true
		}
		for _, entry := range strings.Split(nc.Annotations[apis.AnnotationDisruptionCandidates], ",") {
			if name, _, _ := strings.Cut(entry, "="); name != "" {
				pending[name] = true
			}
		}
	}
	return pending
}

// reschedulable: a pod that needs a place elsewhere when its node goes.
func reschedulable(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, owner := range p.OwnerReferences {
		if owner.Kind == "DaemonSet" && owner.Controller != nil && *owner.Controller {
			return false
		}
	}
	return true
}

// doNotDisrupt reports an active karpenter.sh/do-not-disrupt on p: "true",
// or a duration not yet past since the pod started (Karpenter's
// pod.IsDoNotDisruptActive).
func doNotDisrupt(p *corev1.Pod, now time.Time) bool {
	value, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		return false
	}
	if value == "true" {
		return true
	}
	duration, err := time.ParseDuration(value)
	if err != nil {
		return false
	}
	start := p.CreationTimestamp.Time
	if p.Status.StartTime != nil {
		start = p.Status.StartTime.Time
	}
	return start.Add(duration).After(now)
}

// lifetimeRemaining is the share of the claim's expireAfter left, in
// [0, 1]; 1 when it never expires (Karpenter's LifetimeRemaining).
func lifetimeRemaining(np *karpv1.NodePool, nc *karpv1.NodeClaim, now time.Time) float64 {
	expireAfter := nc.Spec.ExpireAfter.Duration
	if expireAfter == nil {
		expireAfter = np.Spec.Template.Spec.ExpireAfter.Duration
	}
	if expireAfter == nil || *expireAfter <= 0 {
		return 1
	}
	age := now.Sub(nc.CreationTimestamp.Time)
	return math.Min(math.Max(float64(*expireAfter-age)/float64(*expireAfter), 0), 1)
}

// Setting is the app setting that turns static capacity off.
const Setting = EnvStaticCapacity

// EnvStaticCapacity names the setting where the handler's settings are
// listed ("true"/"false", default true).
const EnvStaticCapacity = "KARPFUNC_STATIC_CAPACITY"

// ReasonDisabled is the reason of the event and the ValidationSucceeded
// condition of a static NodePool while static capacity is off.
const ReasonDisabled = "StaticCapacityDisabled"

// DisabledMessage says why np is refused while static capacity is off.
func DisabledMessage(np *karpv1.NodePool) string {
	return fmt.Sprintf("NodePool %s sets spec.replicas (static capacity), but static capacity is turned off (%s=false): karpfunc launches no node for it; set %s=true or remove the NodePool",
		np.Name, Setting, Setting)
}

// Unsettled names the static NodePools in pools whose claims in objs are
// not at replicas such that a provisioning pass would create (only when
// the pool is not in notReady) or delete some. Every other pool is left out, so a
// settled cluster asks for nothing.
func Unsettled(pools []*karpv1.NodePool, notReady map[string]string, objs Objects, now time.Time) []string {
	var out []string
	for _, np := range pools {
		if !IsStatic(np) || np.DeletionTimestamp != nil {
			continue
		}
		// A pool not Ready gets no new claim (Karpenter waits for Ready)
		// but still loses its surplus.
		_, blocked := notReady[np.Name]
		if d := Decide(np, ClaimsOf(np, objs, now)); (d.Create > 0 && !blocked) || len(d.Delete) > 0 {
			out = append(out, np.Name)
		}
	}
	return out
}
