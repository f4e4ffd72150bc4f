package disruption

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/coverlp"
)

// fleet is a resource-only view used to skip simulations that cannot
// succeed: every test here is a necessary condition (it ignores
// fragmentation, DaemonSet overhead and constraints), so skipping on it
// never loses a command the scheduler would have found.
type fleet struct {
	free       map[string]res // per usable node: allocatable minus requests
	freeAll    res
	largest    res
	byPool     map[string][]pricedType
	candidates map[*Candidate]res
}

type res struct{ cpu, mem int64 }

func (a res) add(b res) res     { return res{a.cpu + b.cpu, a.mem + b.mem} }
func (a res) sub(b res) res     { return res{a.cpu - b.cpu, a.mem - b.mem} }
func (a res) fitsIn(b res) bool { return a.cpu <= b.cpu && a.mem <= b.mem }
func (a res) String() string {
	return fmt.Sprintf("%dm CPU, %s memory", a.cpu, resource.NewQuantity(a.mem, resource.BinarySI))
}
func resOf(l corev1.ResourceList) res { return res{l.Cpu().MilliValue(), l.Memory().Value()} }

type pricedType struct {
	alloc        res
	price        float64
	capacityType string
}

func (e *Engine) fleet() *fleet {
	if e.fleetCache != nil {
		return e.fleetCache
	}
	capacity := &fleet{free: map[string]res{}, candidates: map[*Candidate]res{}}
	for _, node := range e.base.Nodes {
		if e.unusable[node.Name] || node.Spec.Unschedulable {
			continue
		}
		free := resOf(node.Status.Allocatable)
		for _, pod := range e.podsOn[node.Name] {
			free = free.sub(podRequests(pod))
		}
		capacity.free[node.Name] = free
		capacity.freeAll = capacity.freeAll.add(free)
	}
	capacity.byPool = map[string][]pricedType{}
	if e.st.Catalog != nil {
		for _, it := range e.st.Catalog.InstanceTypes {
			alloc := resOf(it.Allocatable())
			capacity.largest = res{max(capacity.largest.cpu, alloc.cpu), max(capacity.largest.mem, alloc.mem)}
		}
	}
	for _, candidate := range e.Candidates {
		var requests res
		for _, pod := range candidate.Pods {
			requests = requests.add(podRequests(pod))
		}
		capacity.candidates[candidate] = requests
	}
	e.fleetCache = capacity
	return capacity
}

// hopeless explains why c can be neither deleted nor replaced, judged by
// resources alone ("" when the scheduler should be asked).
func (f *fleet) hopeless(e *Engine, c *Candidate) string {
	need := f.candidates[c]
	others := f.freeAll.sub(f.free[c.Node.Name])
	if need.fitsIn(others) && f.slotsFor(c) {
		return ""
	}
	spotOnly := c.CapacityType == karpv1.CapacityTypeSpot
	for _, offer := range f.poolTypes(e, c.NodePool) {
		if offer.price >= c.Price {
			break
		}
		if spotOnly && !e.st.Options.SpotToSpot && offer.capacityType == karpv1.CapacityTypeSpot {
			// (a spot node whose pool also allows on-demand may still be
			// replaced by on-demand; the scheduler decides)
			continue
		}
		// Some pods may stay on the rest of the fleet, the others go to
		// the replacement, as the scheduler would place them.
		if need.fitsIn(others.add(offer.alloc)) {
			return ""
		}
	}
	return fmt.Sprintf("its pods (%s) fit neither in the rest of the fleet's free capacity nor on a cheaper instance type, nor shared between the two", need)
}

// prefixBound is the longest prefix of cands whose pods could fit in the
// rest of the fleet's free capacity plus one new node of the largest type.
func (f *fleet) prefixBound(cands []*Candidate) int {
	var need, freed res
	for i, candidate := range cands {
		need = need.add(f.candidates[candidate])
		freed = freed.add(f.free[candidate.Node.Name])
		if !need.fitsIn(f.freeAll.sub(freed).add(f.largest)) {
			return i
		}
	}
	return len(cands)
}

