// Package scheduler decides where pending pods go: onto existing nodes and
// in-flight NodeClaims first, then onto new NodeClaims. It is pure: a
// snapshot in, a plan out, no I/O.
//
// It honours Karpenter's constraints with Karpenter's semantics: requests
// (init containers, sidecars, overhead), per-type DaemonSet overhead,
// nodeSelector, required node affinity (terms tried in order), taints
// (startup and ephemeral taints ignored on existing nodes), topology spread
// (zone, capacity type, hostname and custom keys; maxSkew, minDomains,
// matchLabelKeys, nodeTaintsPolicy, nodeAffinityPolicy), pod affinity and
// anti-affinity (required, both directions for anti-affinity; namespaces
// and namespaceSelector as Kubernetes resolves them), host ports, volume
// topology, NodePool requirements, minValues, weights and limits.
// Preferences (preferred pod affinity, anti-affinity, node affinity,
// ScheduleAnyway spread, PreferNoSchedule taints) are required until a pod
// cannot be placed, then relaxed one at a time in Karpenter's order.
// A pod with pod affinity or topology spread that finds no place is tried
// again once the others are placed, as Karpenter requeues it. A label a
// pod's node selector or affinity needs present is never taken as
// satisfied by a node without it, even where Karpenter's requirement sets
// cannot tell the two apart (see presence.go).
//
// Speed comes from the design: identical pods form groups whose
// requirements, compatible instance types (bitsets) and topology counters
// are computed once; resources are integer vectors; a claim keeps only the
// options that still fit. Claims are packed up to their most cost-efficient
// option (by the dual prices of the LP covering all pending pods), which
// keeps fleets near the LP lower bound.
package scheduler

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
)

// Input is a snapshot of the cluster.
type Input struct {
	Pods       []*corev1.Pod // pending pods to place
	Nodes      []*corev1.Node
	BoundPods  []*corev1.Pod // pods already bound to Nodes (consume capacity)
	NodeClaims []*karpv1.NodeClaim
	// HeldNodeClaims count against their NodePools' limits but are never
	// capacity (a caller that leaves some nodes out of Nodes passes their
	// NodeClaims here, not in NodeClaims).
	HeldNodeClaims []*karpv1.NodeClaim
	NodePools      []*karpv1.NodePool
	NodeClasses    []*v1beta1.AKSNodeClass
	DaemonSets     []*appsv1.DaemonSet
	Catalog        *catalog.Catalog
	// PoolCatalogs are NodePools' own views of Catalog where NodeOverlays
	// change prices or capacities (package nodeoverlay); a NodePool not
	// in it uses Catalog. Pass the same maps to every solve over one
	// snapshot: the Memo keys on their instance types.
	PoolCatalogs map[string]*catalog.Catalog
	// Volumes: a pending pod's PVCs pin it to where their bound PVs live
	// (PV node affinity) or where their StorageClass may provision
	// (allowedTopologies).
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	// Namespaces resolve the namespaceSelector of pod (anti-)affinity
	// terms by their labels. A namespace that pods use but that is not
	// listed still matches on kubernetes.io/metadata.name, the label the
	// API server puts on every namespace.
	Namespaces []*corev1.Namespace
	// NotReady names NodePools that are not Ready and why: like
	// Karpenter's provisioner, nothing is launched from them, and a pod
	// only they could take is unschedulable with that reason. nil (plans
	// from files, where status is not kept) trusts every NodePool.
	NotReady map[string]string
	// DefaultMaxPods is a node's pod count when its AKSNodeClass sets no
	// maxPods: the cluster network's default (30 on the node subnet, 250
	// on overlay); 0 is v1beta1.DefaultMaxPods.
	DefaultMaxPods int32
	// Memo, when set, is reused across solves over the same snapshot (see
	// Memo); nil computes everything afresh.
	Memo *Memo
	// Spread models the kube-scheduler instead of planning: Pods are taken
	// in the order given, each goes to the feasible Node or in-flight
	// NodeClaim the kube-scheduler's default scoring ranks first
	// (LeastAllocated plus BalancedAllocation on CPU and memory), and no
	// new NodeClaim is opened. A pod no node can take is Unschedulable.
	// Disruption uses it to check that a consolidation does not depend on
	// the kube-scheduler reproducing our first-fit packing.
	Spread bool
	// PackLargest packs like Karpenter's scheduler: a new NodeClaim keeps
	// every instance type that still holds its pods and takes pods while
	// any of them does, so pods share as few new NodeClaims as fit; each
	// plan still lists its types cheapest first. Without it a claim packs
	// to its most cost-efficient type and the pods may be spread over
	// several cheaper claims. Consolidation uses it to ask Karpenter's
	// question: do the pods fit on one new node?
	PackLargest bool
	// Quota is what the subscription's vCPU quotas leave for new claims
	// (see Quota); nil limits nothing.
	Quota *Quota
}

