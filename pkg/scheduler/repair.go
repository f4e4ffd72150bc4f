package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// placed is what the repair pass needs to know about a pod on a new claim.
type placed struct {
	pod *corev1.Pod
	vp  *poolVariant
	req resVec
	// movable: nothing in the plan depends on which node the pod is on. Its
	// group has no topology rule at the level it was placed, no host port,
	// no volume topology, and no counter (spread, affinity, anti-affinity
	// of any pod) matches it. It can then go to any claim of the same pool
	// whose requirements already include its own.
	movable bool
}

func movable(v *variant) bool {
	group := v.g
	return len(v.constraints) == 0 && len(group.ports) == 0 && group.volumeReqs == nil &&
		len(group.matched) == 0 && len(group.owned) == 0 && len(group.blockers) == 0
}

// Repair budget: candidate moves and swaps evaluated per solve, and
// cheaper types tried per claim. Packing is already near the LP bound; the
// repair fixes its tail, so a small budget is enough and keeps the solve
// time bounded whatever the input.
const (
	repairBudget     = 4_000_000
	repairCandidates = 4
)

// repairKind is a class of interchangeable movable pods: same pool
// variant, same requests.
type repairKind struct {
	vp  *poolVariant
	req resVec
}

// repairClaim is a claim as the repair pass sees it.
type repairClaim struct {
	b *bin
	// cur is the claim's type: the cheapest option that holds what it has
	// at its cheapest allowed offering. price is what it costs.
	cur   *ptype
	price float64
	fixed []placed   // pods that stay
	kinds [][]placed // movable pods by kind index
	have  []int      // kinds with pods, for fast iteration
	dirty bool
}

type repairType struct {
	t     *ptype
	price float64
}

type repairer struct {
	s      *solver
	kinds  []repairKind
	byKey  map[string]int
	claims []*repairClaim
	budget int
}

// repair improves the packed fleet: claim by claim, most wasteful first,
// it tries to make the claim a cheaper type (or empty it) by moving its
// movable pods onto other claims of the same pool, or swapping them for
// pods of other claims, without raising any other claim's price. First
// fit leaves a tail: a claim filled on one resource with another left
// over, and a last claim bought for what was left. This pass fixes both.
func (s *solver) repair() {
	repairs := &repairer{s: s, byKey: map[string]int{}, budget: repairBudget}
	for i, pl := range s.pools {
		if pl.minValues != nil || pl.invalid != "" {
			continue // minValues ask for type diversity the moves could break
		}
		var bins []*bin
		anyMovable := false
		for _, bin := range s.bins {
			if bin.claim && bin.poolIdx == i && len(bin.pods) > 0 {
				bins = append(bins, bin)
				anyMovable = anyMovable || slices.ContainsFunc(bin.placed, func(p placed) bool { return p.movable })
			}
		}
		if len(bins) < 2 || !anyMovable {
			continue
		}
		repairs.claims = repairs.claims[:0]
		for _, bin := range bins {
			if claim := repairs.newClaim(bin); claim != nil {
				repairs.claims = append(repairs.claims, claim)
			}
		}
		repairs.run(pl)
		for _, claim := range repairs.claims {
			if claim.dirty {
				repairs.finish(claim)
			}
		}
	}
}

func (r *repairer) kind(p placed) int {
	key := fmt.Sprintf("%p%v", p.vp, p.req)
	if kind, ok := r.byKey[key]; ok {
		return kind
	}
	r.kinds = append(r.kinds, repairKind{vp: p.vp, req: p.req})
	r.byKey[key] = len(r.kinds) - 1
	return len(r.kinds) - 1
}

func (r *repairer) newClaim(b *bin) *repairClaim {
	claim := &repairClaim{b: b}
	offers := offerMask(b.zones, b.cts)
	for _, instType := range b.opts {
		if price, ok := instType.cheapest(offers); ok && (claim.cur == nil || price < claim.price) {
			claim.cur, claim.price = instType, price
		}
	}
	if claim.cur == nil {
		return nil // nothing offered: leave it as it is
	}
	for _, placedPod := range b.placed {
		if !placedPod.movable {
			claim.fixed = append(claim.fixed, placedPod)
			continue
		}
		kind := r.kind(placedPod)
		for len(claim.kinds) <= kind {
			claim.kinds = append(claim.kinds, nil)
		}
		claim.kinds[kind] = append(claim.kinds[kind], placedPod)
	}
	claim.reindex()
	return claim
}

