package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/interruption"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// typeEventGrid is the routing type of an Event Grid delivery on the
// interruption queue (Azure's VirtualMachinePreempted annotations, in
// either schema): the adapter dispatches every trigger by an event type,
// and such a delivery is not one of karpfunc's CloudEvents.
const typeEventGrid = "karpfunc.functions.eventgrid"

// interruptionFunction handles the interruption queue: the relay's
// PreemptionScheduled notices (karpfunc CloudEvents) and Azure's
// VirtualMachinePreempted annotations that Event Grid delivers in either
// schema. A message about something that is not an interruption of one of
// our VMs is acknowledged with its reason in the log; one that cannot be
// read is dead-lettered with the reason. A failure is reported on the
// Node and the NodeClaim.
func (d *dependencies) interruptionFunction() function {
	return function{name: "Interruption", decode: decodeInterruption, routes: map[string]route{
		messages.TypeInterruption: {d.nodeInterruption, interruptionSubject},
		typeEventGrid:             {d.eventGridInterruption, nil},
	}}
}

// decodeInterruption reads an Event Grid delivery as an event of type
// typeEventGrid carrying the body, anything else as a CloudEvent.
func decodeInterruption(inv *customhandler.Invocation) (messages.CloudEvent, error) {
	body, err := inv.Message("msg")
	if err != nil {
		return messages.CloudEvent{}, messages.NewInvalidError("%v", err)
	}
	if interruption.IsEventGrid(body, inv.Metadata.ApplicationProperties) {
		return messages.CloudEvent{SpecVersion: messages.SpecVersion, ID: inv.Metadata.MessageID, Type: typeEventGrid, Data: body}, nil
	}
	return messages.Decode(body)
}

func (d *dependencies) eventGridInterruption(ctx context.Context, c *call) (triggers.Outcome, error) {
	sig, err := interruption.ParseEventGrid(c.ev.Data, c.inv.Metadata.ApplicationProperties)
	return d.interrupt(ctx, c, sig, err)
}

func (d *dependencies) nodeInterruption(ctx context.Context, c *call) (triggers.Outcome, error) {
	sig, err := d.nodeSignal(ctx, c.ev)
	return d.interrupt(ctx, c, sig, err)
}

// interrupt acts on sig, read with err.
func (d *dependencies) interrupt(ctx context.Context, c *call, sig interruption.Signal, err error) (triggers.Outcome, error) {
	if interruption.IsIgnored(err) {
		c.log.Printf("interruption message %s acknowledged, nothing to do: %v", c.inv.Metadata.MessageID, err)
		return triggers.Outcome{}, nil
	}
	if err != nil {
		return triggers.Outcome{}, err
	}
	if sig.DeadlineAssumed {
		c.log.Printf("interruption %s of %s: the notice has no readable deadline; assuming %s", sig.EventID, sig.Target(), sig.Deadline.Format(time.RFC3339))
	}
	ic, err := d.interruption()
	if err != nil {
		return triggers.Outcome{}, err
	}
	res, err := ic.Interrupt(ctx, sig)
	if res.NotOurs != "" {
		c.log.Printf("interruption %s (%s, %s): %s", sig.EventID, sig.Source, sig.Schema, res.NotOurs)
		return res.Outcome, err
	}
	c.log.Printf("interruption %s (%s %s, delivery %d) of %s: nodeclaim %s node %s first=%t deadline %s; marked %q; replacements %v, %d pods on capacity in flight; termination requested",
		sig.EventID, sig.Source, sig.Schema, c.inv.Metadata.DeliveryCount, sig.Target(), res.NodeClaim, res.Node, res.First, res.Deadline.Format(time.RFC3339),
		res.Marked, res.Replacements, res.Placed)
	c.about(nodeClaimNamed(res.NodeClaim), nodeNamed(res.Node))
	if err != nil {
		return res.Outcome, fmt.Errorf("interruption of %s: %w", sig.Target(), err)
	}
	return res.Outcome, nil
}

// nodeSignal reads the relay's interruption event. The condition is read
// again from the Node when it still exists (messages are triggers; the
// node is the truth); a Node already gone leaves the relay's copy.
func (d *dependencies) nodeSignal(ctx context.Context, ev messages.CloudEvent) (interruption.Signal, error) {
	data, err := messages.DecodeData[messages.Interruption](ev)
	if err != nil {
		return interruption.Signal{}, err
	}
	if data.Node == "" {
		return interruption.Signal{}, messages.NewInvalidError("CloudEvent %s (%s) names no node", ev.ID, ev.Type)
	}
	cond := corev1.NodeCondition{Type: interruption.ConditionPreemptionScheduled, Status: corev1.ConditionTrue, Reason: data.Reason, Message: data.Message}
	providerID := data.ProviderID
	kube, err := d.readyKube()
	if err != nil {
		return interruption.Signal{}, err
	}
	node := &corev1.Node{}
	switch err := kube.Get(ctx, client.ObjectKey{Name: data.Node}, node); {
	case err == nil:
		providerID = node.Spec.ProviderID
		for _, condition := range node.Status.Conditions {
			if condition.Type == interruption.ConditionPreemptionScheduled {
				cond = condition
			}
		}
	case !apierrors.IsNotFound(err):
		return interruption.Signal{}, fmt.Errorf("reading node %s: %w", data.Node, err)
	}
	return interruption.ParseNodeCondition(data.Node, providerID, cond, d.now(), d.notice)
}
