package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// reportFailure makes a failed invocation visible where Azure and
// Kubernetes users look. Service Bus dead-letters a message with its own
// reason (MaxDeliveryCountExceeded, "Message could not be consumed after N
// delivery attempts."), never the handler's error; so the error goes to
// the invocation's log (Application Insights) and, when the message names
// a NodeClaim or Node, into a Warning event on that object.
func (d *dependencies) reportFailure(ctx context.Context, fn string, inv *customhandler.Invocation, ev messages.CloudEvent, failure error, log *customhandler.Logger) {
	log.Printf("%s failed on CloudEvent %s (%s), delivery %d: %v", fn, ev.ID, ev.Type, inv.Metadata.DeliveryCount, failure)
	d.warnOn(ctx, fn, inv, d.namedObject(ctx, ev), failure, log)
}

// warnOn writes a failed invocation's reason into a Warning event on obj
// (nil: none), where kubectl describe shows it.
func (d *dependencies) warnOn(ctx context.Context, fn string, inv *customhandler.Invocation, obj client.Object, failure error, log *customhandler.Logger) {
	if obj == nil {
		return
	}
	rec := d.eventRecorder()
	if rec == nil {
		return
	}
	msg := fmt.Sprintf("karpfunc %s failed (delivery %d of message %s): %v", fn, inv.Metadata.DeliveryCount, inv.Metadata.MessageID, failure)
	if err := rec.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: events.ReasonHandlerFailed, Message: msg}); err != nil {
		log.Printf("writing the failure event on %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

// namedObject is the NodeClaim or Node a lifecycle message is about, read
// from the API server; nil when the message names none or it is gone.
func (d *dependencies) namedObject(ctx context.Context, ev messages.CloudEvent) client.Object {
	var name string
	var obj client.Object
	switch ev.Type {
	case messages.TypeNodeClaimDeleting, messages.TypeNodeClaimLiveness, messages.TypeNodeClaimLaunch:
		data, err := messages.DecodeData[messages.NodeClaim](ev)
		if err != nil {
			return nil
		}
		obj, name = &karpv1.NodeClaim{}, data.Name
	case messages.TypeNode:
		data, err := messages.DecodeData[messages.Node](ev)
		if err != nil {
			return nil
		}
		obj, name = &corev1.Node{}, data.Name
	default:
		return nil
	}
	return d.getObject(ctx, obj, name)
}

// getObject reads obj named name from the API server; nil when it cannot.
func (d *dependencies) getObject(ctx context.Context, obj client.Object, name string) client.Object {
	kube := d.kubeClient()
	if kube == nil || name == "" {
		return nil
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return nil
	}
	return obj
}