// allowed are the types c may become, cheapest first: its instance types,
// offered in its zones and capacity types, and for a pool with limits no
// larger (in any limited resource) than what c already holds against them.
func (c *repairClaim) allowed() []repairType {
	bin := c.b
	offers := offerMask(bin.zones, bin.cts)
	var out []repairType
	for _, instType := range bin.pool.types {
		if !bin.types.has(instType.idx) || (bin.charge != nil && !withinCharge(instType, bin.charge)) || !bin.quotaAllows(instType) {
			continue
		}
		if price, ok := instType.cheapest(offers); ok {
			out = append(out, repairType{t: instType, price: price})
		}
	}
	slices.SortStableFunc(out, func(a, b repairType) int { return cmp.Compare(a.price, b.price) })
	return out
}

func withinCharge(t *ptype, charge []int64) bool {
	for j, value := range t.limitCap {
		if value > charge[j] {
			return false
		}
	}
	return true
}

func (c *repairClaim) reindex() {
	c.have = c.have[:0]
	for kind, ps := range c.kinds {
		if len(ps) > 0 {
			c.have = append(c.have, kind)
		}
	}
}

// accepts reports whether kind k may join c: c's requirements already
// include the kind's.
func (r *repairer) accepts(c *repairClaim, k int) bool {
	return c.b.absorbed[r.kinds[k].vp]
}

func (r *repairer) run(pl *pool) {
	total := make(resVec, len(r.s.res.names))
	for _, claim := range r.claims {
		total.addInPlace(claim.b.used)
	}
	yCPU, yMem := lpDuals(r.s.lpTypes(pl), float64(total[rCPU]), float64(total[rMemory]), r.s.slack)
	waste := func(c *repairClaim) float64 {
		return c.price - yCPU*float64(c.b.used[rCPU]) - yMem*float64(c.b.used[rMemory])
	}
	order := slices.Clone(r.claims)
	slices.SortStableFunc(order, func(a, b *repairClaim) int { return -cmp.Compare(waste(a), waste(b)) })
	for _, claim := range order {
		if r.budget <= 0 {
			return
		}
		// A split adds a claim, which would be a node with none of the
		// replicas placed against the least count of nodes that exist
		// (see placeOnNodesThatExist).
		if len(claim.have) > 0 && waste(claim) > 1e-9 && !r.shrink(claim) && !r.s.hostMinPlaced {
			r.split(claim)
		}
	}
}

// shrink tries the cheapest few targets below t's price, emptying it
// first, and keeps the first that the moves reach.
func (r *repairer) shrink(t *repairClaim) bool {
	allowed := t.allowed()
	norm := t.cur.room
	for _, room := range shrinkTargets(t, r.keepNeed(t), allowed) {
		if r.budget <= 0 {
			return false
		}
		if r.reach(t, room, norm) {
			t.dirty = true
			t.settleType(allowed)
			return true
		}
	}
	return false
}

// keepNeed is what t must keep whatever the moves: its fixed pods, and
// what the other claims have no room for.
func (r *repairer) keepNeed(t *repairClaim) resVec {
	count := len(r.s.res.names)
	need := fixedUsage(t, count)
	slack := make(resVec, count)
	for _, claim := range r.claims {
		if claim != t {
			room := claim.cur.room
			for i := range slack {
				slack[i] += room[i] - claim.b.used[i]
			}
		}
	}
	for i := range need {
		need[i] = max(need[i], t.b.used[i]-slack[i])
	}
	return need
}

// fixedUsage is the sum of t's fixed pods' requests.
func fixedUsage(t *repairClaim, count int) resVec {
	fixed := make(resVec, count)
	for _, placedPod := range t.fixed {
		fixed.addInPlace(placedPod.req)
	}
	return fixed
}

