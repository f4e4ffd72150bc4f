package scheduler

import (
	"cmp"
	"math/bits"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// bin is somewhere pods can go: an existing Node, an in-flight NodeClaim,
// or a new NodeClaim being packed (claim). A new claim narrows as pods join
// it: instance types, zones, capacity types and custom labels.
type bin struct {
	id      int
	claim   bool
	pool    *pool
	poolIdx int

	// Existing capacity.
	node, claimName string
	labels          labels.Set
	// reqs are the requirements of the labels; an existing node's are
	// built on first use (see requirements), from nodeObject.
	reqs       scheduling.Requirements
	nodeObject *corev1.Node
	inFlight   bool
	taints     scheduling.Taints
	// compat caches, per requirements key, whether a variant's
	// requirements are compatible with reqs (nil until the first).
	compat map[string]bool

	// New claims: what is still possible.
	types      bitset
	zones, cts uint64
	custom     scheduling.Requirements
	customKeys map[string]bool
	absorbed   map[*poolVariant]bool
	opts       []*ptype // types that fit used, most cost-efficient first
	target     *ptype
	charge     []int64
	quota      *quotaCharge // what it holds against quota (nil: none)

	// maxRoom bounds what fits: the largest option's room, or an existing
	// node's allocatable minus what is bound there.
	maxRoom resVec
	// alloc is a node's or in-flight claim's allocatable (what the
	// kube-scheduler scores against); nil for new claims.
	alloc  resVec
	used   resVec
	pods   []*corev1.Pod
	placed []placed // new claims: pods with what the repair pass needs
	ports  []hostPort
	// pending are pods counted for a topology key whose domain this claim
	// has not settled yet; they are counted once it does.
	pending []pendingCount
	closed  bool
}

type pendingCount struct {
	c *counter
	n int32
}

// choice is a tentative placement: the bin's narrowed state.
type choice struct {
	types      bitset // nil: unchanged
	zones, cts uint64
	custom     scheduling.Requirements // nil: unchanged
	vp         *poolVariant
	target     *ptype
}

// customMask is the set of values (as a mask over the key's table) a bin's
// node may carry for a custom topology key.
func (s *solver) customMask(b *bin, custom scheduling.Requirements, key string) uint64 {
	table := s.dom.table(key)
	if !b.claim {
		if value, ok := b.labels[key]; ok {
			if i := table.intern(value); i >= 0 {
				return 1 << i
			}
		}
		if b.inFlight && b.reqs.Has(key) {
			return maskOf(table, b.reqs.Get(key))
		}
		return 0
	}
	if custom == nil || !custom.Has(key) {
		return 0
	}
	return maskOf(table, custom.Get(key))
}

func maskOf(t *valueTable, r *scheduling.Requirement) uint64 {
	var mask uint64
	for i, value := range t.values {
		if r.Has(value) {
			mask |= 1 << i
		}
	}
	return mask
}

// universe is the set of domains a spread constraint counts: those some
// NodePool can launch into for this pod (honouring its node affinity unless
// nodeAffinityPolicy is Ignore, and its NoSchedule and NoExecute taints
// when nodeTaintsPolicy is Honor, as the kube-scheduler does), plus those
// of existing nodes.
func (s *solver) universe(k *constraint, v *variant) uint64 {
	if k.universeSet {
		return k.universe
	}
	k.universe, k.universeSet = s.poolDomains(k, v)|s.nodeDomains(k, v), true
	return k.universe
}

// poolDomains is the part of the universe the NodePools can launch into.
//
// Under Honor a pool's domains are those its nodes can be in while
// meeting the pod's nodeSelector and one of its required node affinity
// terms (any term, not only the one the variant is at): the nodes
// kube-scheduler's PodTopologySpread counts, and Karpenter's
// TopologyNodeFilter. The variant's preferred terms and volume
// requirements narrow where this pod may go, not which domains the skew
// is measured over.
func (s *solver) poolDomains(k *constraint, v *variant) uint64 {
	var domains uint64
	filter, keys := s.groupNodeFilter(v.g)
	for _, pl := range s.pools {
		if k.honorTaints && !toleratesHard(pl.taints, v.g.pod.Spec.Tolerations) {
			continue
		}
		if k.ignoreAffinity {
			// Ignore: a domain counts wherever the pool offers it, whatever
			// the pod's nodeSelector and required node affinity say
			// (Kubernetes includes every node; Karpenter's node filter then
			// passes every NodeClaim). The pool's own requirements still
			// bound what it can launch.
			domains |= s.offeredDomains(k, s.poolVariant(pl, scheduling.NewRequirements(), ""))
			continue
		}
		for j, reqs := range filter {
			domains |= s.offeredDomains(k, s.poolVariant(pl, reqs, keys[j]))
		}
	}
	return domains
}

// offeredDomains is the domains of k's key pool variant vp offers (none
// when vp admits nothing).
func (s *solver) offeredDomains(k *constraint, vp *poolVariant) uint64 {
	if !vp.ok {
		return 0
	}
	switch k.c.kind {
	case keyZone:
		return vp.offeredZones
	case keyCapacityType:
		return vp.offeredCTs
	case keyCustom:
		if vp.custom.Has(k.c.key) {
			return maskOf(s.dom.table(k.c.key), vp.custom.Get(k.c.key))
		}
	}
	return 0
}

// groupNodeFilter is the group's topology node filter (one requirements
// set per required node affinity term) and each set's key, built on first
// use.
func (s *solver) groupNodeFilter(g *group) ([]scheduling.Requirements, []string) {
	if g.nodeFilter == nil {
		g.nodeFilter = s.counters.nodeFilterOf(g.pod)
	}
	if g.nodeFilterKeys == nil {
		g.nodeFilterKeys = make([]string, len(g.nodeFilter))
		for i, reqs := range g.nodeFilter {
			g.nodeFilterKeys[i] = requirementsKey(reqs)
		}
	}
	return g.nodeFilter, g.nodeFilterKeys
}

// nodeDomains is the part of the universe existing nodes and in-flight
// claims are settled in.
func (s *solver) nodeDomains(k *constraint, v *variant) uint64 {
	var domains uint64
	for _, bin := range s.bins {
		if bin.claim {
			break
		}
		// Under Honor, as in Kubernetes and Karpenter's node filter, a node
		// the pod's nodeSelector and required node affinity (any term)
		// exclude is no domain, nor is one whose taints the pod does not
		// tolerate when nodeTaintsPolicy is Honor.
		if !k.ignoreAffinity && !s.nodeFilterMatches(bin, v) {
			continue
		}
		if k.honorTaints && !toleratesHard(bin.taints, v.g.pod.Spec.Tolerations) {
			continue
		}
		domains |= s.settledDomain(bin, k.c)
	}
	return domains
}

// settledDomain is the domain mask of existing bin b for c's key when it
// is settled on one domain (a node always is for zone and capacity type),
// else 0.
func (s *solver) settledDomain(b *bin, c *counter) uint64 {
	switch c.kind {
	case keyZone:
		if !b.inFlight || popcount(b.zones) == 1 {
			return b.zones
		}
	case keyCapacityType:
		if !b.inFlight || popcount(b.cts) == 1 {
			return b.cts
		}
	case keyCustom:
		if mask := s.customMask(b, nil, c.key); popcount(mask) == 1 {
			return mask
		}
	}
	return 0
}

// nodeFilterMatches reports whether existing bin b passes the group's
// topology node filter: the nodeSelector together with one of the required
// node affinity terms. Preferred terms and volume requirements are not part
// of it, as in Karpenter's TopologyNodeFilter.
func (s *solver) nodeFilterMatches(b *bin, v *variant) bool {
	group := v.g
	if group.nodeFilter == nil {
		group.nodeFilter = s.counters.nodeFilterOf(group.pod)
	}
	return s.meetsFilter(b, group.nodeFilter)
}

// meetsFilter reports whether existing bin b meets one of filter's
// requirement sets.
func (s *solver) meetsFilter(b *bin, filter []scheduling.Requirements) bool {
	for _, reqs := range filter {
		if len(reqs) == 0 {
			return true // Compatible with no requirements is nil, whatever b's
		}
		var err error
		if b.inFlight {
			err = s.requirements(b).Compatible(reqs, allowWellKnown)
		} else {
			err = s.requirements(b).Compatible(reqs)
		}
		if err == nil {
			return true
		}
	}
	return false
}

// requirements are existing bin b's requirements, built from its node's
// labels on first use: a large cluster's solve tries few of its nodes.
func (s *solver) requirements(b *bin) scheduling.Requirements {
	if b.reqs == nil && b.nodeObject != nil {
		b.reqs = s.memo.nodeRequirements(b.nodeObject, s.labelReqs)
	}
	return b.reqs
}

func topologyNodeFilter(pod *corev1.Pod) []scheduling.Requirements {
	sel := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
	affinity := pod.Spec.Affinity
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []scheduling.Requirements{sel}
	}
	var out []scheduling.Requirements
	for _, term := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		reqs := scheduling.NewRequirements(sel.Values()...)
		reqs.Add(scheduling.NewNodeSelectorRequirements(term.MatchExpressions...).Values()...)
		out = append(out, reqs)
	}
	return out
}

