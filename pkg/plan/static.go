package plan

import (
	"fmt"
	"math"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// StaticNodePool is what the provisioning pass would do for one static
// NodePool (spec.replicas): the NodeClaims it would create to reach its
// replicas, priced like new NodeClaims, and those it would delete.
type StaticNodePool struct {
	NodePool string `json:"nodePool"`
	Replicas int64  `json:"replicas"`
	// NodeClaims counts its claims toward replicas now (not deleting, not
	// being replaced by disruption).
	NodeClaims int         `json:"nodeClaims"`
	Create     []NodeClaim `json:"create"`
	Delete     []string    `json:"delete"`
	// Waiting says why fewer are created than replicas asks (limits.nodes,
	// no instance type the pool can launch).
	Waiting string `json:"waiting,omitempty"`
}

// KeepStatic decides, for every static NodePool in c, what the
// provisioning pass would do (package staticcapacity), and adds the
// NodeClaims it would create to c as in-flight capacity, so the pending
// pods' plan may use them as the live pass does. The added claims are
// named static-<nodepool>-<n>. poolCatalogs are the NodePools' catalogs
// with their NodeOverlays applied (scheduler.Input.PoolCatalogs; nil:
// cat for every NodePool).
func KeepStatic(c *snapshot.Cluster, cat *catalog.Catalog, poolCatalogs map[string]*catalog.Catalog, now time.Time) []StaticNodePool {
	var out []StaticNodePool
	in := c.Input(cat, snapshot.Offline)
	in.PoolCatalogs = poolCatalogs
	for _, np := range c.NodePools {
		if !staticcapacity.IsStatic(np) || np.DeletionTimestamp != nil {
			continue
		}
		d := staticcapacity.Decide(np, staticcapacity.ClaimsOf(np, staticcapacity.Objects{NodeClaims: c.NodeClaims, Nodes: c.Nodes, Pods: c.Pods}, now))
		sp := StaticNodePool{NodePool: np.Name, Replicas: d.Replicas, NodeClaims: d.Running, Create: []NodeClaim{}, Delete: []string{}, Waiting: d.LimitReached}
		for _, nc := range d.Delete {
			sp.Delete = append(sp.Delete, nc.Name)
		}
		if d.Create > 0 {
			p, why := scheduler.StaticPlan(in, np)
			if p == nil {
				sp.Waiting = why
			}
			for i := range d.Create {
				if p == nil {
					break
				}
				nc := NodeClaim{NodePool: np.Name, InstanceTypeOptions: make([]string, 0, len(p.InstanceTypes)), Pods: []string{}}
				for _, it := range p.InstanceTypes {
					nc.InstanceTypeOptions = append(nc.InstanceTypeOptions, it.Name)
				}
				if it, o := p.Cheapest(); it != nil {
					nc.InstanceType, nc.Zone, nc.CapacityType, nc.PricePerHour = it.Name, o.Zone, o.CapacityType, o.Price
				}
				sp.Create = append(sp.Create, nc)
				claim := provisioning.NodeClaimFor(p)
				claim.Name = fmt.Sprintf("static-%s-%d", np.Name, i+1)
				c.NodeClaims = append(c.NodeClaims, claim)
			}
		}
		out = append(out, sp)
	}
	return out
}

// WithStatic adds the static NodePools' decisions to o, their new
// NodeClaims' price to the total.
func (o Output) WithStatic(static []StaticNodePool) Output {
	o.StaticNodePools = append([]StaticNodePool{}, static...)
	total := o.TotalPricePerHour
	for _, sp := range static {
		for _, nc := range sp.Create {
			total += nc.PricePerHour
		}
	}
	o.TotalPricePerHour = math.Round(total*1e6) / 1e6
	return o
}