// CatalogFor is the catalog NodePool nodePool plans and is charged with:
// its PoolCatalogs entry, else Catalog.
func (in Input) CatalogFor(nodePool string) *catalog.Catalog {
	if cat, ok := in.PoolCatalogs[nodePool]; ok && cat != nil {
		return cat
	}
	return in.Catalog
}

// Result is the plan: every input pod appears exactly once across Existing,
// NewNodeClaims and Unschedulable.
type Result struct {
	Existing      []Placement
	NewNodeClaims []*NodeClaimPlan
	Unschedulable []Unschedulable
	// InvalidNodePools are NodePools that can launch nothing because of
	// their own configuration (today: no instance type they allow has a
	// node image), with a reason for an event on the NodePool.
	InvalidNodePools []InvalidNodePool
}

// InvalidNodePool is a NodePool that can launch nothing, and why.
type InvalidNodePool struct {
	NodePool *karpv1.NodePool
	Reason   string
}

// Placement puts pods on an existing Node or an in-flight NodeClaim. Node is
// empty for a NodeClaim that has no Node yet; NodeClaim is empty for a Node
// Karpenter does not manage.
type Placement struct {
	Node      string
	NodeClaim string
	Pods      []*corev1.Pod
}

// NodeClaimPlan is one NodeClaim to create.
type NodeClaimPlan struct {
	NodePool  *karpv1.NodePool
	NodeClass *v1beta1.AKSNodeClass
	Pods      []*corev1.Pod
	// Requirements are the NodePool's requirements narrowed by the pods', plus
	// node.kubernetes.io/instance-type In InstanceTypes.
	Requirements scheduling.Requirements
	// InstanceTypes fit all Pods plus daemonset overhead, cheapest first. They
	// carry the pods capacity of the AKSNodeClass's maxPods.
	InstanceTypes []*catalog.InstanceType
	// Requests are the pods' requests plus the daemonset overhead.
	Requests corev1.ResourceList
}

// Cheapest returns the cheapest available (instance type, offering) that
// Requirements allow, by the one rule the launcher uses too
// (cloudprovider.Cheapest: price, then name, zone, capacity type); spot
// wins whenever it is allowed and cheaper. It returns nil when nothing is
// offered.
func (p *NodeClaimPlan) Cheapest() (*catalog.InstanceType, catalog.Offering) {
	return cloudprovider.Cheapest(p.InstanceTypes, p.Requirements)
}

// Unschedulable is a pod no NodePool can take, with a reason a person can act on.
type Unschedulable struct {
	Pod    *corev1.Pod
	Reason string
}

// Solve places in.Pods. It never fails: problems with the input become
// Unschedulable reasons.
func Solve(in Input) Result {
	res := solveFor(in, nil)
	if in.Spread || len(res.Unschedulable) == 0 {
		return res
	}
	// Pods left pending by required pod affinity on kubernetes.io/hostname
	// to other pods may need those pods on more nodes than first fit put
	// them on (each affine pod's own spread or anti-affinity allows so
	// many per node): solve again with the targets on nodes of their own
	// while they can be (see spreadTargets), and keep that plan if it
	// leaves fewer pods pending. Likewise pods left pending by required
	// pod affinity on the zone to other pods, when they can run in some
	// zones only: their targets are placed again in those zones while
	// they can be.
	if targets := hostAffinityTargets(res.Unschedulable); targets != nil {
		if spread := solveFor(in, targets); len(spread.Unschedulable) < len(res.Unschedulable) {
			return spread
		}
	}
	return res
}

