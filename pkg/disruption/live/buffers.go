package live

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// readBuffers reads and evaluates the CapacityBuffers (none while they are
// off: the provisioning pass refuses them).
func (c *Controller) readBuffers(ctx context.Context) ([]capacitybuffer.Buffer, error) {
	if c.opts.DisableCapacityBuffers {
		return nil, nil
	}
	cbs, objs, err := capacitybuffer.Read(ctx, c.kube)
	if err != nil {
		return nil, err
	}
	return capacitybuffer.Evaluate(cbs, objs, capacitybuffer.Options{}), nil
}

// askBufferRoom asks for a provisioning pass when a buffer's room is not
// what its status says: some of its virtual pods need a new NodeClaim (a
// real pod took its room, or its node went), or they all fit now while
// its Provisioning condition says otherwise (its node came up). The pass
// creates the room and writes the status, so the next look finds them
// equal and asks nothing.
func (c *Controller) askBufferRoom(buffers []capacitybuffer.Buffer, rooms map[string]*capacitybuffer.Room, out *triggers.Outcome) {
	var unsettled []string
	for i := range buffers {
		b := &buffers[i]
		room := rooms[b.Key()]
		if !b.Ready || b.Replicas == 0 || room == nil {
			continue
		}
		fits := room.New == 0 && room.Failed == 0
		cond := apimeta.FindStatusCondition(b.Object.Status.Conditions, autoscalingv1beta1.ProvisioningCondition)
		saysFits := cond != nil && cond.Reason == capacitybuffer.ReasonFitsExistingCapacity
		replicasKnown := b.Object.Status.Replicas != nil && *b.Object.Status.Replicas == b.Replicas
		if room.New > 0 || fits != saysFits || !replicasKnown {
			unsettled = append(unsettled, b.Key())
		}
	}
	if len(unsettled) == 0 {
		return
	}
	out.Then(triggers.ProvisionPass(c.opts.ClusterName, "capacity-buffer", c.clock.Now(), 0))
	c.log.Info("capacity buffers not holding the room their status says; provisioning pass asked", "capacitybuffers", unsettled)
}
