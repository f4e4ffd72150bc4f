package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/karpfunc/karpfunc/pkg/disruption"
)

// DisruptionOutput is `karpfunc plan --disruption`: what disruption would
// do to the cluster in the dump, move by move, and why every other node
// stays.
type DisruptionOutput struct {
	FleetPricePerHour      float64          `json:"fleetPricePerHour"`
	FleetPriceAfterPerHour float64          `json:"fleetPriceAfterPerHour"`
	Expired                []string         `json:"expired"`
	Moves                  []DisruptionMove `json:"moves"`
	Untouched              []UntouchedNode  `json:"untouched"`
	BudgetErrors           []string         `json:"budgetErrors,omitempty"`
}

// DisruptionMove is one command.
type DisruptionMove struct {
	Method          string      `json:"method"`
	Action          string      `json:"action"` // delete | replace
	Reason          string      `json:"reason"`
	NodeClaims      []string    `json:"nodeClaims"`
	Replacements    []NodeClaim `json:"replacements"`
	SavingsPerHour  float64     `json:"savingsPerHour"`
	FleetPriceAfter float64     `json:"fleetPriceAfterPerHour"`
}

// UntouchedNode is a node no move takes, and why.
type UntouchedNode struct {
	NodeClaim string `json:"nodeClaim"`
	// Blocked: something on the node forbids disruption
	// (DisruptionBlocked); otherwise nothing cheaper was found
	// (Unconsolidatable).
	Blocked bool   `json:"blocked"`
	Reason  string `json:"reason"`
}

func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// NewDisruptionOutput renders a replay.
func NewDisruptionOutput(moves []disruption.Move, before float64, last disruption.Decision) DisruptionOutput {
	out := DisruptionOutput{FleetPricePerHour: round(before), FleetPriceAfterPerHour: round(before),
		Expired: []string{}, Moves: []DisruptionMove{}, Untouched: []UntouchedNode{}}
	for _, nc := range last.Expired {
		out.Expired = append(out.Expired, nc.Name)
	}
	for _, m := range moves {
		c := m.Command
		dm := DisruptionMove{Method: c.Method, Action: c.Action(), Reason: string(c.Reason), NodeClaims: []string{},
			Replacements: []NodeClaim{}, SavingsPerHour: round(c.Savings), FleetPriceAfter: round(m.FleetPriceAfter)}
		for _, cand := range c.Candidates {
			dm.NodeClaims = append(dm.NodeClaims, cand.Name())
		}
		for _, r := range c.Replacements {
			nc := NodeClaim{NodePool: r.NodePool.Name, Pods: podNames(r.Pods)}
			for _, it := range r.InstanceTypes {
				nc.InstanceTypeOptions = append(nc.InstanceTypeOptions, it.Name)
			}
			if it, o := r.Cheapest(); it != nil {
				nc.InstanceType, nc.Zone, nc.CapacityType, nc.PricePerHour = it.Name, o.Zone, o.CapacityType, o.Price
			}
			dm.Replacements = append(dm.Replacements, nc)
		}
		out.Moves = append(out.Moves, dm)
		out.FleetPriceAfterPerHour = round(m.FleetPriceAfter)
	}
	for _, r := range last.Refusals {
		if strings.HasPrefix(r.NodeClaim, "replay-") {
			continue // a replacement the replay made
		}
		out.Untouched = append(out.Untouched, UntouchedNode{NodeClaim: r.NodeClaim, Blocked: r.Blocked, Reason: r.Reason})
	}
	for _, err := range last.BudgetErrors {
		out.BudgetErrors = append(out.BudgetErrors, err.Error())
	}
	return out
}

// WriteJSON writes o as indented JSON.
func (o DisruptionOutput) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// WriteTable writes o for people.
func (o DisruptionOutput) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, e := range o.BudgetErrors {
		fmt.Fprintf(tw, "budget error (its NodePool is not disrupted): %s\n", e)
	}
	if len(o.Expired) > 0 {
		fmt.Fprintf(tw, "EXPIRED (deleted regardless of budgets): %s\n\n", strings.Join(o.Expired, ", "))
	}
	if len(o.Moves) > 0 {
		fmt.Fprintln(tw, "MOVE\tMETHOD\tACTION\tNODECLAIMS\tREPLACEMENT\tSAVES $/HOUR\tFLEET $/HOUR AFTER")
		for i, m := range o.Moves {
			var repl []string
			for _, r := range m.Replacements {
				repl = append(repl, fmt.Sprintf("%s %s %s $%.4f", orDash(r.InstanceType), orDash(r.Zone), orDash(r.CapacityType), r.PricePerHour))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s (%s)\t%s\t%s\t%.4f\t%.4f\n", i+1, m.Method, m.Action, m.Reason, abbreviate(m.NodeClaims),
				orDash(strings.Join(repl, "; ")), m.SavingsPerHour, m.FleetPriceAfter)
		}
		fmt.Fprintln(tw)
	}
	if len(o.Untouched) > 0 {
		fmt.Fprintln(tw, "LEFT ALONE\tWHY")
		for _, u := range o.Untouched {
			kind := "Unconsolidatable"
			if u.Blocked {
				kind = "DisruptionBlocked"
			}
			fmt.Fprintf(tw, "%s\t%s: %s\n", u.NodeClaim, kind, u.Reason)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "%d moves; fleet $%.4f/hour now, $%.4f/hour after\n", len(o.Moves), o.FleetPricePerHour, o.FleetPriceAfterPerHour)
	return tw.Flush()
}