// solveFor is Solve with the pods targets selects spread over nodes (see
// spreadTargets; nil: none).
func solveFor(in Input, targets spreadTargets) Result {
	res, scarce := solveOnce(in, false, targets)
	byQueue := false
	if scarce && !in.Spread {
		// NodePool limits left pods pending: which pods get the capacity
		// there is decided by Karpenter's queue order (see queueOrder),
		// not by the interleaving that packs for cost. The queue's plan
		// is kept unless it leaves more pods pending.
		if queued, _ := solveOnce(in, true, targets); len(queued.Unschedulable) <= len(res.Unschedulable) {
			res, byQueue = queued, true
		}
	}
	if in.Spread || in.PackLargest || len(res.NewNodeClaims) < 2 || len(in.Pods) > smallBatch {
		return res
	}
	// A small batch: the LP that picks the type claims pack to prices
	// fractions of nodes, and for a handful of pods several small nodes
	// can look cheaper than one larger node that holds them all with its
	// single DaemonSet overhead, when they are not. Karpenter's packing
	// (one claim takes pods while any of its types holds them, and
	// launches the cheapest that does) finds that node: keep whichever
	// fleet is cheaper, with no more pods left pending.
	largest := in
	largest.PackLargest = true
	if packed, _ := solveOnce(largest, byQueue, targets); len(packed.Unschedulable) <= len(res.Unschedulable) && fleetPrice(packed) < fleetPrice(res)-1e-9 {
		return packed
	}
	return res
}

// solveOnce runs one solve, with the pods in Karpenter's queue order
// when byQueue and targets' pods spread over nodes, and reports whether a NodePool's limits left a pod
// pending.
func solveOnce(in Input, byQueue bool, targets spreadTargets) (Result, bool) {
	s := newSolverFor(in, byQueue, targets)
	res := s.solve()
	return res, slices.ContainsFunc(s.pools, func(pl *pool) bool { return pl.overLimits != "" })
}

// smallBatch is the most pending pods for which Solve also tries
// Karpenter's packing (see Solve): beyond it the LP's fractional nodes
// are a close estimate of whole ones, and the second solve would cost
// time for nothing.
const smallBatch = 100

// fleetPrice is the hourly price of res's new claims, each at its
// cheapest offering.
func fleetPrice(res Result) float64 {
	total := 0.0
	for _, plan := range res.NewNodeClaims {
		if _, offering := plan.Cheapest(); offering.Price > 0 {
			total += offering.Price
		}
	}
	return total
}

// placePending places one pending pod.
func (s *solver) placePending(pending pendingPod) bool {
	s.current, s.prefer = pending.pod, pending.prefer
	return s.place(pending.g)
}

// retry tries the pods that found no place again, in rounds, for as long
// as a round places one, and returns those still unplaced. Placing other
// pods can only make room scarcer, limits tighter and anti-affinity
// stricter, but it can meet a pod's required pod affinity (its target
// was smaller, so placed after it) or raise a spread constraint's
// minimum domain: pods with such a rule are retried, as Karpenter's
// scheduler requeues a pod that failed and keeps going while the queue
// makes progress (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/scheduler.go Solve,
// queue.go Pop/Push). The others would fail the same way again.
func (s *solver) retry(failed []pendingPod) []pendingPod {
	for {
		var still []pendingPod
		placed := false
		for _, pending := range failed {
			if s.mayPlaceLater(pending.g) && s.placePending(pending) {
				placed = true
			} else {
				still = append(still, pending)
			}
		}
		failed = still
		if !placed || len(failed) == 0 {
			return failed
		}
	}
}

// lastTries tries the failed pods again (see retry), then those with
// hostname spread on the nodes that exist (see placeOnNodesThatExist),
// and returns those still unplaced.
func (s *solver) lastTries(failed []pendingPod) []pendingPod {
	failed = s.retry(failed)
	if len(failed) > 0 && !s.unseenNodes {
		failed = s.placeOnNodesThatExist(failed)
	}
	return failed
}

