package disruption

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// RebalancingConsolidation goes beyond Karpenter: it replaces a group of
// candidates with as many new nodes as the scheduler needs for their pods
// (at most rebalanceExtraNodes more than it removes), of whatever shapes it
// picks, when together they cost at least MinRebalanceSaving less. Karpenter's consolidation
// takes prefixes of the candidates in disruption-cost order and replaces
// them with at most one node, so a fleet of full nodes whose pods would be
// cheaper on other shapes (CPU-heavy pods on a low-memory type, two lean
// nodes on one larger low-memory node, one large node whose memory is full
// and CPU is not on a low-memory and a high-memory node) stays as it is;
// this method re-packs it. It runs last, only with Options.Rebalance, and spends
// Underutilized budgets like the other consolidation methods (sharing
// their simulation, spot rules, Balanced score and validation).
//
// Groups, within budgets: runs of 1 to maxRebalanceGroup neighbours in
// the candidates sorted by their pods' memory per CPU (alike shapes pack
// together onto larger nodes), pairs from both ends of that order
// (opposite shapes complete each other), and prefixes of the candidates
// whose own pods are furthest above their LP cover. Each is judged first
// by resources alone: the LP cover of its pods by types no larger than
// twice its CPU. Groups whose cover saves coverMargin times the minimum
// are asked of the scheduler, largest estimated $/h saving first, until
// maxRebalanceSimulations solves are spent; the first that saves at least
// MinRebalanceSaving is the command.
type RebalancingConsolidation struct{}

const (
	// MinRebalanceSaving is the least share of the candidates' price a
	// rebalance must save. A rebalance evicts every pod of its candidates
	// and pays for candidates and replacements together until the
	// replacements are Initialized (minutes); 2 % pays that back within
	// hours. It is no higher because the gap it closes is small: on the
	// eastus D family a low-memory type (Dals) costs 6-7 % less per CPU
	// than a general one (Das), so a re-pack that still needs some general
	// nodes saves 2-6 %, and a minimum of 5 % would leave most of the gap
	// between a fleet at rest and the LP bound on the table.
	MinRebalanceSaving = 0.02
	// coverMargin: a group is simulated only if its LP cover saves this
	// many times MinRebalanceSaving. The scheduler's packing of a group
	// lands a few percent above the cover (whole nodes, small types with
	// less room per CPU); groups whose cover barely clears the minimum
	// spend the simulations and never save it.
	coverMargin = 2
	// rebalanceExtraNodes: a rebalance may launch this many more nodes
	// than it removes. After a scale-down a fleet of large nodes may be
	// full on memory with CPU to spare; each such node's pods are cheaper
	// on two shapes, and rounding to whole sizes may take a third, while
	// the budget (10% of a small fleet) allows one or two nodes at a time.
	rebalanceExtraNodes = 2
	// maxRebalanceGroup is the largest group tried.
	maxRebalanceGroup = 16
	// maxRebalancePairs is how many pairs from both ends are tried.
	maxRebalancePairs = 4
	// maxRebalanceSimulations bounds the scheduler solves of one decision.
	maxRebalanceSimulations = 12
)

func (RebalancingConsolidation) Name() string                    { return MethodRebalance }
func (RebalancingConsolidation) Reason() Reason                  { return ReasonUnderutilized }
func (RebalancingConsolidation) ShouldDisrupt(c *Candidate) bool { return consolidatable(c) }

func (RebalancingConsolidation) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	if e.pending > 0 || !e.st.Options.Rebalance {
		return nil, nil
	}
	finder := &groupFinder{e: e, fleet: e.fleet(), rebalancer: e.rebalancer(), budgets: budgets, seen: map[string]bool{}}
	var sorted []*Candidate
	for _, candidate := range cands {
		if candidate.Price > 0 && len(candidate.Pods) > 0 && budgets.Allowed(candidate.NodePool.Name, ReasonUnderutilized) > 0 {
			sorted = append(sorted, candidate)
		}
	}
	slices.SortStableFunc(sorted, func(a, b *Candidate) int {
		return cmp.Compare(memPerCPU(finder.fleet.candidates[a]), memPerCPU(finder.fleet.candidates[b]))
	})
	finder.runsAndPairs(sorted)
	finder.wastefulPrefixes(sorted)
	slices.SortStableFunc(finder.groups, func(a, b rebalanceGroup) int { return cmp.Compare(b.saving, a.saving) })
	for _, group := range finder.groups {
		if e.outOfTime() || finder.rebalancer.solves >= maxRebalanceSimulations {
			break
		}
		if cmd, _ := e.rebalance(group.cands); cmd != nil {
			return []*Command{cmd}, nil
		}
	}
	return nil, nil
}