// shrinkTargets are the rooms shrink tries, cheapest first: nothing (the
// claim goes away) when t has no fixed pods and need allows, then the
// first repairCandidates allowed types cheaper than t that hold need.
func shrinkTargets(t *repairClaim, need resVec, allowed []repairType) []resVec {
	count := len(need)
	var targets []resVec
	if len(t.fixed) == 0 && need.fitsIn(make(resVec, count)) {
		targets = append(targets, make(resVec, count)) // empty: the claim goes away
	}
	for _, repairType := range allowed {
		if len(targets) >= repairCandidates || repairType.price >= t.price {
			break
		}
		if need.fitsIn(repairType.t.room) {
			targets = append(targets, repairType.t.room)
		}
	}
	return targets
}

// settleType makes the claim's type the first of allowed (the cheapest)
// that holds what it uses.
func (c *repairClaim) settleType(allowed []repairType) {
	for _, repairType := range allowed {
		if c.b.used.fitsIn(repairType.t.room) {
			c.cur = repairType.t
			c.price = repairType.price
			return
		}
	}
}

// move is one step of the repair: pod kind a goes from t to c, and pod
// kind b (or none, -1) comes back.
type move struct {
	c    *repairClaim
	a, b int
	gain float64
}

// reach moves and swaps pods until t's used fits room, never raising
// another claim above its current type. It undoes everything and returns
// false when no step brings t closer.
func (r *repairer) reach(t *repairClaim, room, norm resVec) bool {
	goal := &reachGoal{t: t, room: room, norm: norm, next: make(resVec, len(t.b.used))}
	type step struct {
		c    *repairClaim
		a, b int
	}
	var log []step
	limit := 2*len(t.b.pods) + 8
	for range limit {
		cur := goal.excess(t.b.used)
		if cur == 0 {
			return true
		}
		best := r.bestMove(goal, cur)
		if best.c == nil || r.budget < 0 {
			break
		}
		r.apply(t, best.c, best.a, best.b)
		log = append(log, step{best.c, best.a, best.b})
	}
	if goal.excess(t.b.used) == 0 {
		return true
	}
	for i := len(log) - 1; i >= 0; i-- {
		st := log[i]
		r.apply(st.c, t, st.a, st.b)
	}
	return false
}

// reachGoal is what reach aims at: claim t's used within room.
type reachGoal struct {
	t          *repairClaim
	room, norm resVec
	next       resVec // t's used after the step being weighed
}

// excess is how far used is above room, each resource in units of norm.
func (goal *reachGoal) excess(used resVec) float64 {
	e := 0.0
	for i, u := range used {
		if u > goal.room[i] {
			e += float64(u-goal.room[i]) / float64(max(goal.norm[i], 1))
		}
	}
	return e
}

// bestMove is the step that lowers t's excess (cur) the most: a pod kind
// of t moved to another claim, alone or swapped for one of that claim's.
// Its c is nil when no step helps.
func (r *repairer) bestMove(goal *reachGoal, cur float64) move {
	best := move{a: -1, b: -1}
	for _, first := range goal.t.have {
		for _, claim := range r.claims {
			if claim == goal.t || !r.accepts(claim, first) {
				continue
			}
			r.weighMove(goal, cur, claim, first, &best)
			r.weighSwaps(goal, cur, claim, first, &best)
		}
	}
	return best
}

// weighMove makes moving one pod of kind a to c the best step if it fits
// c's current type and beats best.
func (r *repairer) weighMove(goal *reachGoal, cur float64, c *repairClaim, a int, best *move) {
	ra := r.kinds[a].req
	r.budget--
	if !fitsSum(c.b.used, ra, c.cur.room) {
		return
	}
	for i := range goal.next {
		goal.next[i] = goal.t.b.used[i] - ra[i]
	}
	// Ties go to a move: it leaves the other claim less full.
	if gap := cur - goal.excess(goal.next); gap > 0 && (gap > best.gain+1e-12 || (best.b >= 0 && gap >= best.gain-1e-12)) {
		*best = move{c: c, a: a, b: -1, gain: gap}
	}
}

