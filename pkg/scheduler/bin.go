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
	reqs            scheduling.Requirements
	inFlight        bool
	taints          scheduling.Taints
	compat          map[string]bool

	// New claims: what is still possible.
	types      bitset
	zones, cts uint64
	custom     scheduling.Requirements
	customKeys map[string]bool
	absorbed   map[*poolVariant]bool
	opts       []*ptype // types that fit used, most cost-efficient first
	target     *ptype
	charge     []int64

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
	t := s.dom.table(key)
	if !b.claim {
		if v, ok := b.labels[key]; ok {
			if i := t.intern(v); i >= 0 {
				return 1 << i
			}
		}
		if b.inFlight && b.reqs.Has(key) {
			return maskOf(t, b.reqs.Get(key))
		}
		return 0
	}
	if custom == nil || !custom.Has(key) {
		return 0
	}
	return maskOf(t, custom.Get(key))
}

func maskOf(t *valueTable, r *scheduling.Requirement) uint64 {
	var m uint64
	for i, v := range t.values {
		if r.Has(v) {
			m |= 1 << i
		}
	}
	return m
}

// universe is the set of domains a spread constraint counts: those some
// NodePool can launch into for this pod (honouring its node affinity unless
// nodeAffinityPolicy is Ignore, and taints when nodeTaintsPolicy is Honor),
// plus those of existing nodes.
func (s *solver) universe(k *constraint, v *variant) uint64 {
	if k.universeSet {
		return k.universe
	}
	k.universe, k.universeSet = s.poolDomains(k, v)|s.nodeDomains(k, v), true
	return k.universe
}

// poolDomains is the part of the universe the NodePools can launch into.
func (s *solver) poolDomains(k *constraint, v *variant) uint64 {
	var domains uint64
	for i, pl := range s.pools {
		vp := s.variantPool(v, i)
		if k.ignoreAffinity {
			// Ignore: a domain counts wherever the pool offers it, whatever
			// the pod's nodeSelector and required node affinity say
			// (Kubernetes includes every node; Karpenter's node filter then
			// passes every NodeClaim). The pool's own requirements still
			// bound what it can launch.
			vp = s.poolVariant(pl, scheduling.NewRequirements(), "")
		}
		if !vp.ok || (k.honorTaints && !v.toleratesPool(pl, i)) {
			continue
		}
		switch k.c.kind {
		case keyZone:
			domains |= vp.offeredZones
		case keyCapacityType:
			domains |= vp.offeredCTs
		case keyCustom:
			if vp.custom.Has(k.c.key) {
				domains |= maskOf(s.dom.table(k.c.key), vp.custom.Get(k.c.key))
			}
		}
	}
	return domains
}

// nodeDomains is the part of the universe existing nodes and in-flight
// claims are settled in.
func (s *solver) nodeDomains(k *constraint, v *variant) uint64 {
	var domains uint64
	for _, b := range s.bins {
		if b.claim {
			break
		}
		// Under Honor, as in Kubernetes and Karpenter's node filter, a node
		// the pod's nodeSelector and required node affinity (any term)
		// exclude is no domain, nor is one whose taints the pod does not
		// tolerate when nodeTaintsPolicy is Honor.
		if !k.ignoreAffinity && !s.nodeFilterMatches(b, v) {
			continue
		}
		if k.honorTaints && len(b.taints) > 0 && b.taints.Tolerates(v.tolerations) != nil {
			continue
		}
		domains |= s.settledDomain(b, k.c)
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
		if m := s.customMask(b, nil, c.key); popcount(m) == 1 {
			return m
		}
	}
	return 0
}

// nodeFilterMatches reports whether existing bin b passes the group's
// topology node filter: the nodeSelector together with one of the required
// node affinity terms. Preferred terms and volume requirements are not part
// of it, as in Karpenter's TopologyNodeFilter.
func (s *solver) nodeFilterMatches(b *bin, v *variant) bool {
	g := v.g
	if g.nodeFilter == nil {
		g.nodeFilter = topologyNodeFilter(g.pod)
	}
	for _, r := range g.nodeFilter {
		var err error
		if b.inFlight {
			err = b.reqs.Compatible(r, allowWellKnown)
		} else {
			err = b.reqs.Compatible(r)
		}
		if err == nil {
			return true
		}
	}
	return false
}

func topologyNodeFilter(pod *corev1.Pod) []scheduling.Requirements {
	sel := scheduling.NewLabelRequirements(pod.Spec.NodeSelector)
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []scheduling.Requirements{sel}
	}
	var out []scheduling.Requirements
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		r := scheduling.NewRequirements(sel.Values()...)
		r.Add(scheduling.NewNodeSelectorRequirements(term.MatchExpressions...).Values()...)
		out = append(out, r)
	}
	return out
}

