package disruption

import (
	"fmt"
	"slices"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// ValidationError says why a command no longer holds after the
// validation delay; the command is dropped and the next decision starts
// afresh.
type ValidationError struct{ Reason string }

func (e *ValidationError) Error() string { return "command no longer valid: " + e.Reason }

// Validate re-checks cmd on a fresh snapshot taken after ValidationDelay,
// as Karpenter does: every node must still be a candidate the method
// would take (pods, PDBs, do-not-disrupt, consolidatable), the budgets
// must still allow all of them, and consolidation is simulated again: a
// delete must stay a delete, a replacement must stay one replacement whose
// instance types are among those first chosen; a rebalance must still
// save its minimum and no less than decided. It returns the command
// rebuilt from the fresh snapshot.
func Validate(st State, cmd *Command) (*Command, error) {
	e := NewEngine(st)
	byName := map[string]*Candidate{}
	for _, c := range e.Candidates {
		byName[c.Name()] = c
	}
	var method Method
	for _, m := range methodsFor(st.Options) {
		if methodName(m) == cmd.Method {
			method = m
		}
	}
	if method == nil && cmd.Method == MethodRebalance {
		return nil, &ValidationError{Reason: "rebalancing consolidation has been turned off since the command was decided"}
	}
	if method == nil {
		return nil, &ValidationError{Reason: fmt.Sprintf("unknown method %q", cmd.Method)}
	}
	fresh := make([]*Candidate, 0, len(cmd.Candidates))
	need := map[string]int{}
	for _, old := range cmd.Candidates {
		c, ok := byName[old.Name()]
		if !ok {
			why := "it is no longer a candidate"
			if r, blocked := e.blocked[old.Name()]; blocked {
				why = r.Reason
			}
			return nil, &ValidationError{Reason: fmt.Sprintf("%s: %s", old.Name(), why)}
		}
		if c.NodeClaim.UID != old.NodeClaim.UID {
			return nil, &ValidationError{Reason: fmt.Sprintf("%s was replaced by another NodeClaim of the same name", old.Name())}
		}
		if !method.ShouldDisrupt(c) {
			return nil, &ValidationError{Reason: fmt.Sprintf("%s no longer qualifies for %s", c.Name(), cmd.Method)}
		}
		fresh = append(fresh, c)
		need[c.NodePool.Name]++
	}
	for pool, n := range need {
		if got := e.budgets.Allowed(pool, cmd.Reason); got < n {
			return nil, &ValidationError{Reason: fmt.Sprintf("NodePool %s's budget for %s now allows %d disruptions, the command needs %d", pool, cmd.Reason, got, n)}
		}
	}
	switch cmd.Reason {
	case ReasonEmpty:
		return &Command{Reason: cmd.Reason, Method: cmd.Method, Candidates: fresh, Savings: sumPrice(fresh)}, nil
	case ReasonDrifted:
		out := *cmd
		out.Candidates = fresh
		return &out, nil
	}
	if cmd.Method == MethodRebalance {
		return e.revalidateRebalance(cmd, fresh)
	}
	again, why := e.consolidate(cmd.Method, fresh)
	switch {
	case again == nil:
		return nil, &ValidationError{Reason: why}
	case len(again.Replacements) != len(cmd.Replacements):
		return nil, &ValidationError{Reason: fmt.Sprintf("the simulation now needs %d replacements, not %d", len(again.Replacements), len(cmd.Replacements))}
	case len(again.Replacements) == 1:
		first := map[string]bool{}
		for _, it := range cmd.Replacements[0].InstanceTypes {
			first[it.Name] = true
		}
		var kept []string
		for _, it := range again.Replacements[0].InstanceTypes {
			if first[it.Name] {
				kept = append(kept, it.Name)
			}
		}
		if len(kept) == 0 {
			return nil, &ValidationError{Reason: "none of the replacement's instance types still fit and save money"}
		}
		// Launch only what both simulations allow.
		plan := *again.Replacements[0]
		plan.InstanceTypes = slices.DeleteFunc(slices.Clone(plan.InstanceTypes), func(it *catalog.InstanceType) bool { return !first[it.Name] })
		again.Replacements[0] = &plan
	}
	return again, nil
}

// revalidateRebalance re-packs a rebalance's candidates: the command holds
// if the fresh replacements (any number up to the candidates') still save
// the minimum and at least what was decided (cmd.Savings, when known);
// they are what is launched.
func (e *Engine) revalidateRebalance(cmd *Command, fresh []*Candidate) (*Command, error) {
	again, why := e.rebalance(fresh)
	if again == nil {
		return nil, &ValidationError{Reason: fmt.Sprintf("the re-simulation finds no rebalance that saves %.0f%%: %s", 100*MinRebalanceSaving, why)}
	}
	if cmd.Savings > 0 && again.Savings < cmd.Savings-savingsTolerance {
		return nil, &ValidationError{Reason: fmt.Sprintf("the re-simulation saves $%.4f/h, less than the $%.4f/h decided", again.Savings, cmd.Savings)}
	}
	return again, nil
}

// savingsTolerance absorbs float rounding between two sums of the same
// prices.
const savingsTolerance = 1e-9

func methodName(m Method) string {
	switch m.(type) {
	case Emptiness:
		return "emptiness"
	case Drift:
		return "drift"
	case MultiNodeConsolidation:
		return "multi-node consolidation"
	case SingleNodeConsolidation:
		return "single-node consolidation"
	case RebalancingConsolidation:
		return MethodRebalance
	}
	return ""
}
