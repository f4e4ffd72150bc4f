package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// BufferResult is what room one CapacityBuffer holds after a pass.
type BufferResult struct {
	Buffer   string // namespace/name
	Ready    bool
	Reason   string // ReadyForProvisioning's reason
	Replicas int32
	// Existing, New, Failed: where its virtual pods went (see
	// capacitybuffer.Room).
	Existing, New, Failed int
	Nodes                 []string
}

// readBuffers reads and evaluates the CapacityBuffers; a read failure is
// the pass's error and leaves the pass without buffers.
func (p *Provisioner) readBuffers(ctx context.Context, ps *pass) []capacitybuffer.Buffer {
	cbs, objs, err := capacitybuffer.Read(ctx, p.kube)
	if err != nil {
		ps.errs = append(ps.errs, err)
		return nil
	}
	return capacitybuffer.Evaluate(cbs, objs, capacitybuffer.Options{Disabled: p.buffersOff})
}

// writeBuffers writes each buffer's status (replicas, ReadyForProvisioning
// and, when the pass placed its pods, Provisioning), a Warning event on
// each buffer karpfunc refuses by name, and the pass's BufferResults.
func (p *Provisioner) writeBuffers(ctx context.Context, ps *pass, bufs []capacitybuffer.Buffer) {
	now := metav1.NewTime(p.clock.Now())
	for i := range bufs {
		b := &bufs[i]
		room := ps.rooms[b.Key()]
		result := BufferResult{Buffer: b.Key(), Ready: b.Ready, Reason: b.Reason, Replicas: b.Replicas}
		if room != nil {
			result.Existing, result.New, result.Failed, result.Nodes = room.Existing, room.New, room.Failed, room.Nodes
		}
		ps.res.Buffers = append(ps.res.Buffers, result)
		stored := b.Object
		cb := stored.DeepCopy()
		capacitybuffer.Status(cb, b, room, now)
		if !equality.Semantic.DeepEqual(stored.Status, cb.Status) {
			err := p.kube.Status().Patch(ctx, cb, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				ps.errs = append(ps.errs, fmt.Errorf("writing status of CapacityBuffer %s: %w", b.Key(), err))
			}
		}
		if b.Reason == capacitybuffer.ReasonUnsupportedStrategy || b.Reason == capacitybuffer.ReasonDisabled {
			if err := p.recorder.Publish(ctx, events.Event{Object: stored, Type: corev1.EventTypeWarning, Reason: b.Reason,
				Message: b.Message, DedupeValues: []string{string(stored.UID), b.Reason}}); err != nil {
				ps.errs = append(ps.errs, err)
			}
		}
		if room != nil && room.Failed > 0 {
			p.log.Warn("capacity buffer pods fit nowhere", "capacitybuffer", b.Key(), "failed", room.Failed, "reason", room.Why)
		}
	}
}