// allowed narrows mask (the domains a bin may be in) to those where the
// constraint lets the pod go.
func (s *solver) allowed(k *constraint, v *variant, mask uint64) uint64 {
	switch k.kind {
	case spread:
		return s.spreadAllowed(k, v, mask)
	case affinity:
		if k.c.total == 0 {
			if k.self == 1 {
				return mask // the first of a self-affine set goes anywhere
			}
			return 0
		}
		return occupiedDomains(k.c, mask)
	case antiAffinity, blocked:
		return emptyDomains(k.c, mask)
	}
	return 0
}

// spreadAllowed keeps the domains of mask in the constraint's universe
// where one more pod stays within maxSkew of the least loaded domain.
func (s *solver) spreadAllowed(k *constraint, v *variant, mask uint64) uint64 {
	universe := s.universe(k, v)
	minimum := spreadMinimum(k, universe)
	var out uint64
	for rest := mask & universe; rest != 0; rest &= rest - 1 {
		domain := bits.TrailingZeros64(rest)
		if k.c.count(domain)+k.self-minimum <= k.maxSkew {
			out |= 1 << domain
		}
	}
	return out
}

// spreadMinimum is the least count over universe's domains, or 0 when
// fewer than minDomains domains are eligible.
func spreadMinimum(k *constraint, universe uint64) int32 {
	if k.minDomains != 0 && int32(popcount(universe)) < k.minDomains {
		return 0
	}
	minimum := int32(0)
	first := true
	for rest := universe; rest != 0; rest &= rest - 1 {
		if count := k.c.count(bits.TrailingZeros64(rest)); first || count < minimum {
			minimum = count
			first = false
		}
	}
	return minimum
}