// podRequests: containers summed, init containers' peak, plus overhead.
func podRequests(p *corev1.Pod) res {
	var containers, init res
	for i := range p.Spec.Containers {
		containers = containers.add(resOf(p.Spec.Containers[i].Resources.Requests))
	}
	for i := range p.Spec.InitContainers {
		container := resOf(p.Spec.InitContainers[i].Resources.Requests)
		init = res{max(init.cpu, container.cpu), max(init.mem, container.mem)}
	}
	peak := res{max(containers.cpu, init.cpu), max(containers.mem, init.mem)}
	return peak.add(resOf(p.Spec.Overhead))
}

// slotsFor: every pod of c is at least as large as its smallest, so the
// rest of the fleet must have that many slots of that size, and some node
// must have room for its largest.
func (f *fleet) slotsFor(c *Candidate) bool {
	if len(c.Pods) == 0 {
		return true
	}
	small := res{math.MaxInt64, math.MaxInt64}
	var large res
	for _, pod := range c.Pods {
		requests := podRequests(pod)
		small = res{min(small.cpu, requests.cpu), min(small.mem, requests.mem)}
		large = res{max(large.cpu, requests.cpu), max(large.mem, requests.mem)}
	}
	slots := 0
	roomForLarge := false
	for node, free := range f.free {
		if node == c.Node.Name {
			continue
		}
		roomForLarge = roomForLarge || large.fitsIn(free)
		if free.cpu < 0 || free.mem < 0 {
			continue
		}
		fits := math.MaxInt
		if small.cpu > 0 {
			fits = min(fits, int(free.cpu/small.cpu))
		}
		if small.mem > 0 {
			fits = min(fits, int(free.mem/small.mem))
		}
		if fits == math.MaxInt {
			fits = len(c.Pods) // pods that request nothing fit anywhere
		}
		slots += fits
		if slots >= len(c.Pods) && roomForLarge {
			return true
		}
	}
	return false
}

// poolTypes are the offerings np's requirements may allow, cheapest
// first. Lenient: a requirement on a label the type does not carry is
// not held against it.
func (f *fleet) poolTypes(e *Engine, np *karpv1.NodePool) []pricedType {
	if out, ok := f.byPool[np.Name]; ok {
		return out
	}
	var out []pricedType
	if cat := e.base.CatalogFor(np.Name); cat != nil {
		reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
		keys := sets.List(reqs.Keys())
	types:
		for _, it := range cat.InstanceTypes {
			for _, key := range keys {
				if value, ok := it.Labels[key]; ok && !reqs.Get(key).Has(value) {
					continue types
				}
			}
			alloc := resOf(it.Allocatable())
			for _, offering := range it.Offerings {
				if offering.Available && reqs.Get(corev1.LabelTopologyZone).Has(offering.Zone) && reqs.Get(karpv1.CapacityTypeLabelKey).Has(offering.CapacityType) {
					out = append(out, pricedType{alloc: alloc, price: offering.Price, capacityType: offering.CapacityType})
				}
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].price < out[j].price })
	}
	f.byPool[np.Name] = out
	return out
}

// lpBound is the cheapest fractional cover of need by the offerings in
// types: min Σ price·x s.t. Σ alloc·x ≥ need (CPU and memory), x ≥ 0.
func lpBound(types []pricedType, need res) float64 {
	cost, _ := lpMix(types, need)
	return cost
}

// lpMix is lpBound and the optimum's types: an optimum uses one type or
// two (basis[1] is the zero pricedType when one).
func lpMix(types []pricedType, need res) (float64, [2]pricedType) {
	bt := make([]coverlp.Type, len(types))
	for i, offer := range types {
		bt[i] = coverlp.Type{CPU: float64(offer.alloc.cpu), Mem: float64(offer.alloc.mem), Price: offer.price}
	}
	sol := coverlp.Solve(bt, float64(need.cpu), float64(need.mem))
	var basis [2]pricedType
	for slot, use := range sol.Basis {
		if use.Index >= 0 {
			basis[slot] = types[use.Index]
		}
	}
	return sol.Cost, basis
}