// allowed narrows mask (the domains a bin may be in) to those where the
// constraint lets the pod go.
func (s *solver) allowed(k *constraint, v *variant, mask uint64) uint64 {
	c := k.c
	var out uint64
	switch k.kind {
	case spread:
		u := s.universe(k, v)
		minimum := int32(0)
		if k.minDomains == 0 || int32(popcount(u)) >= k.minDomains {
			first := true
			for m := u; m != 0; m &= m - 1 {
				if n := c.count(bits.TrailingZeros64(m)); first || n < minimum {
					minimum, first = n, false
				}
			}
		}
		for m := mask & u; m != 0; m &= m - 1 {
			d := bits.TrailingZeros64(m)
			if c.count(d)+k.self-minimum <= k.maxSkew {
				out |= 1 << d
			}
		}
	case affinity:
		if c.total == 0 {
			if k.self == 1 {
				return mask // the first of a self-affine set goes anywhere
			}
			return 0
		}
		for m := mask; m != 0; m &= m - 1 {
			if d := bits.TrailingZeros64(m); c.count(d) > 0 {
				out |= 1 << d
			}
		}
	case antiAffinity, blocked:
		for m := mask; m != 0; m &= m - 1 {
			if d := bits.TrailingZeros64(m); c.count(d) == 0 {
				out |= 1 << d
			}
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
	n := k.c.count(b.id)
	switch k.kind {
	case spread:
		return n+k.self <= k.maxSkew
	case affinity:
		return n > 0 || (k.c.total == 0 && k.self == 1)
	default:
		return n == 0
	}
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
	} else if !existingAdmits(b, v) {
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
func existingAdmits(b *bin, v *variant) bool {
	if len(b.taints) > 0 && b.taints.Tolerates(v.tolerations) != nil {
		return false
	}
	compatible, known := b.compat[v.reqsKey]
	if !known {
		if b.inFlight {
			compatible = b.reqs.Compatible(v.reqs, allowWellKnown) == nil
		} else {
			compatible = b.reqs.Compatible(v.reqs) == nil
		}
		b.compat[v.reqsKey] = compatible
	}
	return compatible
}

// portsConflict reports whether a host port of g's pods is taken on b.
func portsConflict(b *bin, g *group) bool {
	for _, p := range g.ports {
		if slices.ContainsFunc(b.ports, p.conflicts) {
			return true
		}
	}
	return false
}

// settledOn reports whether existing bin b, which cannot change, is
// already settled on an allowed domain of each constrained key.
func (s *solver) settledOn(b *bin, dims []dimension) bool {
	for _, d := range dims {
		if len(d.cands) != 1 || popcount(d.cands[0]) != 1 {
			return false
		}
		var have uint64
		switch d.kind {
		case keyZone:
			have = b.zones
		case keyCapacityType:
			have = b.cts
		default:
			have = s.customMask(b, nil, d.key)
		}
		if have != d.cands[0] {
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
	custom                         map[string]uint64
	customSpread                   map[string]*constraint
}

// topology evaluates v's topology rules on b and returns the keys to
// settle, or nil and a reason when a rule rules b out.
func (s *solver) topology(b *bin, v *variant, ch *choice, dims []dimension) ([]dimension, *constraint) {
	masks := topologyMasks{zone: ch.zones, ct: ch.cts}
	for _, k := range v.constraints {
		if !s.applyConstraint(&masks, b, v, ch, k) {
			return nil, k
		}
	}
	if masks.zoneConstrained {
		dims = append(dims, dimension{kind: keyZone, cands: candidates(masks.zone, masks.zoneSpread)})
	}
	if masks.ctConstrained {
		dims = append(dims, dimension{kind: keyCapacityType, cands: candidates(masks.ct, masks.ctSpread)})
	}
	for _, key := range sortedKeys(masks.custom) {
		dims = append(dims, dimension{kind: keyCustom, key: key, cands: candidates(masks.custom[key], masks.customSpread[key])})
	}
	return dims, nil
}

// applyConstraint narrows masks by rule k on b and reports whether any
// domain is left.
func (s *solver) applyConstraint(masks *topologyMasks, b *bin, v *variant, ch *choice, k *constraint) bool {
	switch k.c.kind {
	case keyHostname:
		return hostAllowed(k, b)
	case keyZone:
		masks.zoneConstrained = true
		if masks.zone = s.allowed(k, v, masks.zone); masks.zone == 0 {
			return false
		}
		if k.kind == spread && masks.zoneSpread == nil {
			masks.zoneSpread = k
		}
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
// rules: least crowded first for spread, else lowest index.
func candidates(mask uint64, k *constraint) []uint64 {
	var out []uint64
	for m := mask; m != 0; m &= m - 1 {
		out = append(out, 1<<bits.TrailingZeros64(m))
	}
	if k != nil {
		slices.SortStableFunc(out, func(a, b uint64) int {
			return cmp.Compare(k.c.count(bits.TrailingZeros64(a)), k.c.count(bits.TrailingZeros64(b)))
		})
	}
	return out
}

// settle picks a domain for each dimension, in order, such that some
// instance type still fits; it fills ch.
func (s *solver) settle(b *bin, v *variant, ch *choice, dims []dimension, i int) bool {
	if i == len(dims) {
		return s.fits(b, v, ch)
	}
	d := dims[i]
	saved := *ch
	for _, cand := range d.cands {
		switch d.kind {
		case keyZone:
			ch.zones = cand
		case keyCapacityType:
			ch.cts = cand
		case keyCustom:
			values := []string{}
			t := s.dom.table(d.key)
			for m := cand; m != 0; m &= m - 1 {
				values = append(values, t.values[bits.TrailingZeros64(m)])
			}
			base := b.custom
			if ch.custom != nil {
				base = ch.custom
			}
			ch.custom = copyRequirements(base)
			ch.custom.Add(scheduling.NewRequirement(d.key, corev1.NodeSelectorOpIn, values...))
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
	if t := b.target; t != nil && valid(t) && !s.packLargest {
		if !fitsSum(b.used, req, t.room) {
			return false
		}
		ch.target = t
	}
	mv := b.pool.minValues
	var fitting []*ptype
	for _, t := range b.opts {
		if !valid(t) || !fitsSum(b.used, req, t.room) {
			continue
		}
		if ch.target == nil {
			ch.target = t
		}
		if mv == nil {
			return true
		}
		fitting = append(fitting, t)
	}
	return ch.target != nil && (mv == nil || satisfiesMinValues(fitting, mv))
}

func satisfiesMinValues(types []*ptype, mv map[string]int) bool {
	for key, n := range mv {
		seen := map[string]bool{}
		for _, t := range types {
			for _, val := range t.reqs.Get(key).Values() {
				seen[val] = true
			}
		}
		if len(seen) < n {
			return false
		}
	}
	return true
}

// commit adds one pod of v's group to b in the narrowed state ch.
func (s *solver) commit(b *bin, v *variant, ch choice) {
	g := v.g
	pod := s.current
	b.used.addInPlace(g.req)
	b.pods = append(b.pods, pod)
	b.ports = append(b.ports, g.ports...)
	if b.claim {
		b.placed = append(b.placed, placed{pod: pod, vp: ch.vp, req: g.req, movable: movable(v)})
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
		for _, t := range b.opts {
			if b.types.has(t.idx) && t.offers&offers != 0 && b.used.fitsIn(t.room) {
				kept = append(kept, t)
				b.maxRoom.maxInPlace(t.room)
			}
		}
		b.opts = kept
		if b.pool.limitNames != nil {
			s.charge(b)
		}
	}
	s.index.set(b)
	s.record(b, g)
}

// charge holds the largest option's capacity against the pool's limits.
func (s *solver) charge(b *bin) {
	pl := b.pool
	next := make([]int64, len(pl.limitNames))
	for _, t := range b.opts {
		for j, c := range t.limitCap {
			next[j] = max(next[j], c)
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
	for _, c := range g.matched {
		s.count(b, c)
	}
	for _, c := range g.owned {
		s.count(b, c)
	}
	if len(b.pending) > 0 {
		kept := b.pending[:0]
		for _, p := range b.pending {
			if d, ok := s.domainOf(b, p.c); ok {
				p.c.add(d, p.n)
			} else {
				kept = append(kept, p)
			}
		}
		b.pending = kept
	}
}

// count counts one pod on b for c: in b's domain if settled, in every
// domain b may land in for an owner, else pending until b settles.
func (s *solver) count(b *bin, c *counter) {
	if d, ok := s.domainOf(b, c); ok {
		c.add(d, 1)
		return
	}
	if c.owners {
		// An anti-affinity owner on a bin that may land in several domains
		// keeps matching pods out of all of them, as Karpenter does.
		for m := s.binMask(b, c); m != 0; m &= m - 1 {
			c.add(bits.TrailingZeros64(m), 1)
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
	m := s.binMask(b, c)
	if popcount(m) != 1 {
		return 0, false
	}
	return bits.TrailingZeros64(m), true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