// occupiedDomains keeps the domains of mask where counter counts a pod.
func occupiedDomains(counter *counter, mask uint64) uint64 {
	var out uint64
	for rest := mask; rest != 0; rest &= rest - 1 {
		if domain := bits.TrailingZeros64(rest); counter.count(domain) > 0 {
			out |= 1 << domain
		}
	}
	return out
}

// emptyDomains keeps the domains of mask where counter counts no pod.
func emptyDomains(counter *counter, mask uint64) uint64 {
	var out uint64
	for rest := mask; rest != 0; rest &= rest - 1 {
		if domain := bits.TrailingZeros64(rest); counter.count(domain) == 0 {
			out |= 1 << domain
		}
	}
	return out
}

// hostAllowed evaluates a hostname-keyed constraint on bin b.
//
// Hostname spread takes the global minimum as 0, as Karpenter does
// (TopologyGroup.domainMinCount returns 0 for kubernetes.io/hostname "since
// we can create one", and nextDomainTopologySpread admits a node when its
// count plus the pod is at most maxSkew): a new node is a domain with no
// matching pods, so the minimum over all domains, future nodes included,
// is 0. That holds for existing nodes too, and minDomains changes nothing
// (it can only force the minimum to 0). kube-scheduler, which cannot add
// nodes, takes the minimum over existing nodes only and may accept a busier
// node; the node Karpenter's rule picks satisfies kube-scheduler as well,
// since a count of at most maxSkew never exceeds min+maxSkew.
func hostAllowed(k *constraint, b *bin) bool {
	count := k.c.count(b.id)
	switch k.kind {
	case spread:
		return count+k.self <= k.maxSkew
	case affinity:
		return count > 0 || (k.c.total == 0 && k.self == 1)
	default:
		return count == 0
	}
}

// hostRuleAllows evaluates hostname-keyed rule k on b: hostAllowed, but
// the first of replicas that must share a node needs room for all of
// them while wholeGroup is set (see place), and hostname spread measures
// against the least count over existing nodes while hostMin is set (see
// placeOnNodesThatExist).
func (s *solver) hostRuleAllows(k *constraint, b *bin, v *variant) bool {
	if s.wholeGroup && k.kind == affinity && k.self == 1 && k.c.total == 0 {
		return fitsSum(b.used, v.g.req.times(int64(v.g.pending)), b.maxRoom)
	}
	if s.hostMin && k.kind == spread {
		return k.c.count(b.id)+k.self-s.hostMinimum(k, v) <= k.maxSkew
	}
	return hostAllowed(k, b)
}