// rebalanceGroup is a group worth simulating.
type rebalanceGroup struct {
	cands  []*Candidate
	saving float64 // $/h the cover saves
}

// groupFinder collects the groups of candidates a rebalance tries.
type groupFinder struct {
	e          *Engine
	fleet      *fleet
	rebalancer *rebalancer
	budgets    Budgets
	seen       map[string]bool
	groups     []rebalanceGroup
}

// consider keeps g if its budgets allow it and its LP cover saves enough.
func (g *groupFinder) consider(cands []*Candidate) {
	key := groupKey(cands)
	if g.seen[key] {
		return
	}
	g.seen[key] = true
	var need res
	var price float64
	allSpot := true
	for _, candidate := range cands {
		need = need.add(g.fleet.candidates[candidate])
		price += candidate.Price
		allSpot = allSpot && candidate.CapacityType == karpv1.CapacityTypeSpot
	}
	if !fitsBudgets(cands, g.budgets) {
		return
	}
	cover := g.rebalancer.cover(need, 2*need.cpu, allSpot && !g.e.st.Options.SpotToSpot)
	if saving := price - cover; saving >= coverMargin*MinRebalanceSaving*price {
		g.groups = append(g.groups, rebalanceGroup{cands, saving})
	}
}

// runsAndPairs considers runs of neighbours in memory per CPU, and pairs
// from both ends (opposite shapes complete each other).
func (g *groupFinder) runsAndPairs(sorted []*Candidate) {
	for size := 1; size <= min(maxRebalanceGroup, len(sorted)); size++ {
		for i := 0; i+size <= len(sorted); i++ {
			g.consider(sorted[i : i+size])
		}
	}
	for i := 0; i < min(maxRebalancePairs, len(sorted)/2); i++ {
		if j := len(sorted) - 1 - i; j-i >= maxRebalanceGroup {
			g.consider([]*Candidate{sorted[i], sorted[j]})
		}
	}
}

// wastefulPrefixes considers prefixes of the candidates whose own pods are
// furthest above their cover: the nodes a re-pack gains most from,
// whatever their shape.
func (g *groupFinder) wastefulPrefixes(sorted []*Candidate) {
	waste := make(map[*Candidate]float64, len(sorted))
	for _, candidate := range sorted {
		need := g.fleet.candidates[candidate]
		waste[candidate] = 1 - g.rebalancer.cover(need, 2*need.cpu, candidate.CapacityType == karpv1.CapacityTypeSpot && !g.e.st.Options.SpotToSpot)/candidate.Price
	}
	wasteful := slices.Clone(sorted)
	slices.SortStableFunc(wasteful, func(a, b *Candidate) int { return cmp.Compare(waste[b], waste[a]) })
	for size := 2; size <= min(maxRebalanceGroup, len(wasteful)); size++ {
		g.consider(wasteful[:size])
	}
}

