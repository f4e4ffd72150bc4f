package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// typeTimer is the routing type of a timer trigger's invocation: the
// adapter dispatches every trigger by an event type, and a timer carries
// no CloudEvent.
const typeTimer = "karpfunc.functions.timer"

// sweepFunction is the garbage collector on a slow timer (SWEEP_SCHEDULE;
// every 5 minutes in Azure): tagged VMs and NICs without a NodeClaim
// (after the grace period), NodeClaims whose VM is gone, NodeClaims stuck
// in deletion, and NodePool status.resources. It is cluster-wide: its
// failure is logged, not written on an object.
func (d *dependencies) sweepFunction() function {
	return function{name: "Sweep", decode: decodeTimer, routes: map[string]route{
		typeTimer: {d.sweep, nil},
	}}
}

// sweepSlot is the safety net under disruption's events and scheduled
// deadlines: one pass per sweep period (a lost trigger costs at most that
// long).
const sweepSlot = time.Minute

// decodeTimer reads the timer binding into an event of type typeTimer.
func decodeTimer(inv *customhandler.Invocation) (messages.CloudEvent, error) {
	raw, ok := inv.Data["timer"]
	if !ok {
		return messages.CloudEvent{}, messages.NewInvalidError("Sweep expects the timer binding %q in Data", "timer")
	}
	return messages.CloudEvent{SpecVersion: messages.SpecVersion, ID: inv.InvocationID, Type: typeTimer, Data: raw}, nil
}

func (d *dependencies) sweep(ctx context.Context, c *call) (triggers.Outcome, error) {
	var timer struct {
		IsPastDue bool `json:"IsPastDue"`
	}
	if err := json.Unmarshal(c.ev.Data, &timer); err != nil {
		return triggers.Outcome{}, messages.NewInvalidError("Sweep: timer binding is not a timer object: %v", err)
	}
	_, lc, err := d.get()
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := lc.Sweep(ctx, d.launcher, d.gcGrace)
	c.log.Printf("sweep (pastDue=%t): VMs deleted %v, NICs deleted %v, NodeClaims with no VM deleted %v, stuck terminations retried %v",
		timer.IsPastDue, res.VMsDeleted, res.NICsDeleted, res.NodeClaimsDeleted, res.TerminateRetried)
	out := res.Outcome // the stuck terminations' retries
	out.Then(triggers.DisruptionSlot(d.cluster, "sweep", d.now(), sweepSlot))
	if err != nil {
		return out, fmt.Errorf("sweep: %w", err)
	}
	return out, nil
}