// hostMinimum is the least count of k's counter over the nodes the
// kube-scheduler counts for hostname spread k once the plan is carried
// out: the existing nodes and in-flight claims that meet the pod's
// nodeSelector and required node affinity (under nodeAffinityPolicy
// Honor) and whose NoSchedule and NoExecute taints it tolerates (under
// nodeTaintsPolicy Honor), and every new claim with pods (whatever its
// requirements: counting one that may not qualify can only lower the
// least count). 0 when fewer than minDomains nodes qualify.
func (s *solver) hostMinimum(k *constraint, v *variant) int32 {
	if k.hostMinAt == s.commits+1 {
		return k.hostMin
	}
	minimum, nodes := int32(-1), int32(0)
	for _, b := range s.bins {
		if b.claim && len(b.pods) == 0 {
			continue
		}
		if !b.claim && !k.ignoreAffinity && !s.nodeFilterMatches(b, v) {
			continue
		}
		if k.honorTaints && !toleratesHard(b.nodeTaints(), v.g.pod.Spec.Tolerations) {
			continue
		}
		if count := k.c.count(b.id); minimum < 0 || count < minimum {
			minimum = count
		}
		nodes++
	}
	if minimum < 0 || (k.minDomains > 0 && nodes < k.minDomains) {
		minimum = 0
	}
	k.hostMin, k.hostMinAt = minimum, s.commits+1
	return minimum
}

// nodeTaints are the taints b's node has: an existing node's or in-flight
// claim's lasting taints, or a new claim's NodePool's.
func (b *bin) nodeTaints() []corev1.Taint {
	if b.claim {
		return b.pool.taints
	}
	return b.taints
}

// toleratesHard reports whether tolerations tolerate every NoSchedule and
// NoExecute taint of taints: the taints the kube-scheduler's
// PodTopologySpread filters nodes by under nodeTaintsPolicy Honor
// (k8s.io/kubernetes pkg/scheduler/framework/plugins/podtopologyspread,
// via TaintToleration's rule); PreferNoSchedule keeps no pod off a node.
func toleratesHard(taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	for i := range taints {
		if taints[i].Effect != corev1.TaintEffectNoSchedule && taints[i].Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if scheduling.Taints(taints[i:i+1]).Tolerates(tolerations) != nil {
			return false
		}
	}
	return true
}

// dimension is one topology key a placement must settle.
type dimension struct {
	kind  keyKind
	key   string
	cands []uint64 // single-domain masks in preference order, or the whole mask
}

// try places one pod of v's group on b if it can, committing when commit
// is set. failed is the topology rule that ruled b out, if one did.
func (s *solver) try(b *bin, v *variant, commit bool) (ok bool, failed *constraint) {
	if !fitsSum(b.used, v.g.req, b.maxRoom) {
		return false, nil
	}
	ch := choice{zones: b.zones, cts: b.cts}
	if b.claim {
		if !s.narrowClaim(b, v, &ch) {
			return false, nil
		}
	} else if !s.existingAdmits(b, v) {
		return false, nil
	}
	if portsConflict(b, v.g) {
		return false, nil
	}

	// Topology: what each constrained key allows on this bin.
	var dimBuf [4]dimension
	dims := dimBuf[:0]
	if len(v.constraints) > 0 {
		if dims, failed = s.topology(b, v, &ch, dims); failed != nil {
			return false, failed
		}
	}
	if b.claim {
		if !s.settle(b, v, &ch, dims, 0) {
			return false, nil
		}
	} else if !s.settledOn(b, dims) {
		return false, nil
	}
	if commit {
		s.commit(b, v, ch)
	}
	return true, nil
}

// narrowClaim narrows ch, a new claim's state, to what v's pool variant
// allows, and reports whether anything is left.
func (s *solver) narrowClaim(b *bin, v *variant, ch *choice) bool {
	vp := s.variantPool(v, b.poolIdx)
	if !vp.ok || !v.toleratesPool(b.pool, b.poolIdx) {
		return false
	}
	ch.vp = vp
	if b.absorbed[vp] {
		return true
	}
	if !b.types.subsetOf(vp.types) {
		ch.types = b.types.and(vp.types)
	}
	ch.zones &= vp.zones
	ch.cts &= vp.cts
	if !b.customKeys[vp.customKey] {
		if b.custom.Intersects(vp.custom) != nil {
			return false
		}
		ch.custom = copyRequirements(b.custom)
		ch.custom.Add(vp.custom.Values()...)
	}
	return true
}