// weighSwaps makes swapping one pod of kind a for one of c's kinds the
// best step if it fits c's current type and beats best.
func (r *repairer) weighSwaps(goal *reachGoal, cur float64, c *repairClaim, a int, best *move) {
	ra := r.kinds[a].req
	for _, second := range c.have {
		if second == a || !r.accepts(goal.t, second) {
			continue
		}
		r.budget--
		rb := r.kinds[second].req
		if !swapFits(c.b.used, ra, rb, c.cur.room) {
			continue
		}
		for i := range goal.next {
			goal.next[i] = goal.t.b.used[i] - ra[i] + rb[i]
		}
		if gap := cur - goal.excess(goal.next); gap > best.gain+1e-12 {
			*best = move{c: c, a: a, b: second, gain: gap}
		}
	}
}

// swapFits reports whether used plus in less out stays within room.
func swapFits(used, in, out, room resVec) bool {
	for i := range in {
		if used[i]+in[i]-out[i] > room[i] {
			return false
		}
	}
	return true
}

// apply moves one pod of kind a from x to y and, if b >= 0, one pod of
// kind b from y to x.
func (r *repairer) apply(x, y *repairClaim, a, b int) {
	if a >= 0 {
		r.transfer(x, y, a)
	}
	if b >= 0 {
		r.transfer(y, x, b)
	}
	x.reindex()
	y.reindex()
	x.dirty, y.dirty = true, true
}

func (r *repairer) transfer(from, to *repairClaim, k int) {
	ps := from.kinds[k]
	placedPod := ps[len(ps)-1]
	from.kinds[k] = ps[:len(ps)-1]
	for len(to.kinds) <= k {
		to.kinds = append(to.kinds, nil)
	}
	to.kinds[k] = append(to.kinds[k], placedPod)
	for i, value := range placedPod.req {
		from.b.used[i] -= value
		to.b.used[i] += value
	}
}

// finish writes a changed claim back into its bin: pods, and the options
// that hold them.
func (r *repairer) finish(c *repairClaim) {
	bin := c.b
	bin.placed = append(bin.placed[:0], c.fixed...)
	for _, ps := range c.kinds {
		bin.placed = append(bin.placed, ps...)
	}
	bin.pods = bin.pods[:0]
	for _, placedPod := range bin.placed {
		bin.pods = append(bin.pods, placedPod.pod)
	}
	bin.opts = bin.opts[:0]
	if len(bin.pods) == 0 {
		return
	}
	for _, repairType := range c.allowed() {
		if bin.used.fitsIn(repairType.t.room) {
			bin.opts = append(bin.opts, repairType.t)
		}
	}
}

// split replaces t by two cheaper claims when its movable pods allow: t
// becomes a cheaper type filled as far as it goes, and a new claim with
// t's requirements takes the rest on the cheapest type that holds them.
// The last claim of a fleet is often bought for what was left over, and
// two small types can cost less than one that holds it all.
func (r *repairer) split(t *repairClaim) {
	allowed := t.allowed()
	pl := t.b.pool
	if pl.limitNames != nil && !withinLimitsAll(pl, allowed) {
		return
	}
	pods := movablePodsBySize(t)
	best, keep := r.bestSplit(t, allowed, pods)
	if best < 0 {
		return
	}
	nc := r.splitOff(t, pods, keep)
	t.reindex()
	nc.reindex()
	t.dirty = true
	nc.dirty = true
	t.cur, t.price = allowed[best].t, allowed[best].price
	cheapest := cheapestFor(allowed, nc.b.used, pl)
	nc.cur, nc.price = allowed[cheapest].t, allowed[cheapest].price
	if pl.limitNames != nil {
		nc.b.charge = slices.Clone(nc.cur.limitCap)
		for j, amount := range nc.b.charge {
			pl.limitLeft[j] -= amount
		}
	}
	r.s.quota.chargeSplit(t.b, nc.b, t.cur, nc.cur)
	r.claims = append(r.claims, nc)
}

