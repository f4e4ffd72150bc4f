package disruption

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Budgets: NodePool name -> reason -> nodes that may still be disrupted.
type Budgets map[string]map[Reason]int

// Allowed is how many more nodes of pool may be disrupted for reason.
func (b Budgets) Allowed(pool string, r Reason) int { return b[pool][r] }

// Take spends n of pool's budget for r (all reasons share the nodes: a
// node taken for one reason is disrupting for every other).
func (b Budgets) Take(pool string, n int) {
	for reason := range b[pool] {
		b[pool][reason] -= n
	}
}

func (b Budgets) clone() Budgets {
	out := Budgets{}
	for pool, byReason := range b {
		out[pool] = map[Reason]int{}
		for reason, count := range byReason {
			out[pool][reason] = count
		}
	}
	return out
}

// BudgetError names the NodePool and budget that could not be read.
type BudgetError struct {
	NodePool string
	Index    int
	error
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("NodePool %s: spec.disruption.budgets[%d]: %v", e.NodePool, e.Index, e.error)
}
func (e *BudgetError) Unwrap() error { return e.error }

var budgetReasons = []Reason{ReasonEmpty, ReasonDrifted, ReasonUnderutilized}

func computeBudgets(pools []*karpv1.NodePool, counts map[string]*poolCount, now time.Time) (Budgets, []error) {
	out := Budgets{}
	var errs []error
	for _, np := range pools {
		pc := counts[np.Name]
		if pc == nil {
			pc = &poolCount{}
		}
		out[np.Name] = map[Reason]int{}
		for _, reason := range budgetReasons {
			allowed, err := AllowedDisruptions(np, reason, pc.total, now)
			if err != nil {
				errs = append(errs, err)
				allowed = 0
			}
			out[np.Name][reason] = max(0, allowed-pc.disrupting)
		}
	}
	return out, errs
}

// AllowedDisruptions is the most restrictive active budget of np for
// reason, over numNodes nodes (before subtracting nodes already
// disrupting). No budgets means Karpenter's default, 10%.
func AllowedDisruptions(np *karpv1.NodePool, reason Reason, numNodes int, now time.Time) (int, error) {
	budgets := np.Spec.Disruption.Budgets
	if len(budgets) == 0 {
		budgets = []karpv1.Budget{{Nodes: DefaultBudget}}
	}
	allowed := math.MaxInt
	for i, budget := range budgets {
		if !appliesTo(budget, reason) {
			continue
		}
		active, err := budgetActive(budget, now)
		if err != nil {
			return 0, &BudgetError{NodePool: np.Name, Index: i, error: err}
		}
		if !active {
			continue
		}
		nodes, err := budgetNodes(budget.Nodes, numNodes)
		if err != nil {
			return 0, &BudgetError{NodePool: np.Name, Index: i, error: err}
		}
		allowed = min(allowed, nodes)
	}
	if allowed == math.MaxInt {
		allowed = numNodes // no active budget restricts this reason
	}
	return allowed, nil
}

func appliesTo(b karpv1.Budget, r Reason) bool {
	if len(b.Reasons) == 0 {
		return true
	}
	for _, br := range b.Reasons {
		if Reason(br) == r {
			return true
		}
	}
	return false
}

// budgetNodes reads "nodes": a count or a percentage of numNodes, rounded up.
func budgetNodes(v string, numNodes int) (int, error) {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		percent, err := strconv.Atoi(pct)
		if err != nil || percent < 0 || percent > 100 {
			return 0, fmt.Errorf("nodes %q: a percentage must be an integer from 0%% to 100%%", v)
		}
		return int(math.Ceil(float64(percent) * float64(numNodes) / 100)), nil
	}
	count, err := strconv.Atoi(v)
	if err != nil || count < 0 {
		return 0, fmt.Errorf("nodes %q: must be a non-negative integer or a percentage such as \"10%%\"", v)
	}
	return count, nil
}

// budgetActive: a budget without schedule is always active; with one, it is
// active for duration after each schedule hit (cron, UTC).
func budgetActive(b karpv1.Budget, now time.Time) (bool, error) {
	switch {
	case b.Schedule == nil && b.Duration == nil:
		return true, nil
	case b.Schedule == nil || b.Duration == nil:
		return false, errors.New("schedule and duration must be set together")
	}
	sched, err := cron.ParseStandard("TZ=UTC " + *b.Schedule)
	if err != nil {
		return false, fmt.Errorf("schedule %q is not a cron expression (minute hour day-of-month month day-of-week, or @daily...): %w", *b.Schedule, err)
	}
	duration := b.Duration.Duration
	if duration <= 0 {
		return false, fmt.Errorf("duration %s must be positive", duration)
	}
	next := sched.Next(now.Add(-duration))
	return !next.After(now), nil
}
