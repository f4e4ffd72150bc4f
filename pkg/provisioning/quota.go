package provisioning

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// UsageReader reads the subscription's compute quota and use (the Azure
// launcher's ReadUsage).
type UsageReader interface {
	ReadUsage(ctx context.Context) (offerings.Usage, error)
}

// DefaultQuotaTTL is how long a pass reuses the usages another pass read:
// short, since launches in flight are counted from the NodeClaims and
// usage catches up within seconds of a create.
const DefaultQuotaTTL = 15 * time.Second

// quotaCache holds the last usages read, for the passes of one instance.
type quotaCache struct {
	reader UsageReader
	ttl    time.Duration
	mu     sync.Mutex
	usage  offerings.Usage
	ok     bool
	// failing is set after a read failed and cleared by the next that
	// succeeds: the failure is logged once, not once per pass. failedAt
	// is the last failure: the next read waits the TTL, so a throttled or
	// forbidden API is not asked on every pass.
	failing  bool
	failedAt time.Time
}

// headroom returns the quota left for a pass over snap, or nil when quota
// awareness is off or the usages cannot be read (the pass then goes on as
// before, on the unavailable-offerings cache alone).
func (p *Provisioner) headroom(ctx context.Context, snap *snapshot.Cluster, cat *catalog.Catalog) *offerings.Headroom {
	c := p.quota
	if c == nil {
		return nil
	}
	now := p.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing && now.Sub(c.failedAt) < c.ttl {
		return nil
	}
	if !c.ok || now.Sub(c.usage.Read) >= c.ttl {
		usage, err := c.reader.ReadUsage(ctx)
		if err != nil {
			if !c.failing {
				p.log.Warn("reading the subscription's compute quota failed; provisioning goes on without quota awareness, on launch errors alone, until a read succeeds",
					"error", err)
			}
			c.failing, c.ok, c.failedAt = true, false, now
			recordQuotaReadFailure(ctx)
			return nil
		}
		if c.failing {
			p.log.Info("reading the subscription's compute quota works again; provisioning is quota-aware")
		}
		usage.Read = now
		c.usage, c.ok, c.failing = usage, true, false
	}
	h := offerings.NewHeadroom(c.usage, inFlight(snap, cat, c.usage.Read))
	recordHeadroom(ctx, h)
	return h
}

// inFlight are the launches the usages do not show: the NodeClaims not
// launched yet (charged as the offering they would launch as now), and
// those launched after the usages were read.
func inFlight(snap *snapshot.Cluster, cat *catalog.Catalog, read time.Time) []offerings.InFlight {
	var out []offerings.InFlight
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil || !ownership.Owns(nc) {
			continue
		}
		launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched)
		if launched.IsTrue() {
			if launched.LastTransitionTime.After(read) {
				if it, ok := cat.Get(nc.Labels[corev1.LabelInstanceTypeStable]); ok {
					out = append(out, offerings.InFlight{InstanceType: it, CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey]})
				}
			}
			continue
		}
		reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
		if it, offering := cloudprovider.Cheapest(cat.InstanceTypes, reqs); it != nil {
			out = append(out, offerings.InFlight{InstanceType: it, CapacityType: offering.CapacityType})
		}
	}
	return out
}

// schedulerQuota is h as the solve's quota budget (nil when h is nil or
// lists no quota): the solve charges it as it opens claims, so the claims
// it plans fit quota together, not only one by one.
func schedulerQuota(h *offerings.Headroom) *scheduler.Quota {
	quotas := h.Quotas()
	if len(quotas) == 0 {
		return nil
	}
	index := make(map[string]int, len(quotas))
	left := make([]int64, len(quotas))
	for j, quota := range quotas {
		index[quota.Quota], left[j] = j, quota.Left
	}
	return &scheduler.Quota{Left: left, Charged: func(it *catalog.InstanceType, capacityType string) []int {
		names := h.Counted(it, capacityType)
		out := make([]int, 0, len(names))
		for _, name := range names {
			if j, ok := index[name]; ok {
				out = append(out, j)
			}
		}
		return out
	}}
}