// movablePodsBySize is t's movable pods, biggest first by share of t's
// current room.
func movablePodsBySize(t *repairClaim) []placed {
	var pods []placed
	for _, kind := range t.have {
		pods = append(pods, t.kinds[kind]...)
	}
	room := t.cur.room
	share := func(p placed) float64 {
		return float64(p.req[rCPU])/float64(max(room[rCPU], 1)) + float64(p.req[rMemory])/float64(max(room[rMemory], 1))
	}
	slices.SortStableFunc(pods, func(a, b placed) int { return -cmp.Compare(share(a), share(b)) })
	return pods
}

// bestSplit finds the allowed type cheaper than t that, filled first fit
// with t's fixed pods and then pods, leaves a rest whose cheapest type
// makes the pair cheapest and cheaper than t, among the pairs quota holds
// (splitFits). It returns that type's index
// and which pods it keeps; -1 when no split pays or the budget ran out.
func (r *repairer) bestSplit(t *repairClaim, allowed []repairType, pods []placed) (int, []bool) {
	count := len(r.s.res.names)
	fixed := fixedUsage(t, count)
	bestPrice, best := t.price, -1
	var bestKeep []bool
	keep := make([]bool, len(pods))
	kept, rest := make(resVec, count), make(resVec, count)
	for i, repairType := range allowed {
		if repairType.price >= t.price {
			break
		}
		if r.budget -= len(pods); r.budget < 0 {
			return -1, nil
		}
		if !fixed.fitsIn(repairType.t.room) {
			continue
		}
		firstFit(pods, fixed, repairType.t.room, keep, kept, rest)
		if !slices.Contains(keep[:len(pods)], false) {
			continue // no split: t fits a alone, which shrink handles
		}
		other := cheapestFor(allowed, rest, t.b.pool)
		if other < 0 || !r.s.quota.splitFits(t.b, repairType.t, allowed[other].t) {
			continue
		}
		if total := repairType.price + allowed[other].price; total < bestPrice-1e-9 {
			bestPrice, best, bestKeep = total, i, slices.Clone(keep)
		}
	}
	return best, bestKeep
}

// firstFit fills room, starting from fixed, with pods in order: keep says
// which fit, kept is what room then holds and rest what is left over.
func firstFit(pods []placed, fixed, room resVec, keep []bool, kept, rest resVec) {
	copy(kept, fixed)
	clear(rest)
	for j, placedPod := range pods {
		keep[j] = fitsSum(kept, placedPod.req, room)
		if keep[j] {
			kept.addInPlace(placedPod.req)
		} else {
			rest.addInPlace(placedPod.req)
		}
	}
}

// splitOff opens a new claim with t's requirements and moves the pods keep
// leaves out to it.
func (r *repairer) splitOff(t *repairClaim, pods []placed, keep []bool) *repairClaim {
	nb := &bin{claim: true, id: len(r.s.bins), pool: t.b.pool, poolIdx: t.b.poolIdx, types: t.b.types, zones: t.b.zones, cts: t.b.cts,
		custom: t.b.custom, customKeys: maps.Clone(t.b.customKeys), absorbed: maps.Clone(t.b.absorbed), used: make(resVec, len(r.s.res.names))}
	r.s.bins = append(r.s.bins, nb)
	nc := &repairClaim{b: nb}
	for j, placedPod := range pods {
		if keep[j] {
			continue
		}
		kind := r.kind(placedPod)
		for len(nc.kinds) <= kind {
			nc.kinds = append(nc.kinds, nil)
		}
		// Take the same pod out of t: kinds are stacks of equal pods.
		r.transfer(t, nc, kind)
	}
	return nc
}

// cheapestFor is the index of the cheapest of allowed that holds used and,
// for a new claim in a pool with limits, stays within them; -1 if none.
func cheapestFor(allowed []repairType, used resVec, pl *pool) int {
	for i, repairType := range allowed {
		if used.fitsIn(repairType.t.room) && (pl.limitNames == nil || withinLimits(pl, repairType.t)) {
			return i
		}
	}
	return -1
}

// withinLimitsAll reports whether the pool has room for any new claim.
func withinLimitsAll(pl *pool, allowed []repairType) bool {
	return slices.ContainsFunc(allowed, func(a repairType) bool { return withinLimits(pl, a.t) })
}