// groupKey names a group's candidates, in any order.
func groupKey(g []*Candidate) string {
	names := make([]string, len(g))
	for i, candidate := range g {
		names[i] = candidate.Name()
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func memPerCPU(a res) float64 { return float64(a.mem) / float64(max(a.cpu, 1)) }

// fitsBudgets: every NodePool's Underutilized budget allows g's nodes.
func fitsBudgets(g []*Candidate, budgets Budgets) bool {
	perPool := map[string]int{}
	for _, candidate := range g {
		perPool[candidate.NodePool.Name]++
	}
	for pool, count := range perPool {
		if budgets.Allowed(pool, ReasonUnderutilized) < count {
			return false
		}
	}
	return true
}

// rebalance asks the scheduler to re-pack cands' pods on the rest of the
// fleet and up to len(cands) new nodes; if that does not save enough,
// again with the pods split by shape (see simulateSplit).
func (e *Engine) rebalance(cands []*Candidate) (*Command, string) {
	balancer := e.rebalancer()
	simulate := func(c []*Candidate) Simulation { balancer.solves++; return e.Simulate(c) }
	cmd, why := e.consolidateInto(MethodRebalance, cands, simulate, len(cands)+rebalanceExtraNodes, MinRebalanceSaving)
	if cmd != nil {
		return cmd, ""
	}
	split, whySplit := e.consolidateInto(MethodRebalance, cands, func(c []*Candidate) Simulation { return e.simulateSplit(balancer, c) }, len(cands)+rebalanceExtraNodes, MinRebalanceSaving)
	if split != nil {
		return split, ""
	}
	if whySplit != why {
		why += "; split by shape: " + whySplit
	}
	return nil, why
}

// rebalancer holds the offerings every NodePool allows.
type rebalancer struct {
	offerings []pricedType // unique, by CPU
	// useful caches, per CPU cap and spot rule, the offerings an LP over
	// CPU and memory may use.
	useful map[[2]int64][]pricedType
	solves int
}

func (e *Engine) rebalancer() *rebalancer {
	if e.rebalanceCache != nil {
		return e.rebalanceCache
	}
	seen := map[pricedType]bool{}
	balancer := &rebalancer{useful: map[[2]int64][]pricedType{}}
	for _, np := range e.st.Cluster.NodePools {
		for _, offer := range e.fleet().poolTypes(e, np) {
			if !seen[offer] && offer.price > 0 && offer.alloc.cpu > 0 && offer.alloc.mem > 0 {
				seen[offer] = true
				balancer.offerings = append(balancer.offerings, offer)
			}
		}
	}
	slices.SortStableFunc(balancer.offerings, func(a, b pricedType) int { return cmp.Compare(a.alloc.cpu, b.alloc.cpu) })
	e.rebalanceCache = balancer
	return balancer
}

// types are the offerings no larger than maxCPU CPU (the smallest size if
// none is), on-demand only with onDemand, reduced to those an LP may use.
func (r *rebalancer) types(maxCPU int64, onDemand bool) []pricedType {
	if len(r.offerings) == 0 {
		return nil
	}
	// Caps between two sizes are the smaller size.
	end, _ := slices.BinarySearchFunc(r.offerings, maxCPU+1, func(t pricedType, v int64) int { return cmp.Compare(t.alloc.cpu, v) })
	end = max(end, 1)
	key := [2]int64{r.offerings[end-1].alloc.cpu, 0}
	if onDemand {
		key[1] = 1
	}
	if out, ok := r.useful[key]; ok {
		return out
	}
	var in []pricedType
	for _, offer := range r.offerings[:end] {
		if !onDemand || offer.capacityType != karpv1.CapacityTypeSpot {
			in = append(in, offer)
		}
	}
	out := lpUseful(in)
	r.useful[key] = out
	return out
}

// cover is the LP cost of need (negatives taken as 0) by types no larger
// than maxCPU.
func (r *rebalancer) cover(need res, maxCPU int64, onDemand bool) float64 {
	return lpBound(r.types(maxCPU, onDemand), res{max(need.cpu, 0), max(need.mem, 0)})
}

// simulateSplit is Simulate with the pods split by shape. The scheduler
// divides pods between two shapes only when their LP cover buys at least
// one whole node of each; below that it gives every new node the mix of
// the pods it places (right for provisioning: no node fills up on one
// resource with the other left over), so asked about two or three nodes'
// pods it replaces general-purpose nodes with general-purpose nodes. When
// the cheapest fractional cover of the pods by types no larger than they
// need mixes two types, the lowest memory-per-CPU pods, as many as keep
// their mix within the lean type's, are placed first, the rest after
// them, each part on the rest of the fleet and its own new nodes. Pods
// whose placement depends on other pods (spread, pod affinity) are not
// split.
func (e *Engine) simulateSplit(r *rebalancer, cands []*Candidate) Simulation {
	moved := movedPods(cands)
	allSpot := true
	for _, candidate := range cands {
		allSpot = allSpot && candidate.CapacityType == karpv1.CapacityTypeSpot
	}
	lean, rest := r.split(moved, allSpot && !e.st.Options.SpotToSpot)
	if len(lean) == 0 || len(rest) == 0 || e.interPod || anyInterPod(moved) {
		return Simulation{Unplaced: "its pods are not split by shape"}
	}
	r.solves += 2
	first := scheduler.Solve(e.simInput(cands, lean))
	if len(first.Unschedulable) > 0 {
		return simulation(first)
	}
	in := e.simInput(cands, rest)
	kept := make(map[string]bool, len(in.Nodes))
	for _, node := range in.Nodes {
		kept[node.Name] = true
	}
	in.BoundPods = slices.Clone(in.BoundPods)
	for _, pl := range first.Existing {
		if !kept[pl.Node] {
			continue // no room for the rest's smallest pod anyway
		}
		for _, pod := range pl.Pods {
			bound := *pod
			bound.Spec.NodeName = pl.Node
			in.BoundPods = append(in.BoundPods, &bound)
		}
	}
	second := scheduler.Solve(in)
	return simulation(scheduler.Result{
		Existing:      append(slices.Clone(first.Existing), second.Existing...),
		NewNodeClaims: append(slices.Clone(first.NewNodeClaims), second.NewNodeClaims...),
		Unschedulable: second.Unschedulable,
	})
}

// split divides pods as the LP cover of their requests divides them between
// a lean (less memory per CPU) and a rich type; nothing when the cover
// uses one type.
func (r *rebalancer) split(pods []*corev1.Pod, spotOnly bool) (lean, rest []*corev1.Pod) {
	var need res
	for _, pod := range pods {
		need = need.add(podRequests(pod))
	}
	// Types no larger than the pods need: the cover of a group of small
	// nodes by fractions of the largest types would split the pods for
	// shapes the packing cannot buy (small types have less room per CPU).
	_, basis := lpMix(r.types(need.cpu, spotOnly), need)
	if basis[1].price == 0 {
		return nil, pods
	}
	ratio := memPerCPU
	leanRatio := min(ratio(basis[0].alloc), ratio(basis[1].alloc))
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b *corev1.Pod) int { return cmp.Compare(ratio(podRequests(a)), ratio(podRequests(b))) })
	var sum res
	leanCount := 0
	for leanCount < len(sorted) {
		next := sum.add(podRequests(sorted[leanCount]))
		if ratio(next) > leanRatio {
			break
		}
		sum = next
		leanCount++
	}
	return sorted[:leanCount], sorted[leanCount:]
}

