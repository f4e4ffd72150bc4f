package main

import (
	"context"
	"fmt"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// provision handles a provision event: place every pending pod. The event
// only says "look"; the pass reads all pending pods from the API server, so
// one message serves every batch that raced with it.
func (d *dependencies) provisionFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	ev, err := decodeEvent(inv)
	if err != nil {
		return err
	}
	if ev.Type != messages.TypeProvision {
		return messages.NewInvalidError("Provision got CloudEvent %s of type %q; it handles only %s", ev.ID, ev.Type, messages.TypeProvision)
	}
	data, err := messages.DecodeData[messages.Provision](ev)
	if err != nil {
		return err
	}
	p, _, err := d.get()
	if err != nil {
		return err
	}
	res, err := p.Provision(ctx)
	log.Printf("provision %s (cluster %s, %d pods in event, delivery %d): %d pending, %d on existing capacity, created %v, launched %v, %d unschedulable, solved in %s",
		ev.ID, data.Cluster, len(data.Pods), inv.Metadata.DeliveryCount, res.PendingPods, res.OnExisting, res.Created, res.Launched, res.Unschedulable, res.SolveDuration)
	if len(res.GaveUp) > 0 || len(res.MarkedUnavailable) > 0 || !res.RetryAt.IsZero() {
		log.Printf("provision %s: gave up %v (insufficient capacity), marked unavailable %v, %d deferred, next pass at %v",
			ev.ID, res.GaveUp, res.MarkedUnavailable, res.Deferred, res.RetryAt)
	}
	if err != nil {
		return fmt.Errorf("provision %s: %w", ev.ID, err)
	}
	return nil
}

func decodeEvent(inv *customhandler.Invocation) (messages.CloudEvent, error) {
	body, err := inv.Message("msg")
	if err != nil {
		return messages.CloudEvent{}, messages.NewInvalidError("%v", err)
	}
	return messages.Decode(body)
}
