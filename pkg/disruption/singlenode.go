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
	f := e.fleet()
	for _, c := range cands {
		if budgets.Allowed(c.NodePool.Name, ReasonUnderutilized) <= 0 {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Blocked: true, Reason: "the NodePool's budget for Underutilized allows no more disruptions now"})
			continue
		}
		if e.outOfTime() {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Reason: fmt.Sprintf("not simulated: this pass's consolidation time limit (%s) ran out; the next pass tries again", e.st.Options.TimeLimit)})
			continue
		}
		if why := f.hopeless(e, c); why != "" {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Reason: why})
			continue
		}
		cmd, why := e.consolidate(MethodSingleNode, []*Candidate{c})
		if cmd == nil {
			refusals = append(refusals, Refusal{NodeClaim: c.Name(), Reason: why})
			continue
		}
		return []*Command{cmd}, refusals
	}
	return nil, refusals
}
