package disruption

// Emptiness deletes consolidatable nodes that have no pods to move (under
// every consolidation policy), as many as budgets allow, in one command; a
// node that holds a CapacityBuffer's room is not empty.
type Emptiness struct{}

func (Emptiness) Name() string { return MethodEmptiness }

func (Emptiness) Reason() Reason { return ReasonEmpty }

func (Emptiness) ShouldDisrupt(c *Candidate) bool {
	return c.Consolidatable && len(c.Pods) == 0 && c.HoldsBuffer == ""
}

func (Emptiness) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	take := withinBudget(cands, budgets, ReasonEmpty)
	var refusals []Refusal
	in := map[*Candidate]bool{}
	for _, candidate := range take {
		in[candidate] = true
	}
	for _, candidate := range cands {
		if !in[candidate] {
			refusals = append(refusals, Refusal{NodeClaim: candidate.Name(), Blocked: true, Reason: "empty, but the NodePool's budget for Empty allows no more disruptions now"})
		}
	}
	if len(take) == 0 {
		return nil, refusals
	}
	return []*Command{{Reason: ReasonEmpty, Method: MethodEmptiness, Candidates: take, Savings: sumPrice(take)}}, refusals
}
