package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// sweep is the garbage collector on a slow timer (SWEEP_SCHEDULE; every 5
// minutes in Azure): tagged VMs and NICs without a
// NodeClaim (after the grace period), NodeClaims whose VM is gone,
// NodeClaims stuck in deletion, and NodePool status.resources.
func (d *dependencies) sweepFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	raw, ok := inv.Data["timer"]
	if !ok {
		return messages.NewInvalidError("Sweep expects the timer binding %q in Data", "timer")
	}
	var timer struct {
		IsPastDue bool `json:"IsPastDue"`
	}
	if err := json.Unmarshal(raw, &timer); err != nil {
		return messages.NewInvalidError("Sweep: timer binding is not a timer object: %v", err)
	}
	_, lc, err := d.get()
	if err != nil {
		return err
	}
	res, err := lc.Sweep(ctx, d.launcher, d.gcGrace)
	log.Printf("sweep (pastDue=%t): VMs deleted %v, NICs deleted %v, NodeClaims with no VM deleted %v, stuck terminations retried %v",
		timer.IsPastDue, res.VMsDeleted, res.NICsDeleted, res.NodeClaimsDeleted, res.TerminateRetried)
	// The safety net under disruption's events and scheduled deadlines:
	// one pass per sweep period (a lost trigger costs at most that long).
	if derr := d.askDisruption(ctx, "sweep", time.Minute); derr != nil {
		err = errors.Join(err, fmt.Errorf("asking for the safety-net disruption pass: %w", derr))
	}
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}
