package disruption

// MultiNodeConsolidation looks for the largest prefix of the candidates
// (cheapest to disrupt first, within budgets) that can go together: all
// deleted, or replaced by one cheaper node. Binary search over the prefix
// length, bounded first by capacity: a prefix whose nodes hold more than
// the rest of the fleet has free plus the largest instance type can never
// fit.
type MultiNodeConsolidation struct{}

func (MultiNodeConsolidation) Name() string                    { return MethodMultiNode }
func (MultiNodeConsolidation) Reason() Reason                  { return ReasonUnderutilized }
func (MultiNodeConsolidation) ShouldDisrupt(c *Candidate) bool { return consolidatable(c) }

func (MultiNodeConsolidation) ComputeCommands(e *Engine, budgets Budgets, cands []*Candidate) ([]*Command, []Refusal) {
	if e.pending > 0 {
		return nil, nil
	}
	cands = withinBudget(cands, budgets, ReasonUnderutilized)
	hi := e.fleet().prefixBound(cands)
	lo := 2
	var best *Command
	for lo <= hi && !e.outOfTime() {
		mid := (lo + hi) / 2
		if cmd, _ := e.consolidate(MethodMultiNode, cands[:mid]); cmd != nil {
			best = cmd
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		return nil, nil
	}
	return []*Command{best}, nil
}
