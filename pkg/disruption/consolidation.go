package disruption

import (
	"fmt"
	"math"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// consolidatable: the node may be consolidated for being underutilized.
func consolidatable(c *Candidate) bool {
	return c.Consolidatable && c.NodePool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyWhenEmpty
}

// consolidate asks the scheduler about cands: delete them when their pods
// fit elsewhere, replace them with one cheaper NodeClaim when the pods fit
// on it. The string explains a refusal.
func (e *Engine) consolidate(method string, cands []*Candidate) (*Command, string) {
	return e.consolidateInto(method, cands, e.simulateOnOne, 1, 0)
}

// consolidateInto is consolidate with simulate's answer, allowing up to
// maxNew replacements whose cheapest offerings must together cost at most
// (1-minSaving) of the candidates' price (strictly less when minSaving is
// 0).
func (e *Engine) consolidateInto(method string, cands []*Candidate, simulate func([]*Candidate) Simulation, maxNew int, minSaving float64) (*Command, string) {
	for _, candidate := range cands {
		if candidate.Price == 0 {
			return nil, fmt.Sprintf("the price of %s (%s %s %s) is not in the catalog", candidate.Name(), candidate.InstanceType, candidate.Zone, candidate.CapacityType)
		}
	}
	sim := simulate(cands)
	if sim.Unplaced != "" {
		return nil, sim.Unplaced
	}
	cmd := &Command{Reason: ReasonUnderutilized, Method: method, Candidates: cands, Existing: sim.Result.Existing}
	total := sumPrice(cands)
	switch count := len(sim.Result.NewNodeClaims); {
	case count == 0:
		cmd.Savings = total
	case count > maxNew && maxNew == 1:
		return nil, fmt.Sprintf("its pods would need %d new nodes", count)
	case count > maxNew:
		return nil, fmt.Sprintf("their pods would need %d new nodes, more than the %d allowed", count, maxNew)
	default:
		plans, why := e.cheaperSet(sim.Result.NewNodeClaims, cands, total*(1-minSaving))
		if plans == nil {
			return nil, why
		}
		cmd.Replacements = plans
		cmd.Savings = total - replacementPrice(cmd.Replacements)
	}
	if minSaving > 0 && cmd.Savings < minSaving*total {
		return nil, fmt.Sprintf("the move would save $%.4f/h, %.1f%% of the candidates' $%.4f/h, below the minimum of %.0f%%",
			cmd.Savings, 100*cmd.Savings/total, total, 100*minSaving)
	}
	if why := e.survivesSpread(cmd); why != "" {
		roomy, whyNot := e.makeRoom(cmd, sim.Result.NewNodeClaims, total*(1-minSaving))
		if roomy == nil {
			return nil, why + whyNot
		}
		cmd.Replacements = roomy
		cmd.Savings = total - replacementPrice(roomy)
	}
	if why := e.balanced(cmd); why != "" {
		return nil, why
	}
	return cmd, ""
}

// maxRoomSteps bounds how many times makeRoom widens a replacement.
const maxRoomSteps = 4

// makeRoom looks for replacements the kube-scheduler model fills without
// stranding a pod (survivesSpread), when cmd's do not: a replacement sized
// exactly for the pods the simulation gave it is filled by the
// kube-scheduler with whichever pods come first, and the ones it was meant
// for find no room. Starting from the simulation's plans, it widens, one
// step at a time, the plan whose next roomier type (see roomier) adds the
// least to the price, while the replacements stay below limit. nil and why
// not (to append to the model's refusal) when no widening is enough.
func (e *Engine) makeRoom(cmd *Command, plans []*scheduler.NodeClaimPlan, limit float64) ([]*scheduler.NodeClaimPlan, string) {
	if len(plans) == 0 {
		return nil, ""
	}
	wide := make([]*scheduler.NodeClaimPlan, len(plans))
	for i, plan := range plans {
		allowed, why := e.cheaper(plan, cmd.Candidates, math.Inf(1))
		if allowed == nil {
			return nil, "; " + why
		}
		wide[i] = allowed
	}
	for range maxRoomSteps {
		grow := -1
		added := math.Inf(1)
		var grown *scheduler.NodeClaimPlan
		for i, plan := range wide {
			if next := roomier(plan); next != nil {
				_, from := plan.Cheapest()
				if _, to := next.Cheapest(); to.Price-from.Price < added {
					grow = i
					added = to.Price - from.Price
					grown = next
				}
			}
		}
		if grow < 0 {
			return nil, "; no roomier instance type is allowed"
		}
		wide = slices.Clone(wide)
		wide[grow] = grown
		if price := replacementPrice(wide); price >= limit {
			return nil, fmt.Sprintf("; replacements with room for them would cost $%.4f/h, not below $%.4f/h", price, limit)
		}
		narrowed, why := e.cheaperSet(wide, cmd.Candidates, limit)
		if narrowed == nil {
			return nil, "; " + why
		}
		trial := *cmd
		trial.Replacements = narrowed
		if e.survivesSpread(&trial) == "" {
			return narrowed, ""
		}
	}
	return nil, fmt.Sprintf("; nor with %d roomier instance types", maxRoomSteps)
}

// roomier narrows plan to the types with at least the CPU and memory of its
// next roomier type: the cheapest of its types with at least as much of
// both as its cheapest type and more of one. nil if there is none.
func roomier(plan *scheduler.NodeClaimPlan) *scheduler.NodeClaimPlan {
	cheapest, _ := plan.Cheapest()
	if cheapest == nil {
		return nil
	}
	from := resOf(cheapest.Allocatable())
	out := *plan
	out.InstanceTypes = slices.DeleteFunc(slices.Clone(plan.InstanceTypes), func(it *catalog.InstanceType) bool {
		alloc := resOf(it.Allocatable())
		return !from.fitsIn(alloc) || alloc == from
	})
	next, _ := out.Cheapest()
	if next == nil {
		return nil
	}
	to := resOf(next.Allocatable())
	out.InstanceTypes = slices.DeleteFunc(out.InstanceTypes, func(it *catalog.InstanceType) bool { return !to.fitsIn(resOf(it.Allocatable())) })
	names := make([]string, len(out.InstanceTypes))
	for i, it := range out.InstanceTypes {
		names[i] = it.Name
	}
	out.Requirements = scheduling.NewRequirements(plan.Requirements.Values()...)
	out.Requirements.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	return &out
}

// cheaperSet narrows plans to offerings that together cost less than
// price: one plan to those cheaper than price (see cheaper); several each
// to its cheapest offering plus an equal share of what is left below
// price, so that any mix of the kept offerings stays below it.
func (e *Engine) cheaperSet(plans []*scheduler.NodeClaimPlan, cands []*Candidate, price float64) ([]*scheduler.NodeClaimPlan, string) {
	if len(plans) == 1 {
		plan, why := e.cheaper(plans[0], cands, price)
		if plan == nil {
			return nil, why
		}
		return []*scheduler.NodeClaimPlan{plan}, ""
	}
	lowest := make([]float64, len(plans))
	var sum float64
	for i, plan := range plans {
		allowed, why := e.cheaper(plan, cands, math.Inf(1))
		if allowed == nil {
			return nil, why
		}
		lowest[i] = replacementPrice([]*scheduler.NodeClaimPlan{allowed})
		sum += lowest[i]
	}
	slack := price - sum
	if slack <= 0 {
		return nil, fmt.Sprintf("%d replacements would cost at least $%.4f/h, not below $%.4f/h", len(plans), sum, price)
	}
	out := make([]*scheduler.NodeClaimPlan, len(plans))
	for i, plan := range plans {
		narrowed, why := e.cheaper(plan, cands, lowest[i]+slack/float64(len(plans)))
		if narrowed == nil {
			return nil, why
		}
		out[i] = narrowed
	}
	return out, ""
}

// cheaper narrows plan to the offerings cheaper than price, with
// Karpenter's spot-to-spot rules. nil and a reason when none remain.
func (e *Engine) cheaper(plan *scheduler.NodeClaimPlan, cands []*Candidate, price float64) (*scheduler.NodeClaimPlan, string) {
	allSpot := true
	for _, candidate := range cands {
		allSpot = allSpot && candidate.CapacityType == karpv1.CapacityTypeSpot
	}
	reqs := scheduling.NewRequirements(plan.Requirements.Values()...)
	// As Karpenter: spot nodes whose replacement may be spot are
	// replaced only with SpotToSpot on, and then only by spot.
	spotToSpot := allSpot && reqs.Get(karpv1.CapacityTypeLabelKey).Has(karpv1.CapacityTypeSpot)
	if spotToSpot {
		if !e.st.Options.SpotToSpot {
			return nil, "SpotToSpotConsolidation is disabled: a spot node is not replaced by another spot node"
		}
		reqs.Add(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot))
	}
	keep := cheaperTypes(plan.InstanceTypes, reqs, price)
	switch {
	case len(keep) == 0:
		return nil, fmt.Sprintf("no replacement is cheaper than $%.4f/h", price)
	case spotToSpot && len(keep) < MinSpotToSpotTypes:
		return nil, fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper spot instance types, found %d", MinSpotToSpotTypes, len(keep))
	}
	sort.SliceStable(keep, func(i, j int) bool { return keep[i].price < keep[j].price })
	if spotToSpot {
		keep = keep[:MinSpotToSpotTypes]
	}
	out := *plan
	out.InstanceTypes = make([]*catalog.InstanceType, len(keep))
	names := make([]string, len(keep))
	for i, kept := range keep {
		out.InstanceTypes[i] = kept.it
		names[i] = kept.it.Name
	}
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	out.Requirements = reqs
	return &out, ""
}

