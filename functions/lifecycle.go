package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

func decodeNodeClaim(ev messages.CloudEvent) (messages.NodeClaim, error) {
	data, err := messages.DecodeData[messages.NodeClaim](ev)
	if err != nil {
		return data, err
	}
	if data.Name == "" {
		return data, messages.NewInvalidError("CloudEvent %s (%s) names no NodeClaim", ev.ID, ev.Type)
	}
	return data, nil
}

// lifecycle handles node and NodeClaim events: registration and
// initialization when a Node joins or turns Ready, termination when a
// NodeClaim is being deleted, liveness at the end of the registration
// timeout, and launch checks while a VM is being created.
func (d *dependencies) lifecycleFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) (err error) {
	ev, err := decodeEvent(inv)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			d.reportFailure(ctx, "Lifecycle", inv, ev, err, log)
		}
	}()
	switch ev.Type {
	case messages.TypeNode:
		data, err := messages.DecodeData[messages.Node](ev)
		if err != nil {
			return err
		}
		if data.Name == "" {
			return messages.NewInvalidError("CloudEvent %s (%s) names no node", ev.ID, ev.Type)
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.NodeChanged(ctx, data.Name)
		if err != nil {
			return fmt.Errorf("node %s: %w", data.Name, err)
		}
		log.Printf("node %s: nodeclaim %q launched=%t registered=%t initialized=%t", data.Name, res.NodeClaim, res.Launched, res.Registered, res.Initialized)
		if res.Initialized {
			// New capacity can change disruption's answer (a replacement
			// is ready; pods may now fit elsewhere).
			if err := d.askDisruption(ctx, "initialized", time.Second); err != nil {
				return fmt.Errorf("node %s initialized; asking for a disruption pass: %w", data.Name, err)
			}
		}
	case messages.TypeNodeClaimDeleting:
		data, err := decodeNodeClaim(ev)
		if err != nil {
			return err
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.Terminate(ctx, data.Name)
		var retryAfter time.Duration
		var deleting *lifecycle.InstanceDeletePendingError
		switch {
		case errors.As(err, &deleting):
			// The VM's delete is under way: look again, never wait on it.
			retryAfter = deleting.RetryAfter
		case lifecycle.IsDrainPending(err):
			// A PDB's refusal says when to come back (Retry-After);
			// use it, bounded, rather than a fixed delay that either
			// hammers the API server or leaves the node draining.
			retryAfter = lifecycle.DrainRetryDelay(err, lc.DrainRetry())
		case cloudprovider.IsThrottled(err):
			retryAfter = max(cloudprovider.RetryAfter(err), lc.DrainRetry())
		case err != nil:
			return fmt.Errorf("terminating NodeClaim %s: %w", data.Name, err)
		}
		if retryAfter > 0 {
			// Waiting is not failing: complete this message and look again
			// later, so a PDB that blocks for an hour never dead-letters.
			at, serr := lc.ScheduleTerminate(ctx, data.Name, data.UID, retryAfter)
			if serr != nil {
				return fmt.Errorf("terminating NodeClaim %s: %v; scheduling the retry: %w", data.Name, err, serr)
			}
			log.Printf("nodeclaim %s: evicted %d, deleted %d pods; %v; looking again at %s", data.Name, res.Evicted, res.Deleted, err, at.Format(time.RFC3339Nano))
			return nil
		}
		log.Printf("nodeclaim %s: evicted %d pods, deleted %d, finished=%t, gracePeriodExpired=%t", data.Name, res.Evicted, res.Deleted, res.Finished, res.GracePeriodExpired)
	case messages.TypeNodeClaimLiveness:
		data, err := decodeNodeClaim(ev)
		if err != nil {
			return err
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.Liveness(ctx, data.Name, data.UID)
		if err != nil {
			return fmt.Errorf("liveness of NodeClaim %s: %w", data.Name, err)
		}
		log.Printf("nodeclaim %s liveness: registered=%t deleted=%t recheck=%v", data.Name, res.Registered, res.Deleted, res.RecheckAt)
	case messages.TypeNodeClaimLaunch:
		data, err := decodeNodeClaim(ev)
		if err != nil {
			return err
		}
		_, lc, err := d.get()
		if err != nil {
			return err
		}
		res, err := lc.Check(ctx, data.Name, data.UID)
		if err != nil {
			return fmt.Errorf("launch check of NodeClaim %s: %w", data.Name, err)
		}
		log.Printf("nodeclaim %s launch check: launched=%t registered=%t initialized=%t next check %v",
			data.Name, res.Launched, res.Registered, res.Initialized, res.RequeueAt)
	default:
		return messages.NewInvalidError("Lifecycle got CloudEvent %s of unknown type %q; it handles %s, %s, %s and %s",
			ev.ID, ev.Type, messages.TypeNode, messages.TypeNodeClaimDeleting, messages.TypeNodeClaimLiveness, messages.TypeNodeClaimLaunch)
	}
	return nil
}
