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
	f := &fleet{free: map[string]res{}, candidates: map[*Candidate]res{}}
	for _, n := range e.base.Nodes {
		if e.unusable[n.Name] || n.Spec.Unschedulable {
			continue
		}
		free := resOf(n.Status.Allocatable)
		for _, p := range e.podsOn[n.Name] {
			free = free.sub(podRequests(p))
		}
		f.free[n.Name] = free
		f.freeAll = f.freeAll.add(free)
	}
	f.byPool = map[string][]pricedType{}
	if e.st.Catalog != nil {
		for _, it := range e.st.Catalog.InstanceTypes {
			a := resOf(it.Allocatable())
			f.largest = res{max(f.largest.cpu, a.cpu), max(f.largest.mem, a.mem)}
		}
	}
	for _, c := range e.Candidates {
		var r res
		for _, p := range c.Pods {
			r = r.add(podRequests(p))
		}
		f.candidates[c] = r
	}
	e.fleetCache = f
	return f
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
	for _, t := range f.poolTypes(e, c.NodePool) {
		if t.price >= c.Price {
			break
		}
		if spotOnly && !e.st.Options.SpotToSpot && t.capacityType == karpv1.CapacityTypeSpot {
			// (a spot node whose pool also allows on-demand may still be
			// replaced by on-demand; the scheduler decides)
			continue
		}
		// Some pods may stay on the rest of the fleet, the others go to
		// the replacement, as the scheduler would place them.
		if need.fitsIn(others.add(t.alloc)) {
			return ""
		}
	}
	return fmt.Sprintf("its pods (%s) fit neither in the rest of the fleet's free capacity nor on a cheaper instance type, nor shared between the two", need)
}

// prefixBound is the longest prefix of cands whose pods could fit in the
// rest of the fleet's free capacity plus one new node of the largest type.
func (f *fleet) prefixBound(cands []*Candidate) int {
	var need, freed res
	for i, c := range cands {
		need = need.add(f.candidates[c])
		freed = freed.add(f.free[c.Node.Name])
		if !need.fitsIn(f.freeAll.sub(freed).add(f.largest)) {
			return i
		}
	}
	return len(cands)
}

// podRequests: containers summed, init containers' peak, plus overhead.
func podRequests(p *corev1.Pod) res {
	var r, init res
	for i := range p.Spec.Containers {
		r = r.add(resOf(p.Spec.Containers[i].Resources.Requests))
	}
	for i := range p.Spec.InitContainers {
		c := resOf(p.Spec.InitContainers[i].Resources.Requests)
		init = res{max(init.cpu, c.cpu), max(init.mem, c.mem)}
	}
	r = res{max(r.cpu, init.cpu), max(r.mem, init.mem)}
	return r.add(resOf(p.Spec.Overhead))
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
	for _, p := range c.Pods {
		r := podRequests(p)
		small = res{min(small.cpu, r.cpu), min(small.mem, r.mem)}
		large = res{max(large.cpu, r.cpu), max(large.mem, r.mem)}
	}
	slots, roomForLarge := 0, false
	for node, free := range f.free {
		if node == c.Node.Name {
			continue
		}
		roomForLarge = roomForLarge || large.fitsIn(free)
		if free.cpu < 0 || free.mem < 0 {
			continue
		}
		n := math.MaxInt
		if small.cpu > 0 {
			n = min(n, int(free.cpu/small.cpu))
		}
		if small.mem > 0 {
			n = min(n, int(free.mem/small.mem))
		}
		if n == math.MaxInt {
			n = len(c.Pods) // pods that request nothing fit anywhere
		}
		slots += n
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
	if e.st.Catalog != nil {
		reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
		keys := sets.List(reqs.Keys())
	types:
		for _, it := range e.st.Catalog.InstanceTypes {
			for _, k := range keys {
				if v, ok := it.Labels[k]; ok && !reqs.Get(k).Has(v) {
					continue types
				}
			}
			a := resOf(it.Allocatable())
			for _, o := range it.Offerings {
				if o.Available && reqs.Get(corev1.LabelTopologyZone).Has(o.Zone) && reqs.Get(karpv1.CapacityTypeLabelKey).Has(o.CapacityType) {
					out = append(out, pricedType{alloc: a, price: o.Price, capacityType: o.CapacityType})
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
	for i, t := range types {
		bt[i] = coverlp.Type{CPU: float64(t.alloc.cpu), Mem: float64(t.alloc.mem), Price: t.price}
	}
	sol := coverlp.Solve(bt, float64(need.cpu), float64(need.mem))
	var basis [2]pricedType
	for k, u := range sol.Basis {
		if u.Index >= 0 {
			basis[k] = types[u.Index]
		}
	}
	return sol.Cost, basis
}