// cheaperType is an instance type at its cheapest allowed offering.
type cheaperType struct {
	it    *catalog.InstanceType
	price float64
}

// cheaperTypes are the types reqs allow with an available offering reqs
// allow cheaper than price, each at its cheapest such offering.
func cheaperTypes(types []*catalog.InstanceType, reqs scheduling.Requirements, price float64) []cheaperType {
	var keep []cheaperType
	for _, it := range types {
		if !reqs.Get(corev1.LabelInstanceTypeStable).Has(it.Name) {
			continue
		}
		best := -1.0
		for _, offering := range it.Offerings {
			if offering.Available && reqs.Get(corev1.LabelTopologyZone).Has(offering.Zone) && reqs.Get(karpv1.CapacityTypeLabelKey).Has(offering.CapacityType) &&
				offering.Price < price && (best < 0 || offering.Price < best) {
				best = offering.Price
			}
		}
		if best >= 0 {
			keep = append(keep, cheaperType{it, best})
		}
	}
	return keep
}

// balanced applies the Balanced policy's score: (savings / NodePool cost)
// over (move disruption cost / NodePool disruption cost), approved at
// BalancedThreshold. Other policies approve every cheaper move.
func (e *Engine) balanced(cmd *Command) string {
	pools := map[string]bool{}
	var moveCost float64
	for _, candidate := range cmd.Candidates {
		if candidate.NodePool.Spec.Disruption.ConsolidationPolicy != karpv1.ConsolidationPolicyBalanced {
			return ""
		}
		pools[candidate.NodePool.Name] = true
		moveCost += candidate.DisruptionCost
	}
	var poolCost, poolDisr float64
	for pool := range pools {
		poolCost += e.poolCost[pool]
		poolDisr += e.poolDisr[pool]
	}
	if poolCost <= 0 || poolDisr <= 0 || moveCost <= 0 {
		return ""
	}
	score := (cmd.Savings / poolCost) / (moveCost / poolDisr)
	if score < BalancedThreshold {
		return fmt.Sprintf("Balanced: score %.2f (saves %.0f%% of the NodePool's cost for %.0f%% of its disruption cost) is below %.1f",
			score, 100*cmd.Savings/poolCost, 100*moveCost/poolDisr, BalancedThreshold)
	}
	return ""
}

// withinBudget keeps the candidates, in order, whose NodePools still have
// budget for reason.
func withinBudget(cands []*Candidate, budgets Budgets, r Reason) []*Candidate {
	remaining := budgets.clone()
	var out []*Candidate
	for _, candidate := range cands {
		if remaining.Allowed(candidate.NodePool.Name, r) > 0 {
			out = append(out, candidate)
			remaining.Take(candidate.NodePool.Name, 1)
		}
	}
	return out
}
