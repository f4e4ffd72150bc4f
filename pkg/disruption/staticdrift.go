package disruption

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// StaticDrift replaces the drifted nodes of a static NodePool
// (spec.replicas) one for one, as Karpenter v1.14.1's StaticDrift method
// (pkg/controllers/disruption/staticdrift.go:50-100): for each pool, as
// many drifted nodes as its budget for Drifted allows, only while the pool
// holds no more NodeClaims than replicas (counting those being replaced),
// and no more than limits.nodes leaves room for. Each gets a new pod-less
// NodeClaim from the pool's template, launched before the drifted one goes;
// the drifted node's pods leave through the termination path and are
// placed again like any pending pod. Pending pods do not hold it back:
// the replacement is the pool's, not theirs. Ordinary drift leaves static
// pools' nodes to it.
//
// One command per pool (its candidates in the engine's order, cheapest
// to disrupt first); the decision takes the first pool's by name, the
// next pass the next.
type StaticDrift struct{}

func (StaticDrift) Name() string   { return MethodStaticDrift }
func (StaticDrift) Reason() Reason { return ReasonDrifted }
func (StaticDrift) ShouldDisrupt(c *Candidate) bool {
	return staticcapacity.IsStatic(c.NodePool) && c.Drift != "" && c.DriftHeld == ""
}

func (StaticDrift) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	byPool := map[string][]*Candidate{}
	for _, candidate := range cands {
		byPool[candidate.NodePool.Name] = append(byPool[candidate.NodePool.Name], candidate)
	}
	pools := make([]string, 0, len(byPool))
	for pool := range byPool {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	var cmds []*Command
	var refusals []Refusal
	for _, pool := range pools {
		cmd, refused := e.staticDrift(budgets, byPool[pool])
		if cmd != nil {
			cmds = append(cmds, cmd)
		}
		refusals = append(refusals, refused...)
	}
	return cmds, refusals
}

// staticDrift is the command replacing the drifted nodes of one static
// pool, cands (nil when none may go now), and a refusal for every
// candidate it leaves.
func (e *Engine) staticDrift(budgets Budgets, cands []*Candidate) (*Command, []Refusal) {
	np := cands[0].NodePool
	refuse := func(left []*Candidate, blocked bool, why string) []Refusal {
		out := make([]Refusal, len(left))
		for i, candidate := range left {
			out[i] = Refusal{NodeClaim: candidate.Name(), Blocked: blocked, Reason: "drifted (" + candidate.Drift + ") but " + why}
		}
		return out
	}
	count := staticcapacity.Decide(np, staticcapacity.ClaimsOf(np, staticcapacity.Objects{NodeClaims: e.st.Cluster.NodeClaims}, e.st.Now))
	budgetWhy := "the NodePool's budget for Drifted allows no more disruptions now"
	allowed := budgets.Allowed(np.Name, ReasonDrifted)
	if allowed <= 0 {
		return nil, refuse(cands, true, budgetWhy)
	}
	if counted := count.Running + count.PendingDisruption; int64(counted) > count.Replicas {
		return nil, refuse(cands, false, fmt.Sprintf("static NodePool %s has %d NodeClaims counting those being replaced, more than its replicas (%d): drift waits until it is scaled down",
			np.Name, counted, count.Replicas))
	}
	all := count.Running + count.PendingDisruption + count.Deleting
	limit := int64(math.MaxInt64)
	if quantity, ok := np.Spec.Limits[corev1.ResourceName("nodes")]; ok {
		limit = quantity.Value()
	}
	room := max(limit-int64(all), 0)
	take := int(min(int64(allowed), int64(len(cands)), room))
	if take == 0 {
		return nil, refuse(cands, false, fmt.Sprintf("limits.nodes (%d) leaves no room for a replacement: the NodePool has %d NodeClaims (%d being deleted)",
			limit, all, count.Deleting))
	}
	plan, why := scheduler.StaticPlan(e.base, np)
	if plan == nil {
		return nil, refuse(cands, false, why)
	}
	cmd := &Command{Reason: ReasonDrifted, Method: MethodStaticDrift, Candidates: cands[:take]}
	for range take {
		replacement := *plan
		cmd.Replacements = append(cmd.Replacements, &replacement)
	}
	cmd.Savings = sumPrice(cmd.Candidates) - replacementPrice(cmd.Replacements)
	// The rest wait for whichever bound stopped them.
	rest := cands[take:]
	if int64(take) < room {
		return cmd, refuse(rest, true, budgetWhy)
	}
	return cmd, refuse(rest, false, fmt.Sprintf("limits.nodes (%d) leaves no room for its replacement: the NodePool has %d NodeClaims (%d being deleted) and %d replacements launch first",
		limit, all, count.Deleting, take))
}
