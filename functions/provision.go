package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
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
	log.Printf("provision %s (cluster %s, %d pods in event, delivery %d): %s; created %v, launching %v, launched %v, solved in %s",
		ev.ID, data.Cluster, len(data.Pods), inv.Metadata.DeliveryCount, res.Pods, res.Created, res.Launching, res.Launched, res.SolveDuration)
	if len(res.Pods) > 0 {
		// One line per pass with every pod's outcome: a pod's history
		// across passes is a grep for its name.
		var b strings.Builder
		for _, o := range res.Pods {
			fmt.Fprintf(&b, " %s=%s", o.Pod, o.Outcome)
			if o.Target != "" {
				fmt.Fprintf(&b, ":%s", o.Target)
			}
		}
		log.Printf("provision %s outcomes:%s", ev.ID, b.String())
	}
	for _, o := range res.Pods {
		if o.Outcome == provisioning.Deferred {
			log.Printf("provision %s: pod %s deferred (pending since %s): waits for %s", ev.ID, o.Pod, o.PendingSince.UTC().Format(time.RFC3339), o.Reason)
		}
	}
	if len(res.GaveUp) > 0 || len(res.MarkedUnavailable) > 0 || !res.RetryAt.IsZero() {
		log.Printf("provision %s: gave up %v (insufficient capacity), marked unavailable %v, next pass at %v",
			ev.ID, res.GaveUp, res.MarkedUnavailable, res.RetryAt)
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
