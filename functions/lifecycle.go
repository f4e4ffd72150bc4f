package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// lifecycleFunction handles node and NodeClaim events: registration and
// initialization when a Node joins or turns Ready, termination when a
// NodeClaim is being deleted, liveness at the end of the registration
// timeout, and launch checks while a VM is being created.
func (d *dependencies) lifecycleFunction() function {
	return function{name: "Lifecycle", decode: decodeEvent, routes: map[string]route{
		messages.TypeNode:              {d.nodeChanged, nodeSubject},
		messages.TypeNodeClaimDeleting: {d.terminate, nodeClaimSubject},
		messages.TypeNodeClaimLiveness: {d.liveness, nodeClaimSubject},
		messages.TypeNodeClaimLaunch:   {d.launchCheck, nodeClaimSubject},
		messages.TypeNodeRepair:        {d.repairCheck, nodeSubject},
	}}
}

// lifecycleCall decodes a Lifecycle event's data (DecodeData refuses one
// that names no object as an invalid message) and returns the lifecycle
// controller.
func lifecycleCall[T any](d *dependencies, ev messages.CloudEvent) (T, *lifecycle.Controller, error) {
	data, err := messages.DecodeData[T](ev)
	if err != nil {
		return data, nil, err
	}
	_, lc, err := d.get()
	return data, lc, err
}

// initializedSlot collects the disruption passes that initialized nodes
// ask for: new capacity can change disruption's answer (a replacement is
// ready; pods may now fit elsewhere).
const initializedSlot = time.Second

func (d *dependencies) nodeChanged(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, lc, err := lifecycleCall[messages.Node](d, c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := lc.NodeChanged(ctx, data.Name)
	out := res.Outcome // the launch check, when the launch is still under way
	if err != nil {
		return out, fmt.Errorf("node %s: %w", data.Name, err)
	}
	c.log.Printf("node %s: nodeclaim %q launched=%t registered=%t initialized=%t", data.Name, res.NodeClaim, res.Launched, res.Registered, res.Initialized)
	if res.Initialized {
		out.Then(triggers.DisruptionSlot(d.cluster, "initialized", d.now(), initializedSlot))
	}
	repaired, err := d.repairNode(ctx, c, data.Name)
	out.Then(repaired.Continuations...)
	return out, err
}

// terminate drains and deletes a NodeClaim. Waiting is not failing: a
// drain a PodDisruptionBudget blocks, a VM delete under way or ARM
// throttling completes this message and looks again later, so a PDB that
// blocks for an hour never dead-letters.
func (d *dependencies) terminate(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, lc, err := lifecycleCall[messages.NodeClaim](d, c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := lc.Terminate(ctx, data.Name)
	if err == nil {
		c.log.Printf("nodeclaim %s: evicted %d pods, deleted %d, finished=%t, gracePeriodExpired=%t", data.Name, res.Evicted, res.Deleted, res.Finished, res.GracePeriodExpired)
		return res.Outcome, nil // the provisioning pass a finished termination asks for
	}
	retryAfter, waiting := terminateRetryAfter(err, lc.DrainRetry())
	if !waiting {
		return res.Outcome, fmt.Errorf("terminating NodeClaim %s: %w", data.Name, err)
	}
	c.log.Printf("nodeclaim %s: evicted %d, deleted %d pods; waiting", data.Name, res.Evicted, res.Deleted)
	out := triggers.Wait(err, triggers.TerminateRetry(d.cluster, data.Name, data.UID, d.now(), retryAfter))
	out.Then(res.Outcome.Continuations...)
	return out, nil
}

// terminateRetryAfter says whether a Terminate that returned err is
// waiting rather than failing, and when it looks again (at least
// drainRetry when the wait names no delay).
func terminateRetryAfter(err error, drainRetry time.Duration) (time.Duration, bool) {
	var deleting *lifecycle.InstanceDeletePendingError
	var after time.Duration
	switch {
	case errors.As(err, &deleting):
		// The VM's delete is under way: look again, never wait on it.
		after = deleting.RetryAfter
	case lifecycle.IsDrainPending(err):
		// A PDB's refusal says when to come back (Retry-After); use it,
		// bounded, rather than a fixed delay that either hammers the API
		// server or leaves the node draining.
		after = lifecycle.DrainRetryDelay(err, drainRetry)
	case cloudprovider.IsThrottled(err):
		after = max(cloudprovider.RetryAfter(err), drainRetry)
	default:
		return 0, false
	}
	if after <= 0 {
		after = drainRetry
	}
	return after, true
}

func (d *dependencies) liveness(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, lc, err := lifecycleCall[messages.NodeClaim](d, c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := lc.Liveness(ctx, data.Name, data.UID)
	if err != nil {
		return triggers.Outcome{}, fmt.Errorf("liveness of NodeClaim %s: %w", data.Name, err)
	}
	c.log.Printf("nodeclaim %s liveness: registered=%t deleted=%t recheck=%v", data.Name, res.Registered, res.Deleted, res.RecheckAt)
	return res.Outcome, nil
}

func (d *dependencies) launchCheck(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, lc, err := lifecycleCall[messages.NodeClaim](d, c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := lc.Check(ctx, data.Name, data.UID)
	if err != nil {
		// The next check goes out also after a failure, as the
		// controller asked: the launch's state records it.
		return res.Outcome, fmt.Errorf("launch check of NodeClaim %s: %w", data.Name, err)
	}
	c.log.Printf("nodeclaim %s launch check: launched=%t registered=%t initialized=%t next check %v",
		data.Name, res.Launched, res.Registered, res.Initialized, res.RequeueAt)
	return res.Outcome, nil
}
