package watch

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/karpfunc/karpfunc/pkg/bus"
)

// CapacityBuffers and PodTemplates are watched so that a buffer created,
// resized or deleted, or the PodTemplate that shapes it changed, gets a
// provisioning pass: the pass keeps the buffer's room and writes its
// status. Status writes (no generation change) ask for nothing, so the
// pass's own writes never loop back.
var (
	CapacityBuffers = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Resource: "capacitybuffers"}
	PodTemplates    = schema.GroupVersionResource{Version: "v1", Resource: "podtemplates"}
)

const causeBufferChanged = "capacity-buffer"

// bufferHandlers: a change after the initial list asks for a pass
// (buffers left as they were while no relay ran are caught by the
// Disruption pass relay-started asks for, which asks for a provisioning
// pass when a buffer's room is short).
func (r *relay) bufferHandlers(generationOnly bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				r.askProvision(causeBufferChanged)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldMeta, ok1 := oldObj.(*metav1.PartialObjectMetadata)
			newMeta, ok2 := newObj.(*metav1.PartialObjectMetadata)
			if !ok1 || !ok2 {
				return
			}
			if (generationOnly && oldMeta.Generation != newMeta.Generation) || (!generationOnly && oldMeta.ResourceVersion != newMeta.ResourceVersion) {
				r.askProvision(causeBufferChanged)
			}
		},
		DeleteFunc: func(any) { r.askProvision(causeBufferChanged) },
	}
}

// askProvision sends a provisioning pass for cause, due now.
func (r *relay) askProvision(cause string) {
	msg, err := r.events.ProvisionPass(cause, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("provision event not built", "cause", cause, "error", err)
		return
	}
	r.log.Info("provisioning pass asked", "cause", cause, "id", msg.ID)
	r.send.Send(bus.QueueProvision, msg)
}