// placeOnNodesThatExist is the last step of a solve: it tries again, in
// rounds while a round places one, the failed pods with a DoNotSchedule
// topology spread on kubernetes.io/hostname, on the nodes and claims
// already there, measuring that spread's skew as the kube-scheduler does:
// against the least count over the nodes it counts
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition),
// not against a node still to be created. Before this step every node
// keeps at most maxSkew of the pods (Karpenter's rule, which assumes a
// new node, an empty domain, can always be added: TopologyGroup
// domainMinCount in sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/topologygroup.go). A pod
// that failed could open no node that helps (NodePool limits, or its
// required pod affinity to pods already placed), so no claim is opened
// here, and none is added after (see hostMinPlaced): the least count can
// then only grow, and each placement stays within maxSkew.
func (s *solver) placeOnNodesThatExist(failed []pendingPod) []pendingPod {
	var candidates, others []pendingPod
	for _, pending := range failed {
		if s.hostnameSpread(pending.g) {
			candidates = append(candidates, pending)
		} else {
			others = append(others, pending)
		}
	}
	if len(candidates) == 0 {
		return failed
	}
	s.hostMin = true
	defer func() { s.hostMin = false }()
	for {
		var still []pendingPod
		placed := false
		for _, pending := range candidates {
			if s.placePending(pending) {
				placed, s.hostMinPlaced = true, true
			} else {
				still = append(still, pending)
			}
		}
		candidates = still
		if !placed || len(candidates) == 0 {
			return append(others, candidates...)
		}
	}
}