// existingAdmits reports whether v's pods tolerate existing bin b's taints
// and their requirements are compatible with its labels (cached per
// requirements key).
func (s *solver) existingAdmits(b *bin, v *variant) bool {
	if len(b.taints) > 0 && b.taints.Tolerates(v.tolerations) != nil {
		return false
	}
	compatible, known := b.compat[v.reqsKey]
	if !known {
		if b.inFlight {
			compatible = s.requirements(b).Compatible(v.reqs, allowWellKnown) == nil
		} else {
			compatible = s.requirements(b).Compatible(v.reqs) == nil
		}
		if compatible && len(v.mustExist) > 0 {
			_, compatible = s.missingLabel(v.mustExist, s.requirements(b))
		}
		if b.compat == nil {
			b.compat = map[string]bool{}
		}
		b.compat[v.reqsKey] = compatible
	}
	return compatible
}

// portsConflict reports whether a host port of g's pods is taken on b.
func portsConflict(b *bin, g *group) bool {
	for _, port := range g.ports {
		if slices.ContainsFunc(b.ports, port.conflicts) {
			return true
		}
	}
	return false
}

// settledOn reports whether existing bin b, which cannot change, is
// already settled on an allowed domain of each constrained key.
func (s *solver) settledOn(b *bin, dims []dimension) bool {
	for _, dim := range dims {
		if len(dim.cands) != 1 || popcount(dim.cands[0]) != 1 {
			return false
		}
		var have uint64
		switch dim.kind {
		case keyZone:
			have = b.zones
		case keyCapacityType:
			have = b.cts
		default:
			have = s.customMask(b, nil, dim.key)
		}
		if have != dim.cands[0] {
			return false
		}
	}
	return true
}

// topologyMasks is what the topology rules evaluated so far allow on a
// bin, per key, and the first spread rule of each key (which orders its
// candidates).
type topologyMasks struct {
	zone, ct                       uint64
	zoneConstrained, ctConstrained bool
	zoneSpread, ctSpread           *constraint
	// zoneGroup: the pod is the first of replicas with required pod
	// affinity to each other on the zone, so its zone is theirs too.
	zoneGroup    bool
	custom       map[string]uint64
	customSpread map[string]*constraint
}

// topology evaluates v's topology rules on b and returns the keys to
// settle, or nil and a reason when a rule rules b out.
func (s *solver) topology(b *bin, v *variant, ch *choice, dims []dimension) ([]dimension, *constraint) {
	masks := topologyMasks{zone: ch.zones, ct: ch.cts}
	for _, constraint := range v.constraints {
		if !s.applyConstraint(&masks, b, v, ch, constraint) {
			return nil, constraint
		}
	}
	if masks.zoneConstrained {
		cands := candidates(masks.zone, masks.zoneSpread, s.zoneReach())
		if masks.zoneGroup && masks.zoneSpread == nil {
			cands = s.wholeGroupZonesFirst(cands, v)
		}
		dims = append(dims, dimension{kind: keyZone, cands: cands})
	}
	if masks.ctConstrained {
		dims = append(dims, dimension{kind: keyCapacityType, cands: candidates(masks.ct, masks.ctSpread, nil)})
	}
	for _, key := range sortedKeys(masks.custom) {
		dims = append(dims, dimension{kind: keyCustom, key: key, cands: candidates(masks.custom[key], masks.customSpread[key], nil)})
	}
	return dims, nil
}

// applyConstraint narrows masks by rule k on b and reports whether any
// domain is left.
func (s *solver) applyConstraint(masks *topologyMasks, b *bin, v *variant, ch *choice, k *constraint) bool {
	if k.c.kind != keyHostname && k.kind == affinity && b.holdsPending(k.c) {
		// Pods the affinity targets are on b, in whatever domain b
		// settles in: the pod is in theirs wherever that is.
		return true
	}
	switch k.c.kind {
	case keyHostname:
		return s.hostRuleAllows(k, b, v)
	case keyZone:
		return s.applyZoneConstraint(masks, v, k)
	case keyCapacityType:
		masks.ctConstrained = true
		if masks.ct = s.allowed(k, v, masks.ct); masks.ct == 0 {
			return false
		}
		if k.kind == spread && masks.ctSpread == nil {
			masks.ctSpread = k
		}
	case keyCustom:
		return s.applyCustomConstraint(masks, b, v, ch, k)
	}
	return true
}

