package triggers

import (
	"fmt"
	"time"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// NodeHealthChanged is the relay's event for a Node whose condition typ
// (one a repair policy names, other than Ready: NodeChanged reports Ready)
// changed status; since is the condition's transition time. Its ID
// node/<uid>/condition/<typ>=<status>/<since, unix s> is one message per
// transition however often the relay sees the node.
func NodeHealthChanged(node messages.Node, typ, status string, since, now time.Time) (Continuation, error) {
	if node.UID == "" || node.Name == "" || node.Cluster == "" {
		return Continuation{}, fmt.Errorf("node %q (uid %q, cluster %q) lacks a name, UID or cluster", node.Name, node.UID, node.Cluster)
	}
	id := fmt.Sprintf("node/%s/condition/%s=%s/%d", node.UID, typ, status, since.Unix())
	return Continuation{queue: bus.QueueLifecycle, id: id, typ: messages.TypeNode, subject: node.Name, cluster: node.Cluster,
		created: now, data: node}, nil
}

// RepairCheck is the look at unhealthy node at time at, when its repair
// policy's toleration ends or a blocked repair looks again. Its ID
// node/<uid>/repair/<ms of at> makes every ask for one instant one
// message: the node events of one unhealthy spell all ask for the same
// instant (the condition's transition time plus its toleration).
func RepairCheck(node messages.Node, at time.Time) Continuation {
	return scheduled(bus.QueueLifecycle, fmt.Sprintf("node/%s/repair/%d", node.UID, at.UnixMilli()), "", messages.TypeNodeRepair,
		node.Name, node.Cluster, at, node)
}