// hostnameSpread reports whether g's pods have a DoNotSchedule topology
// spread constraint on kubernetes.io/hostname.
func (s *solver) hostnameSpread(g *group) bool {
	for _, tsc := range g.pod.Spec.TopologySpreadConstraints {
		if tsc.TopologyKey == corev1.LabelHostname && tsc.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

// joinTarget tries again, right after placed is, the failed pods whose
// required pod affinity selects it, and returns those still unplaced. A
// pod whose affinity target was smaller (so placed after it) goes next to
// the target as it would have had the target come first, before the
// pods that follow take the room there; the retry rounds after the pass
// come too late when that room is scarce (one node a NodePool's limits
// allow, say).
func (s *solver) joinTarget(failed []pendingPod, placed pendingPod) []pendingPod {
	still := failed[:0]
	for _, pending := range failed {
		if s.affineTo(pending.g, placed) && s.placePending(pending) {
			continue
		}
		still = append(still, pending)
	}
	return still
}

// followers pulls forward, right after a pod is placed, the pending pods
// whose required pod affinity selects it (replicas with affinity to each
// other on kubernetes.io/hostname, say): they go next to it before pods
// ordered between them take the room there, as if they had come first.
// Karpenter's queue, which orders by size only, keeps such replicas
// together; the interleaving of big and small pods for cost does not.
type followers struct {
	groups []*follower
	done   []bool // by index in s.order: tried already
	// targets[id] lists (by index in groups) the followers whose required
	// pod affinity selects the pods of the group with that id, in groups'
	// order; computed when a pod of that group is first placed. Every pod
	// of a group has the group's namespace and labels, so the answer is
	// the group's.
	targets [][]int32
	// counters are the followers' affinity counters, each once, and
	// drawnBy[i] the followers (by index in groups, ascending) whose
	// affinity counts through counters[i].
	counters []*counter
	drawnBy  [][]int32
}

// follower is a group whose pods have required pod affinity.
type follower struct {
	g      *group
	queued []int // its pods' indices in s.order
	next   int   // how far queued was tried
}

func (s *solver) newFollowers() *followers {
	f := &followers{}
	if s.spread || s.byQueue {
		// The kube-scheduler's model takes pods in the order given, and
		// Karpenter's queue (which decides who gets capacity NodePool
		// limits hold back) tries each pod in its turn: a pod that
		// follows its target ahead of older pods of its size would take
		// their capacity. A pod that failed waits for the retry rounds
		// (no joinTarget), as Karpenter requeues it at the back.
		return f
	}
	byGroup := make([]int32, len(s.groups)) // follower index + 1 per group id; 0 unseen, -1 none
	counterAt := map[*counter]int{}         // index in f.counters
	for i, pending := range s.order {
		at := byGroup[pending.g.id]
		if at == 0 {
			at = -1
			if affinity := s.affinityCounters(pending.g); len(affinity) > 0 {
				f.groups = append(f.groups, &follower{g: pending.g})
				at = int32(len(f.groups))
				for _, c := range affinity {
					ci, ok := counterAt[c]
					if !ok {
						ci = len(f.counters)
						counterAt[c] = ci
						f.counters, f.drawnBy = append(f.counters, c), append(f.drawnBy, nil)
					}
					if drawn := f.drawnBy[ci]; len(drawn) == 0 || drawn[len(drawn)-1] != at-1 {
						f.drawnBy[ci] = append(drawn, at-1)
					}
				}
			}
			byGroup[pending.g.id] = at
		}
		if at > 0 {
			fl := f.groups[at-1]
			fl.queued = append(fl.queued, i)
		}
	}
	if len(f.groups) > 0 {
		f.done = make([]bool, len(s.order))
		f.targets = make([][]int32, len(s.groups))
	}
	return f
}

// affinityCounters are the counters of g's required pod affinity terms.
func (s *solver) affinityCounters(g *group) []*counter {
	variant := s.variantAt(g, 0)
	if variant == nil {
		return nil
	}
	var out []*counter
	for _, k := range variant.constraints {
		if k.kind == affinity {
			out = append(out, k.c)
		}
	}
	return out
}

func (f *followers) tried(i int) bool {
	if f.done == nil {
		return false
	}
	was := f.done[i]
	f.done[i] = true
	return was
}

// follow places the not yet tried pods whose required pod affinity
// selects placed, adding those that fail to failed.
func (f *followers) follow(s *solver, placed pendingPod, failed []pendingPod) []pendingPod {
	if len(f.groups) == 0 {
		return failed
	}
	targets := f.targets[placed.g.id]
	if targets == nil {
		targets = make([]int32, 0)
		matched := 0
		for i, c := range f.counters {
			if c.matches(placed.g.ns, placed.g.labels) {
				targets = append(targets, f.drawnBy[i]...)
				matched++
			}
		}
		if matched > 1 {
			slices.Sort(targets)
			targets = slices.Compact(targets)
		}
		f.targets[placed.g.id] = targets
	}
	for _, i := range targets {
		fl := f.groups[i]
		for _, at := range fl.queued[fl.next:] {
			if f.done[at] {
				continue
			}
			f.done[at] = true
			if !s.placePending(s.order[at]) {
				failed = append(failed, s.order[at])
			}
		}
		fl.next = len(fl.queued)
	}
	return failed
}

// affineTo reports whether g's pods have a required pod affinity term
// that selects placed's pod.
func (s *solver) affineTo(g *group, placed pendingPod) bool {
	variant := s.variantAt(g, 0)
	if variant == nil {
		return false
	}
	for _, k := range variant.constraints {
		if k.kind == affinity && k.c.matches(placed.pod.Namespace, placed.pod.Labels) {
			return true
		}
	}
	return false
}

// mayPlaceLater reports whether g's pods have a rule other pods' placement
// can satisfy: required or preferred pod affinity, or topology spread.
func (s *solver) mayPlaceLater(g *group) bool {
	variant := s.variantAt(g, 0)
	if variant == nil {
		return false
	}
	for _, k := range variant.constraints {
		if k.kind == affinity || k.kind == spread {
			return true
		}
	}
	return false
}

// solve places every pending pod, then repairs and reports.
func (s *solver) solve() Result {
	var res Result
	var failed []pendingPod
	f := s.newFollowers()
	for i, pending := range s.order {
		if f.tried(i) {
			continue
		}
		if !s.placePending(pending) {
			failed = append(failed, pending)
			continue
		}
		if len(failed) > 0 && !s.byQueue {
			failed = s.joinTarget(failed, pending)
		}
		failed = f.follow(s, pending, failed)
	}
	for _, pending := range s.lastTries(failed) {
		s.current, s.prefer = pending.pod, pending.prefer
		res.Unschedulable = append(res.Unschedulable, Unschedulable{Pod: pending.pod, Reason: s.unplacedReason(pending.g)})
	}
	if !s.spread {
		s.repair()
	}
	for _, pl := range s.pools {
		if pl.invalidNodePool {
			res.InvalidNodePools = append(res.InvalidNodePools, InvalidNodePool{NodePool: pl.np, Reason: pl.invalid})
		}
	}
	for _, bin := range s.bins {
		if bin.claim {
			if len(bin.pods) == 0 {
				continue // the repair pass emptied it
			}
			res.NewNodeClaims = append(res.NewNodeClaims, s.plan(bin))
		} else if len(bin.pods) > 0 {
			res.Existing = append(res.Existing, Placement{Node: bin.node, NodeClaim: bin.claimName, Pods: bin.pods})
		}
	}
	return res
}
