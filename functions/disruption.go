package main

import (
	"context"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/disruption/live"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// disruptionFunc handles the disruption queue: a pass when something that
// can change the answer happened (relay events, a NodeClaim initialized,
// a deadline, the Sweep's safety net), and the validation of a command
// decided ValidationDelay earlier. The queue's sessions (one per cluster)
// serialize both.
func (d *dependencies) disruptionFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	ev, err := decodeEvent(inv)
	if err != nil {
		return err
	}
	ctrl, err := d.disruption()
	if err != nil {
		return err
	}
	switch ev.Type {
	case messages.TypeDisruption:
		data, err := messages.DecodeData[messages.Disruption](ev)
		if err != nil {
			return err
		}
		res, err := ctrl.Pass(ctx, live.PodEvents{Nodes: data.Nodes, At: data.PodEventTime})
		log.Printf("disruption pass %s (%s, %d nodes with pod events, delivery %d): decided %q, validate at %s, in flight %q, replacing %v, disrupted %v, expired %v, refused %v, budget errors %v, next pass %s",
			ev.ID, data.Cause, len(data.Nodes), inv.Metadata.DeliveryCount, res.Decided, stamp(res.ValidateAt), res.InFlight, res.Replacing, res.Disrupted,
			res.Expired, res.Refused, res.BudgetErrors, stamp(res.Next))
		if err != nil {
			return fmt.Errorf("disruption pass %s: %w", ev.ID, err)
		}
	case messages.TypeDisruptionValidate:
		data, err := messages.DecodeData[messages.DisruptionCommand](ev)
		if err != nil {
			return err
		}
		res, err := ctrl.Validate(ctx, data)
		log.Printf("disruption validation %s (%s %s of %d nodes decided at %s): still holds: %q, dropped: %q, replacing %v, disrupted %v",
			ev.ID, data.Method, data.Reason, len(data.Candidates), stamp(data.DecidedAt), res.Decided, res.Invalid, res.Replacing, res.Disrupted)
		if err != nil {
			return fmt.Errorf("disruption validation %s: %w", ev.ID, err)
		}
	default:
		return messages.NewInvalidError("Disruption got CloudEvent %s of unknown type %q; it handles %s and %s",
			ev.ID, ev.Type, messages.TypeDisruption, messages.TypeDisruptionValidate)
	}
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// askDisruption publishes a Disruption pass for cause; every ask of one
// slot is one message (triggers.DisruptionSlotID).
func (d *dependencies) askDisruption(ctx context.Context, cause string, slot time.Duration) error {
	if _, _, err := d.get(); err != nil {
		return err
	}
	now := d.now()
	m, err := triggers.Disruption(d.cluster, triggers.DisruptionSlotID(d.cluster, cause, now, slot), cause, triggers.Due(now, slot))
	if err != nil {
		return err
	}
	return d.pub.Publish(ctx, bus.QueueDisruption, m)
}
