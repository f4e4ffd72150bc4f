package disruption

import "fmt"

// SingleNodeConsolidation tries each candidate alone, cheapest to disrupt
// first, and returns the first that can be deleted or replaced by one
// cheaper node.
type SingleNodeConsolidation struct{}

func (SingleNodeConsolidation) Name() string                    { return MethodSingleNode }
func (SingleNodeConsolidation) Reason() Reason                  { return ReasonUnderutilized }
func (SingleNodeConsolidation) ShouldDisrupt(c *Candidate) bool { return consolidatable(c) }

func (SingleNodeConsolidation) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	if e.pending > 0 {
		return nil, nil
	}
	var refusals []Refusal
	capacity := e.fleet()
	for _, candidate := range cands {
		if budgets.Allowed(candidate.NodePool.Name, ReasonUnderutilized) <= 0 {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Blocked: true, Reason: "the NodePool's budget for Underutilized allows no more disruptions now"})
			continue
		}
		if e.outOfTime() {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Reason: fmt.Sprintf("not simulated: this pass's consolidation time limit (%s) ran out; the next pass tries again", e.st.Options.TimeLimit)})
			continue
		}
		if why := capacity.hopeless(e, candidate); why != "" {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Reason: why})
			continue
		}
		cmd, why := e.consolidate(MethodSingleNode, []*Candidate{candidate})
		if cmd == nil {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Reason: why})
			continue
		}
		return []*Command{cmd}, refusals
	}
	return nil, refusals
}
