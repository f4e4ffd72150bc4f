package disruption

import (
	"fmt"
	"slices"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
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
	engine := NewEngine(st)
	method, err := validMethod(st.Options, cmd.Method)
	if err != nil {
		return nil, err
	}
	fresh, err := engine.freshCandidates(method, cmd)
	if err != nil {
		return nil, err
	}
	if err := engine.budgetsAllow(cmd.Reason, fresh); err != nil {
		return nil, err
	}
	switch {
	case cmd.Reason == ReasonEmpty:
		return &Command{Reason: cmd.Reason, Method: cmd.Method, Candidates: fresh, Savings: sumPrice(fresh)}, nil
	case cmd.Reason == ReasonDrifted:
		out := *cmd
		out.Candidates = fresh
		return &out, nil
	case cmd.Method == MethodRebalance:
		return engine.revalidateRebalance(cmd, fresh)
	}
	return engine.revalidateConsolidation(cmd, fresh)
}

// validMethod is the method called name, if decisions under o run it.
func validMethod(o Options, name string) (Method, error) {
	method := MethodNamed(o, name)
	switch {
	case method != nil:
		return method, nil
	case name == MethodRebalance:
		return nil, &ValidationError{Reason: "rebalancing consolidation has been turned off since the command was decided"}
	}
	return nil, &ValidationError{Reason: fmt.Sprintf("unknown method %q", name)}
}

// freshCandidates are cmd's candidates as the fresh snapshot has them; each
// must still be a candidate, the same NodeClaim (UID), and one method
// would take.
func (e *Engine) freshCandidates(method Method, cmd *Command) ([]*Candidate, error) {
	byName := map[string]*Candidate{}
	for _, candidate := range e.Candidates {
		byName[candidate.Name()] = candidate
	}
	fresh := make([]*Candidate, 0, len(cmd.Candidates))
	for _, old := range cmd.Candidates {
		candidate, ok := byName[old.Name()]
		if !ok {
			why := "it is no longer a candidate"
			if refusal, blocked := e.blocked[old.Name()]; blocked {
				why = refusal.Reason
			}
			return nil, &ValidationError{Reason: fmt.Sprintf("%s: %s", old.Name(), why)}
		}
		if candidate.NodeClaim.UID != old.NodeClaim.UID {
			return nil, &ValidationError{Reason: fmt.Sprintf("%s was replaced by another NodeClaim of the same name", old.Name())}
		}
		if !method.ShouldDisrupt(candidate) {
			return nil, &ValidationError{Reason: fmt.Sprintf("%s no longer qualifies for %s", candidate.Name(), cmd.Method)}
		}
		fresh = append(fresh, candidate)
	}
	return fresh, nil
}

// budgetsAllow: every NodePool's budget for reason still allows taking
// its share of cands.
func (e *Engine) budgetsAllow(reason Reason, cands []*Candidate) error {
	need := map[string]int{}
	for _, candidate := range cands {
		need[candidate.NodePool.Name]++
	}
	for pool, count := range need {
		if got := e.budgets.Allowed(pool, reason); got < count {
			return &ValidationError{Reason: fmt.Sprintf("NodePool %s's budget for %s now allows %d disruptions, the command needs %d", pool, reason, got, count)}
		}
	}
	return nil
}

// revalidateConsolidation simulates a consolidation again: a delete must
// stay a delete, a replacement one replacement, launched with only the
// instance types both simulations allow.
func (e *Engine) revalidateConsolidation(cmd *Command, fresh []*Candidate) (*Command, error) {
	again, why := e.consolidate(cmd.Method, fresh)
	switch {
	case again == nil:
		return nil, &ValidationError{Reason: why}
	case len(again.Replacements) != len(cmd.Replacements):
		return nil, &ValidationError{Reason: fmt.Sprintf("the simulation now needs %d replacements, not %d", len(again.Replacements), len(cmd.Replacements))}
	case len(again.Replacements) == 1:
		plan, err := keptTypes(cmd.Replacements[0], again.Replacements[0])
		if err != nil {
			return nil, err
		}
		again.Replacements[0] = plan
	}
	return again, nil
}

// keptTypes is the fresh replacement plan narrowed to the instance types
// the first simulation chose too.
func keptTypes(first, fresh *scheduler.NodeClaimPlan) (*scheduler.NodeClaimPlan, error) {
	chosen := map[string]bool{}
	for _, it := range first.InstanceTypes {
		chosen[it.Name] = true
	}
	plan := *fresh
	plan.InstanceTypes = slices.DeleteFunc(slices.Clone(plan.InstanceTypes), func(it *catalog.InstanceType) bool { return !chosen[it.Name] })
	if len(plan.InstanceTypes) == 0 {
		return nil, &ValidationError{Reason: "none of the replacement's instance types still fit and save money"}
	}
	return &plan, nil
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