// fitQuota walks the plans in order, as the launches will follow, and
// charges each the offering it would launch as among those quota still
// holds: a plan whose cheapest offering no longer fits moves to the next
// cheapest that does (so a group of pods spreads over families when one
// family's quota cannot hold it all), and is narrowed to the instance
// types of that family and that capacity type that fit, so that its
// launch cannot pick an offering quota refuses. Plans nothing fits are
// returned with the shortfall of their cheapest offering; their pods wait
// for a later pass.
func fitQuota(h *offerings.Headroom, plans []*scheduler.NodeClaimPlan) (kept []*scheduler.NodeClaimPlan, refused map[*scheduler.NodeClaimPlan]offerings.QuotaShortfall) {
	if h == nil {
		return plans, nil
	}
	refused = map[*scheduler.NodeClaimPlan]offerings.QuotaShortfall{}
	for _, plan := range plans {
		fitting := fittingTypes(h, plan.InstanceTypes)
		it, offering := cloudprovider.Cheapest(fitting, plan.Requirements)
		if it == nil {
			first, firstOffering := plan.Cheapest()
			var short offerings.QuotaShortfall
			if first != nil {
				short, _ = h.Fits(first, firstOffering.CapacityType)
			}
			refused[plan] = short
			continue
		}
		family := offerings.QuotaFamily(it.Name)
		var names []string
		var types []*catalog.InstanceType
		for _, candidate := range fitting {
			if offerings.QuotaFamily(candidate.Name) != family || !plan.Requirements.Get(corev1.LabelInstanceTypeStable).Has(candidate.Name) {
				continue
			}
			if _, fits := h.Fits(candidate, offering.CapacityType); fits {
				names = append(names, candidate.Name)
				types = append(types, candidate)
			}
		}
		plan.InstanceTypes = types
		plan.Requirements = scheduling.NewRequirements(plan.Requirements.Values()...)
		plan.Requirements.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
		plan.Requirements.Add(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, offering.CapacityType))
		h.Take(it, offering.CapacityType)
		kept = append(kept, plan)
	}
	return kept, refused
}

// fittingTypes are its with the offerings quota cannot hold marked
// unavailable (copies; its are shared).
func fittingTypes(h *offerings.Headroom, its []*catalog.InstanceType) []*catalog.InstanceType {
	out := make([]*catalog.InstanceType, 0, len(its))
	for _, it := range its {
		cp := *it
		cp.Offerings = append([]catalog.Offering(nil), it.Offerings...)
		for i := range cp.Offerings {
			if _, fits := h.Fits(it, cp.Offerings[i].CapacityType); !fits {
				cp.Offerings[i].Available = false
			}
		}
		out = append(out, &cp)
	}
	return out
}

// quotaSummary names the quotas that rule out offerings this pass, for a
// pod's event and the NodePool's status: "standardDSv5Family quota in
// eastus: 16 of 16 vCPUs used or launching, 0 left, 8 needed; ask for a
// quota increase of standardDSv5Family in eastus to at least 24 vCPUs".
// Empty when quota rules nothing out.
func quotaSummary(h *offerings.Headroom, cat *catalog.Catalog) string {
	var reasons []string
	for _, short := range h.Exhausted(cat) {
		reasons = append(reasons, short.Error())
	}
	return strings.Join(reasons, "; ")
}

// overQuota defers the pods of a plan that quota cannot hold any more in
// this pass (earlier plans took what was left), with an event on each
// saying which quota and what to ask for.
func (p *Provisioner) overQuota(ctx context.Context, ps *pass, plan *scheduler.NodeClaimPlan, short offerings.QuotaShortfall) {
	ps.quotaBlocked = true
	reason := "subscription quota: " + short.Error()
	for _, pod := range capacitybuffer.RealPods(plan.Pods) { // virtual pods get no outcome or event
		ps.res.Pods = append(ps.res.Pods, outcomeOf(pod, Deferred, "", reason))
		if err := p.recorder.Publish(ctx, events.Event{Object: pod, Type: corev1.EventTypeWarning,
			Reason: events.ReasonFailedScheduling, Message: "karpfunc: NodePool " + plan.NodePool.Name + ": " + reason}); err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
}

// writeQuotaStatus sets every NodePool's QuotaAvailable condition: False
// with the quotas when quota left pods of this pass without an offering
// (quota is the subscription's, shared by every NodePool), True when the
// usages were read and quota left none without. Nothing is written when
// the usages were not read or nothing changed.
func (p *Provisioner) writeQuotaStatus(ctx context.Context, ps *pass, snap *snapshot.Cluster) {
	if ps.headroom == nil {
		return
	}
	for _, np := range snap.NodePools {
		var err error
		if ps.quotaBlocked {
			message := ps.quotaSummary
			if message == "" {
				message = "launches planned in this pass took the quota left; see the pods' events"
			}
			err = nodepoolstatus.SetQuotaCondition(ctx, p.kube, np, false, message, p.clock)
		} else {
			err = nodepoolstatus.SetQuotaCondition(ctx, p.kube, np, true, "", p.clock)
		}
		if err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
}