// applyZoneConstraint is applyConstraint for topology.kubernetes.io/zone.
func (s *solver) applyZoneConstraint(masks *topologyMasks, v *variant, k *constraint) bool {
	masks.zoneConstrained = true
	if masks.zone = s.allowed(k, v, masks.zone); masks.zone == 0 {
		return false
	}
	if k.kind == spread && masks.zoneSpread == nil {
		masks.zoneSpread = k
	}
	if k.kind == affinity && k.self == 1 && k.c.total == 0 && v.g.pending > 1 {
		masks.zoneGroup = true
	}
	return true
}

// applyCustomConstraint is applyConstraint for a custom topology key.
func (s *solver) applyCustomConstraint(masks *topologyMasks, b *bin, v *variant, ch *choice, k *constraint) bool {
	if masks.custom == nil {
		masks.custom = map[string]uint64{}
		masks.customSpread = map[string]*constraint{}
	}
	mask, seen := masks.custom[k.c.key]
	if !seen {
		custom := b.custom
		if ch.custom != nil {
			custom = ch.custom
		}
		mask = s.customMask(b, custom, k.c.key)
	}
	if mask = s.allowed(k, v, mask); mask == 0 {
		return false
	}
	masks.custom[k.c.key] = mask
	if k.kind == spread && masks.customSpread[k.c.key] == nil {
		masks.customSpread[k.c.key] = k
	}
	return true
}

// candidates orders the single domains of mask for a key with topology
// rules: least crowded first for spread, then, with reach (per domain, how
// many NodePools can launch there), the domain fewest NodePools reach,
// then lowest index. Among equally crowded domains, a claim that could go
// to several takes one few NodePools reach, and leaves the domains other
// NodePools can launch in to them: a spread over zones where one NodePool
// is limited to a single zone then still has that zone for its pods.
func candidates(mask uint64, k *constraint, reach []int) []uint64 {
	var out []uint64
	for rest := mask; rest != 0; rest &= rest - 1 {
		out = append(out, 1<<bits.TrailingZeros64(rest))
	}
	if k != nil {
		reachOf := func(d int) int {
			if d < len(reach) {
				return reach[d]
			}
			return 0
		}
		slices.SortStableFunc(out, func(a, b uint64) int {
			da, db := bits.TrailingZeros64(a), bits.TrailingZeros64(b)
			return cmp.Or(cmp.Compare(k.c.count(da), k.c.count(db)), cmp.Compare(reachOf(da), reachOf(db)))
		})
	}
	return out
}

// wholeGroupZonesFirst orders single-zone candidates for the first of
// replicas that must share a zone: first those where the NodePools the
// pods can use hold new nodes for all of v's pending pods (see
// zoneHoldsGroup), in the order given within each part. That pod
// settles the zone for all of them: where one NodePool's limits hold
// room for it alone, the others have nowhere to follow it.
func (s *solver) wholeGroupZonesFirst(cands []uint64, v *variant) []uint64 {
	holds := make(map[uint64]bool, len(cands))
	for _, c := range cands {
		holds[c] = s.zoneHoldsGroup(bits.TrailingZeros64(c), v)
	}
	slices.SortStableFunc(cands, func(a, b uint64) int {
		switch {
		case holds[a] == holds[b]:
			return 0
		case holds[a]:
			return -1
		default:
			return 1
		}
	})
	return cands
}

// zoneHoldsGroup reports whether new nodes in zone, on the NodePools v's
// pods can use there (a PreferNoSchedule taint included: the others
// tolerate it once they have relaxed their preferences), hold all of v's
// pending pods under the NodePools' limits: a NodePool without limits
// always does; one with limits holds,
// with its best type offered in the zone, as many nodes as its limits
// left allow times the pods each node takes.
func (s *solver) zoneHoldsGroup(zone int, v *variant) bool {
	want := int64(v.g.pending)
	held := int64(0)
	for i, pl := range s.pools {
		vp := s.variantPool(v, i)
		if pl.invalid != "" || !vp.ok || vp.zones&(1<<zone) == 0 || !toleratesHard(pl.taints, v.tolerations) {
			continue
		}
		if len(pl.limitLeft) == 0 {
			return true
		}
		best := int64(0)
		offers := offerMask(1<<zone, vp.cts)
		for _, t := range pl.types {
			if !vp.types.has(t.idx) || t.offers&offers == 0 {
				continue
			}
			best = max(best, podsPerNode(t.room, v.g.req)*nodesWithin(pl.limitLeft, t.limitCap))
		}
		if held += best; held >= want {
			return true
		}
	}
	return false
}