// lpUseful drops offerings an LP over CPU and memory never needs: those
// whose CPU and memory per dollar another offering matches or beats.
func lpUseful(offerings []pricedType) []pricedType {
	seen := map[pricedType]bool{}
	var types, out []pricedType
	for _, offer := range offerings {
		if !seen[offer] {
			seen[offer] = true
			types = append(types, offer)
		}
	}
	for i, offer := range types {
		if offer.price <= 0 || offer.alloc.cpu <= 0 || offer.alloc.mem <= 0 {
			continue
		}
		if !dominated(types, i) {
			out = append(out, offer)
		}
	}
	return out
}

// dominated: another of types offers at least types[i]'s CPU and memory
// per dollar, more of one (or the same, listed first).
func dominated(types []pricedType, i int) bool {
	cpuPerDollar := float64(types[i].alloc.cpu) / types[i].price
	memPerDollar := float64(types[i].alloc.mem) / types[i].price
	for j, other := range types {
		if j == i || other.price <= 0 {
			continue
		}
		otherCPU := float64(other.alloc.cpu) / other.price
		otherMem := float64(other.alloc.mem) / other.price
		if otherCPU >= cpuPerDollar && otherMem >= memPerDollar && (otherCPU > cpuPerDollar || otherMem > memPerDollar || j < i) {
			return true
		}
	}
	return false
}
