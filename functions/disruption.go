package main

import (
	"context"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/pkg/disruption/live"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// disruptionFunction handles the disruption queue: a pass when something
// that can change the answer happened (relay events, a NodeClaim
// initialized, a deadline, the Sweep's safety net), and the validation of
// a command decided ValidationDelay earlier. The queue's sessions (one per
// cluster) serialize both. A pass is cluster-wide (its failure is logged);
// a validation's failure is reported on its candidates.
func (d *dependencies) disruptionFunction() function {
	return function{name: "Disruption", decode: decodeEvent, routes: map[string]route{
		messages.TypeDisruption:         {d.disruptionPass, nil},
		messages.TypeDisruptionValidate: {d.disruptionValidate, candidatesSubject},
	}}
}

func (d *dependencies) disruptionPass(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, err := messages.DecodeData[messages.Disruption](c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	ctrl, err := d.disruption()
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := ctrl.Pass(ctx, live.PodEvents{Nodes: data.Nodes, At: data.PodEventTime})
	c.log.Printf("disruption pass %s (%s, %d nodes with pod events, delivery %d): decided %q, validate at %s, in flight %q, replacing %v, disrupted %v, expired %v, refused %v, budget errors %v, next pass %s",
		c.ev.ID, data.Cause, len(data.Nodes), c.inv.Metadata.DeliveryCount, res.Decided, stamp(res.ValidateAt), res.InFlight, res.Replacing, res.Disrupted,
		res.Expired, res.Refused, res.BudgetErrors, stamp(res.Next))
	if err != nil {
		return res.Outcome, fmt.Errorf("disruption pass %s: %w", c.ev.ID, err)
	}
	return res.Outcome, nil
}

func (d *dependencies) disruptionValidate(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, err := messages.DecodeData[messages.DisruptionCommand](c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	ctrl, err := d.disruption()
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := ctrl.Validate(ctx, data)
	c.log.Printf("disruption validation %s (%s %s of %d nodes decided at %s): still holds: %q, dropped: %q, replacing %v, disrupted %v",
		c.ev.ID, data.Method, data.Reason, len(data.Candidates), stamp(data.DecidedAt), res.Decided, res.Invalid, res.Replacing, res.Disrupted)
	if err != nil {
		return res.Outcome, fmt.Errorf("disruption validation %s: %w", c.ev.ID, err)
	}
	return res.Outcome, nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
