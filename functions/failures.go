package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// reportFailure makes a failed invocation visible where Azure and
// Kubernetes users look. Service Bus dead-letters a message with its own
// reason (MaxDeliveryCountExceeded, "Message could not be consumed after N
// delivery attempts."), never the handler's error; so the error goes to
// the invocation's log (Application Insights) and into a Warning event on
// each object the message is about (a NodeClaim, a Node, pods), where
// kubectl describe shows it. Every function reports the same way.
func reportFailure(ctx context.Context, deps runtimeDeps, c *call, failure error) {
	c.log.Printf("%s failed on CloudEvent %s (%s), delivery %d: %v", c.fn, c.ev.ID, c.ev.Type, c.inv.Metadata.DeliveryCount, failure)
	kube, rec := deps.kubeClient(), deps.eventRecorder()
	if kube == nil || rec == nil {
		return // the dependencies were never built: nothing to write to
	}
	seen := map[string]bool{}
	for _, obj := range c.subjects {
		key := fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
		if obj.GetName() == "" || seen[key] || len(seen) == maxFailureSubjects {
			continue
		}
		seen[key] = true
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			continue // gone, or unreadable: the log has the failure
		}
		msg := fmt.Sprintf("karpfunc %s failed (delivery %d of message %s): %v", c.fn, c.inv.Metadata.DeliveryCount, c.inv.Metadata.MessageID, failure)
		if err := rec.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: events.ReasonHandlerFailed, Message: msg}); err != nil {
			c.log.Printf("writing the failure event on %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// Subjects of the events: the objects they name, with only kind and name
// set. A payload that does not decode names nothing (its handler refuses
// it with the reason).

func nodeClaimSubject(ev messages.CloudEvent) []client.Object {
	data, err := messages.DecodeData[messages.NodeClaim](ev)
	if err != nil {
		return nil
	}
	return []client.Object{nodeClaimNamed(data.Name)}
}

func nodeSubject(ev messages.CloudEvent) []client.Object {
	data, err := messages.DecodeData[messages.Node](ev)
	if err != nil {
		return nil
	}
	return []client.Object{nodeNamed(data.Name)}
}

func interruptionSubject(ev messages.CloudEvent) []client.Object {
	data, err := messages.DecodeData[messages.Interruption](ev)
	if err != nil {
		return nil
	}
	return []client.Object{nodeNamed(data.Node)}
}

// podsSubject is the pods a provision batch names (a pass the Functions
// asked for names none).
func podsSubject(ev messages.CloudEvent) []client.Object {
	data, err := messages.DecodeData[messages.Provision](ev)
	if err != nil {
		return nil
	}
	out := make([]client.Object, 0, min(len(data.Pods), maxFailureSubjects))
	for _, ref := range data.Pods[:min(len(data.Pods), maxFailureSubjects)] {
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = ref.Namespace, ref.Name
		out = append(out, pod)
	}
	return out
}

// candidatesSubject is the NodeClaims a disruption command would disrupt.
func candidatesSubject(ev messages.CloudEvent) []client.Object {
	data, err := messages.DecodeData[messages.DisruptionCommand](ev)
	if err != nil {
		return nil
	}
	out := make([]client.Object, 0, len(data.Candidates))
	for _, ref := range data.Candidates {
		out = append(out, nodeClaimNamed(ref.Name))
	}
	return out
}

func nodeClaimNamed(name string) client.Object {
	nc := &karpv1.NodeClaim{}
	nc.Name = name
	return nc
}

func nodeNamed(name string) client.Object {
	node := &corev1.Node{}
	node.Name = name
	return node
}