// podsPerNode is how many pods of req fit room.
func podsPerNode(room, req resVec) int64 {
	n := int64(-1)
	for j, amount := range req {
		if amount > 0 && (n < 0 || room[j]/amount < n) {
			n = room[j] / amount
		}
	}
	return max(n, 0)
}

// nodesWithin is how many nodes of limitCap the limits left allow.
func nodesWithin(left, limitCap []int64) int64 {
	n := int64(-1)
	for j, amount := range limitCap {
		if amount > 0 && (n < 0 || left[j]/amount < n) {
			n = left[j] / amount
		}
	}
	if n < 0 {
		return 1 << 20 // no limit on what this type is charged
	}
	return max(n, 0)
}

// zoneReach is, per zone index, how many usable NodePools offer some
// instance type there.
func (s *solver) zoneReach() []int {
	if s.reach != nil {
		return s.reach
	}
	s.reach = []int{}
	for _, pl := range s.pools {
		if pl.invalid != "" {
			continue
		}
		var offers uint64
		for _, t := range pl.types {
			offers |= t.offers
		}
		for bit := offers; bit != 0; bit &= bit - 1 {
			if i := bits.TrailingZeros64(bit); i%2 == 0 || offers&(1<<(i-1)) == 0 {
				z := i / 2
				for len(s.reach) <= z {
					s.reach = append(s.reach, 0)
				}
				s.reach[z]++
			}
		}
	}
	return s.reach
}

// settle picks a domain for each dimension, in order, such that some
// instance type still fits; it fills ch.
func (s *solver) settle(b *bin, v *variant, ch *choice, dims []dimension, i int) bool {
	if i == len(dims) {
		return s.fits(b, v, ch)
	}
	dim := dims[i]
	saved := *ch
	for _, cand := range dim.cands {
		switch dim.kind {
		case keyZone:
			ch.zones = cand
		case keyCapacityType:
			ch.cts = cand
		case keyCustom:
			values := []string{}
			table := s.dom.table(dim.key)
			for mask := cand; mask != 0; mask &= mask - 1 {
				values = append(values, table.values[bits.TrailingZeros64(mask)])
			}
			base := b.custom
			if ch.custom != nil {
				base = ch.custom
			}
			ch.custom = copyRequirements(base)
			ch.custom.Add(scheduling.NewRequirement(dim.key, corev1.NodeSelectorOpIn, values...))
		}
		if s.settle(b, v, ch, dims, i+1) {
			return true
		}
		*ch = saved
	}
	return false
}

// fits reports whether some option of b, narrowed by ch, holds b's pods
// plus one more of v's group, with minValues honoured.
func (s *solver) fits(b *bin, v *variant, ch *choice) bool {
	if ch.zones == 0 || ch.cts == 0 {
		return false
	}
	offers := offerMask(ch.zones, ch.cts)
	req := v.g.req
	valid := func(t *ptype) bool { return (ch.types == nil || ch.types.has(t.idx)) && t.offers&offers != 0 }
	// A claim packs up to its target: the most cost-efficient option that
	// held its first pods. Larger options stay in the list (they fit too)
	// but do not draw more pods in; if narrowing rules the target out, the
	// next most efficient option that fits takes over.
	ch.target = nil
	if target := b.target; target != nil && valid(target) && !s.packLargest && !s.pastTarget {
		if !fitsSum(b.used, req, target.room) {
			return false
		}
		ch.target = target
	}
	return optionsFit(b, req, ch, valid)
}

// optionsFit reports whether a valid option of b holds b's pods plus req,
// with minValues honoured, and sets ch.target to the first such option
// when it has none.
func optionsFit(b *bin, req resVec, ch *choice, valid func(*ptype) bool) bool {
	mv := b.pool.minValues
	var fitting []*ptype
	for _, instType := range b.opts {
		if !valid(instType) || !fitsSum(b.used, req, instType.room) {
			continue
		}
		if ch.target == nil {
			ch.target = instType
		}
		if mv == nil {
			return true
		}
		fitting = append(fitting, instType)
	}
	return ch.target != nil && (mv == nil || satisfiesMinValues(fitting, mv))
}

func satisfiesMinValues(types []*ptype, mv map[string]int) bool {
	for key, count := range mv {
		seen := map[string]bool{}
		for _, instType := range types {
			for _, val := range instType.reqs.Get(key).Values() {
				seen[val] = true
			}
		}
		if len(seen) < count {
			return false
		}
	}
	return true
}

