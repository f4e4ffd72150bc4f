package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/interruption"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// interruptionFunc handles the interruption queue: the relay's
// PreemptionScheduled notices (karpfunc CloudEvents) and Azure's
// VirtualMachinePreempted annotations that Event Grid delivers in either
// schema. A message about something that is not an interruption of one of
// our VMs is acknowledged with its reason in the log; one that cannot be
// read is dead-lettered with the reason.
func (d *dependencies) interruptionFunc(ctx context.Context, inv *customhandler.Invocation, log *customhandler.Logger) error {
	body, err := inv.Message("msg")
	if err != nil {
		return messages.NewInvalidError("%v", err)
	}
	props := inv.Metadata.ApplicationProperties
	var sig interruption.Signal
	if interruption.IsEventGrid(body, props) {
		sig, err = interruption.ParseEventGrid(body, props)
	} else {
		sig, err = d.nodeSignal(ctx, body)
	}
	if interruption.IsIgnored(err) {
		log.Printf("interruption message %s acknowledged, nothing to do: %v", inv.Metadata.MessageID, err)
		return nil
	}
	if err != nil {
		return err
	}
	if sig.DeadlineAssumed {
		log.Printf("interruption %s of %s: the notice has no readable deadline; assuming %s", sig.EventID, sig.Target(), sig.Deadline.Format(time.RFC3339))
	}
	ic, err := d.interruption()
	if err != nil {
		return err
	}
	res, err := ic.Interrupt(ctx, sig)
	if res.NotOurs != "" {
		log.Printf("interruption %s (%s, %s): %s", sig.EventID, sig.Source, sig.Schema, res.NotOurs)
		return err
	}
	log.Printf("interruption %s (%s %s, delivery %d) of %s: nodeclaim %s node %s first=%t deadline %s; marked %q; replacements %v, %d pods on capacity in flight; termination requested",
		sig.EventID, sig.Source, sig.Schema, inv.Metadata.DeliveryCount, sig.Target(), res.NodeClaim, res.Node, res.First, res.Deadline.Format(time.RFC3339),
		res.Marked, res.Replacements, res.Placed)
	if err != nil {
		err = fmt.Errorf("interruption of %s: %w", sig.Target(), err)
		// The host drops a failed answer's Logs: the reason goes to
		// stderr (the Logger) and onto the NodeClaim.
		d.warnOn(ctx, "Interruption", inv, d.getObject(ctx, &karpv1.NodeClaim{}, res.NodeClaim), err, log)
		return err
	}
	return nil
}

// nodeSignal reads the relay's interruption event. The condition is read
// again from the Node when it still exists (messages are triggers; the
// node is the truth); a Node already gone leaves the relay's copy.
func (d *dependencies) nodeSignal(ctx context.Context, body []byte) (interruption.Signal, error) {
	ev, err := messages.Decode(body)
	if err != nil {
		return interruption.Signal{}, err
	}
	if ev.Type != messages.TypeInterruption {
		return interruption.Signal{}, messages.NewInvalidError("Interruption got CloudEvent %s of type %q; it handles %s and Event Grid's ResourceAnnotated events",
			ev.ID, ev.Type, messages.TypeInterruption)
	}
	data, err := messages.DecodeData[messages.Interruption](ev)
	if err != nil {
		return interruption.Signal{}, err
	}
	if data.Node == "" {
		return interruption.Signal{}, messages.NewInvalidError("CloudEvent %s (%s) names no node", ev.ID, ev.Type)
	}
	cond := corev1.NodeCondition{Type: interruption.ConditionPreemptionScheduled, Status: corev1.ConditionTrue, Reason: data.Reason, Message: data.Message}
	providerID := data.ProviderID
	if kube, err := d.readyKube(); err == nil {
		node := &corev1.Node{}
		switch err := kube.Get(ctx, client.ObjectKey{Name: data.Node}, node); {
		case err == nil:
			providerID = node.Spec.ProviderID
			for _, c := range node.Status.Conditions {
				if c.Type == interruption.ConditionPreemptionScheduled {
					cond = c
				}
			}
		case !apierrors.IsNotFound(err):
			return interruption.Signal{}, fmt.Errorf("reading node %s: %w", data.Node, err)
		}
	} else {
		return interruption.Signal{}, err
	}
	return interruption.ParseNodeCondition(data.Node, providerID, cond, d.now(), d.notice)
}
