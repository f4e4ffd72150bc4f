package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// provisionFunction handles provision events: place every pending pod. The
// event only says "look"; the pass reads all pending pods from the API
// server, so one message serves every batch that raced with it. A failure
// is reported on the pods the event names.
func (d *dependencies) provisionFunction() function {
	return function{name: "Provision", decode: decodeEvent, routes: map[string]route{
		messages.TypeProvision: {d.provision, podsSubject},
	}}
}

func (d *dependencies) provision(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, err := messages.DecodeData[messages.Provision](c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	prov, _, err := d.get()
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := prov.Provision(ctx)
	logProvision(c, data, res)
	if err != nil {
		// The launch checks and the next pass go out also after an error:
		// the NodeClaims this pass created are there.
		return res.Outcome, fmt.Errorf("provision %s: %w", c.ev.ID, err)
	}
	return res.Outcome, nil
}

// logProvision writes a pass's result: one line with every pod's outcome,
// so a pod's history across passes is a grep for its name.
func logProvision(c *call, data messages.Provision, res provisioning.Result) {
	id := c.ev.ID
	c.log.Printf("provision %s (cluster %s, %d pods in event, delivery %d): %s; created %v, launch asked for %v, solved in %s",
		id, data.Cluster, len(data.Pods), c.inv.Metadata.DeliveryCount, res.Pods, res.Created, res.Launching, res.SolveDuration)
	if len(res.Pods) > 0 {
		var outcomes strings.Builder
		for _, pod := range res.Pods {
			fmt.Fprintf(&outcomes, " %s=%s", pod.Pod, pod.Outcome)
			if pod.Target != "" {
				fmt.Fprintf(&outcomes, ":%s", pod.Target)
			}
		}
		c.log.Printf("provision %s outcomes:%s", id, outcomes.String())
	}
	for _, pod := range res.Pods {
		if pod.Outcome == provisioning.Deferred {
			c.log.Printf("provision %s: pod %s deferred (pending since %s): waits for %s", id, pod.Pod, pod.PendingSince.UTC().Format(time.RFC3339), pod.Reason)
		}
	}
	for _, static := range res.Static {
		c.log.Printf("provision %s: static nodepool %s (replicas %d, %d before the pass): created %v, deleted %v, waiting: %s",
			id, static.NodePool, static.Replicas, static.Running, static.Created, static.Deleted, orNone(static.Waiting))
	}
	for _, b := range res.Buffers {
		c.log.Printf("provision %s: capacity buffer %s (%s, %d chunks): %d on existing capacity %v, %d on new NodeClaims, %d nowhere",
			id, b.Buffer, b.Reason, b.Replicas, b.Existing, b.Nodes, b.New, b.Failed)
	}
	if !res.RetryAt.IsZero() {
		c.log.Printf("provision %s: next pass at %v", id, res.RetryAt)
	}
}

// decodeEvent reads the CloudEvent a queue trigger delivers.
func decodeEvent(inv *customhandler.Invocation) (messages.CloudEvent, error) {
	body, err := inv.Message("msg")
	if err != nil {
		return messages.CloudEvent{}, messages.NewInvalidError("%v", err)
	}
	return messages.Decode(body)
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
