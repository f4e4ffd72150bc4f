package scheduler

import (
	"slices"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Quota is what the subscription's vCPU quotas leave for the new claims of
// one solve (Input.Quota; nil: quota limits nothing).
//
// Invariant: the vCPUs the claims of a solve hold never exceed what Left
// gives any quota. A new claim is pinned when it opens to one capacity
// type and to the quotas one VM of its target (the first option those
// quotas still hold) counts against as that type (for on-demand, say, its
// VM family's and the regional quota); it keeps only the options that
// count against exactly those quotas and are no larger in vCPUs than its
// target, and, as a NodePool limit, it holds the vCPUs of its largest
// option against each of them, less as its options narrow. A
// claim whose family quota is spent therefore opens in the next family
// that has room, or as the other capacity type, and a group of pods larger
// than one family's quota is split across families in one solve.
type Quota struct {
	// Left is each quota's vCPUs left for new claims.
	Left []int64
	// Charged lists the quotas (indexes into Left) one VM of the instance
	// type counts against as the capacity type; none: it is not limited.
	Charged func(it *catalog.InstanceType, capacityType string) []int
}

// quotaBudget is a solve's copy of Input.Quota, charged as claims open.
type quotaBudget struct {
	left    []int64
	charged func(it *catalog.InstanceType, capacityType string) []int
	// types caches, per pool and pool type index, what quota needs to
	// know of the type (nil until first asked).
	types map[*pool][]*quotaType
	// dual caches the dual prices per pool (see duals).
	dual map[*pool][2]float64
}

// quotaType is an instance type as quota sees it: its vCPUs, and the
// quotas one VM counts against, by capacity-type index.
type quotaType struct {
	vcpus  int64
	quotas [2][]int
}

// quotaCharge is what a claim holds against the quotas it is pinned to.
type quotaCharge struct {
	quotas []int
	vcpus  int64
}

// quotaRefusal is explain's reason for a pod that quota left without a
// new claim in a pool.
const quotaRefusal = "the subscription's vCPU quota left after the claims planned before holds no instance type that fits the pod"

func newQuotaBudget(q *Quota) *quotaBudget {
	if q == nil || q.Charged == nil {
		return nil
	}
	return &quotaBudget{left: slices.Clone(q.Left), charged: q.Charged, types: map[*pool][]*quotaType{}, dual: map[*pool][2]float64{}}
}

func vcpusOf(t *ptype) int64 { return t.it.Capacity.Cpu().Value() }

// typeOf is what quota knows of pl's type t.
func (q *quotaBudget) typeOf(pl *pool, t *ptype) *quotaType {
	types, ok := q.types[pl]
	if !ok {
		types = make([]*quotaType, len(pl.types))
		q.types[pl] = types
	}
	if types[t.idx] == nil {
		qt := &quotaType{vcpus: vcpusOf(t)}
		for i, name := range capacityTypes {
			qt.quotas[i] = q.charged(t.it, name)
		}
		types[t.idx] = qt
	}
	return types[t.idx]
}

// holds reports whether each of quotas has vcpus left.
func (q *quotaBudget) holds(quotas []int, vcpus int64) bool {
	for _, j := range quotas {
		if q.left[j] < vcpus {
			return false
		}
	}
	return true
}

// pin narrows a new claim's options (in the order it packs by, its target
// first) to one capacity type and one set of quotas, and picks its target.
// When quota holds the first option at its cheapest offering in zones and
// cts, that is the target, as without quota. Otherwise the target is the
// option and capacity type quota holds that give the most room for the
// price, room valued at the dual prices by which the pool ranks its types
// (see byEfficiency), now at the price of that capacity type: when the
// spot quota is spent, the claim goes to the best on-demand option, not to
// the one whose spot price ranked it first. The claim keeps the options of
// the target's capacity type and quotas no larger in vCPUs, target first:
// it packs up to its target, and its launch, the cheapest option that
// holds its pods, takes no more quota than the target it is charged. pin
// returns the options kept (opts is reused), their bitset over the pool's
// types, the capacity-type mask and the claim's charge (its vCPUs still
// zero). When quota holds none it returns no options, so that the claim
// takes no pod, and refused says why; without quota it returns opts and the
// variant's types and capacity types as they are.
func (s *solver) pinQuota(pl *pool, opts []*ptype, vp *poolVariant) (kept []*ptype, types bitset, cts uint64, charge *quotaCharge, refused string) {
	q := s.quota
	if q == nil {
		return opts, vp.types, vp.cts, nil, ""
	}
	zones := vp.zones
	target, ct := q.natural(pl, opts[0], zones, vp.cts)
	if target == nil {
		target, ct = q.bestValue(s, pl, opts, zones, vp.cts)
	}
	if target == nil {
		return nil, vp.types, vp.cts, nil, quotaRefusal
	}
	quotas, most := q.typeOf(pl, target).quotas[ct], q.typeOf(pl, target).vcpus
	offers := offerMask(zones, 1<<ct)
	types = newBitset(len(pl.types))
	types.set(target.idx)
	if idx := slices.Index(opts, target); idx > 0 { // target first, the rest in order
		copy(opts[1:idx+1], opts[:idx])
		opts[0] = target
	}
	kept = opts[:1]
	for _, t := range opts[1:] {
		if qt := q.typeOf(pl, t); t.offers&offers != 0 && qt.vcpus <= most && slices.Equal(qt.quotas[ct], quotas) {
			kept = append(kept, t)
			types.set(t.idx)
		}
	}
	return kept, types, 1 << ct, &quotaCharge{quotas: quotas}, ""
}

// natural is t and the capacity type of its cheapest offering in zones and
// cts when quota holds it there; nil otherwise.
func (q *quotaBudget) natural(pl *pool, t *ptype, zones, cts uint64) (*ptype, int) {
	ct, price := -1, 0.0
	for i := range capacityTypes {
		if p, offered := t.cheapest(offerMask(zones, cts&(1<<i))); offered && (ct < 0 || p < price) {
			ct, price = i, p
		}
	}
	if qt := q.typeOf(pl, t); ct < 0 || !q.holds(qt.quotas[ct], qt.vcpus) {
		return nil, -1
	}
	return t, ct
}

// bestValue is the option and capacity type quota holds with the most
// room for the price (nil when it holds none).
func (q *quotaBudget) bestValue(s *solver, pl *pool, opts []*ptype, zones, cts uint64) (*ptype, int) {
	yCPU, yMem := q.duals(s, pl)
	var best *ptype
	ct, bestValue := -1, 0.0
	for _, t := range opts {
		qt := q.typeOf(pl, t)
		cpu, mem := usable(t, s.slack)
		for i := range capacityTypes {
			p, offered := t.cheapest(offerMask(zones, cts&(1<<i)))
			if !offered || p <= 0 || !q.holds(qt.quotas[i], qt.vcpus) {
				continue
			}
			if value := (yCPU*cpu + yMem*mem) / p; best == nil || value > bestValue*(1+effTie) {
				best, ct, bestValue = t, i, value
			}
		}
	}
	return best, ct
}

// duals are the dual prices of CPU and memory the pool ranks its types by
// (see byEfficiency), computed once per pool.
func (q *quotaBudget) duals(s *solver, pl *pool) (float64, float64) {
	if y, ok := q.dual[pl]; ok {
		return y[0], y[1]
	}
	total := make(resVec, len(s.res.names))
	for _, pending := range s.order {
		total.addInPlace(pending.req)
	}
	yCPU, yMem := lpDuals(s.lpTypes(pl), float64(total[rCPU]), float64(total[rMemory]), s.slack)
	q.dual[pl] = [2]float64{yCPU, yMem}
	return yCPU, yMem
}

// charge holds b's largest option's vCPUs against the quotas it is pinned
// to, in place of what it held before (its options only narrow).
func (q *quotaBudget) charge(b *bin) {
	var vcpus int64
	for _, t := range b.opts {
		vcpus = max(vcpus, q.typeOf(b.pool, t).vcpus)
	}
	for _, j := range b.quota.quotas {
		q.left[j] -= vcpus - b.quota.vcpus
	}
	b.quota.vcpus = vcpus
}

// quotaAllows reports whether the repair pass may make b a t: no larger than
// what b holds against quota.
func (b *bin) quotaAllows(t *ptype) bool { return b.quota == nil || vcpusOf(t) <= b.quota.vcpus }

// splitFits reports whether quota holds the split of from into a claim of
// type kept and one of type rest: both count against the quotas from is
// pinned to (a claim's types all do), and from gives back what it holds,
// so the two together may take what from holds plus what is left. Always
// true without quota.
func (q *quotaBudget) splitFits(from *bin, kept, rest *ptype) bool {
	if q == nil || from.quota == nil {
		return true
	}
	need := vcpusOf(kept) + vcpusOf(rest)
	for _, j := range from.quota.quotas {
		if q.left[j]+from.quota.vcpus < need {
			return false
		}
	}
	return true
}

// chargeSplit charges from, now of type kept, and to, split off from it
// as type rest, their own vCPUs against from's quotas, in place of what
// from held: each may then grow no larger than its type (quotaAllows).
func (q *quotaBudget) chargeSplit(from, to *bin, kept, rest *ptype) {
	if q == nil || from.quota == nil {
		return
	}
	to.quota = &quotaCharge{quotas: from.quota.quotas, vcpus: vcpusOf(rest)}
	for _, j := range from.quota.quotas {
		q.left[j] += from.quota.vcpus - vcpusOf(kept) - to.quota.vcpus
	}
	from.quota.vcpus = vcpusOf(kept)
}