// commit adds one pod of v's group to b in the narrowed state ch.
func (s *solver) commit(b *bin, v *variant, ch choice) {
	s.commits++
	group := v.g
	pod := s.current
	group.pending--
	b.used.addInPlace(group.req)
	b.pods = append(b.pods, pod)
	b.ports = append(b.ports, group.ports...)
	if b.claim {
		b.placed = append(b.placed, placed{pod: pod, vp: ch.vp, req: group.req, movable: movable(v)})
		if ch.types != nil {
			b.types = ch.types
		}
		b.zones, b.cts = ch.zones, ch.cts
		if ch.custom != nil {
			b.custom = ch.custom
		}
		b.absorbed[ch.vp] = true
		b.target = ch.target
		b.customKeys[ch.vp.customKey] = true
		offers := offerMask(b.zones, b.cts)
		kept := b.opts[:0]
		for i := range b.maxRoom {
			b.maxRoom[i] = 0
		}
		for _, instType := range b.opts {
			if b.types.has(instType.idx) && instType.offers&offers != 0 && b.used.fitsIn(instType.room) {
				kept = append(kept, instType)
				b.maxRoom.maxInPlace(instType.room)
			}
		}
		b.opts = kept
		if b.pool.limitNames != nil {
			s.charge(b)
		}
		if b.quota != nil {
			s.quota.charge(b)
		}
	}
	s.index.set(b)
	s.record(b, group)
}

// charge holds the largest option's capacity against the pool's limits.
func (s *solver) charge(b *bin) {
	pl := b.pool
	next := make([]int64, len(pl.limitNames))
	for _, instType := range b.opts {
		for j, amount := range instType.limitCap {
			next[j] = max(next[j], amount)
		}
	}
	for j := range next {
		var prev int64
		if b.charge != nil {
			prev = b.charge[j]
		}
		pl.limitLeft[j] -= next[j] - prev
	}
	b.charge = next
}

// record counts a pod of g on b for every counter it affects, and settles
// pending counts of keys b has now narrowed to one domain.
func (s *solver) record(b *bin, g *group) {
	for _, counter := range g.matched {
		s.count(b, counter)
	}
	for _, counter := range g.owned {
		s.count(b, counter)
	}
	if len(b.pending) > 0 {
		kept := b.pending[:0]
		for _, waiting := range b.pending {
			if domain, ok := s.domainOf(b, waiting.c); ok {
				waiting.c.add(domain, waiting.n)
			} else {
				kept = append(kept, waiting)
			}
		}
		b.pending = kept
	}
}

// holdsPending reports whether b holds pods counted for c that wait for
// b to settle its domain.
func (b *bin) holdsPending(c *counter) bool {
	for _, waiting := range b.pending {
		if waiting.c == c && waiting.n > 0 {
			return true
		}
	}
	return false
}

// count counts one pod on b for c: in b's domain if settled, in every
// domain b may land in for an owner, else pending until b settles.
func (s *solver) count(b *bin, c *counter) {
	if c.filtered && !b.claim && !s.meetsFilter(b, c.filter) {
		return // a node the constraint's node filter excludes
	}
	if c.honorTaints && !toleratesHard(b.nodeTaints(), c.tolerations) {
		return // a node whose taints the constraint's pod does not tolerate
	}
	if domain, ok := s.domainOf(b, c); ok {
		c.add(domain, 1)
		return
	}
	if c.owners {
		// An anti-affinity owner on a bin that may land in several domains
		// keeps matching pods out of all of them, as Karpenter does.
		for mask := s.binMask(b, c); mask != 0; mask &= mask - 1 {
			c.add(bits.TrailingZeros64(mask), 1)
		}
		return
	}
	for i := range b.pending {
		if b.pending[i].c == c {
			b.pending[i].n++
			return
		}
	}
	b.pending = append(b.pending, pendingCount{c: c, n: 1})
}

func (s *solver) binMask(b *bin, c *counter) uint64 {
	switch c.kind {
	case keyZone:
		return b.zones
	case keyCapacityType:
		return b.cts
	case keyCustom:
		return s.customMask(b, b.custom, c.key)
	}
	return 0
}

// domainOf is the one domain b is in for c's key, if settled.
func (s *solver) domainOf(b *bin, c *counter) (int, bool) {
	if c.kind == keyHostname {
		return b.id, true
	}
	mask := s.binMask(b, c)
	if popcount(mask) != 1 {
		return 0, false
	}
	return bits.TrailingZeros64(mask), true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for key := range m {
		out = append(out, key)
	}
	slices.Sort(out)
	return out
}
