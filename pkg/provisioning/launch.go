package provisioning

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Choice is the instance type and offering a NodeClaim launches as.
type Choice struct {
	InstanceType *catalog.InstanceType
	Offering     catalog.Offering
}

// Choose picks the cheapest available offering allowed by a NodeClaim's
// requirements whose allocatable fits its requests. It depends only on the
// NodeClaim spec and the catalog, so a retried launch picks the same VM.
func Choose(cat *catalog.Catalog, nc *karpv1.NodeClaim, maxPods int32) (Choice, error) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	var best *Choice
	for _, it := range cat.InstanceTypes {
		if !reqs.Get(corev1.LabelInstanceTypeStable).Has(it.Name) {
			continue
		}
		it = it.WithMaxPods(maxPods)
		if !resources.Fits(nc.Spec.Resources.Requests, it.Allocatable()) {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !reqs.Get(corev1.LabelTopologyZone).Has(o.Zone) || !reqs.Get(karpv1.CapacityTypeLabelKey).Has(o.CapacityType) {
				continue
			}
			if best == nil || o.Price < best.Offering.Price || (o.Price == best.Offering.Price && it.Name+o.Zone < best.InstanceType.Name+best.Offering.Zone) {
				best = &Choice{InstanceType: it, Offering: o}
			}
		}
	}
	if best == nil {
		return Choice{}, fmt.Errorf("NodeClaim %s: no available offering satisfies its requirements (%s) and fits its requests (%s)",
			nc.Name, reqs.String(), resources.String(nc.Spec.Resources.Requests))
	}
	return *best, nil
}

// Launch creates the VM for nc and writes what it launched into the
// NodeClaim: labels for the chosen instance type, zone and capacity type, and
// status providerID, capacity, allocatable and Launched. Safe to repeat.
//
// It tries the NodeClaim's offerings in price order, skipping those marked
// unavailable; a capacity or quota error marks the offering (or its family,
// or all spot) unavailable in the shared state and moves to the next one.
// When none is left, or MaxLaunchAttempts failed, the NodeClaim is deleted
// and an InsufficientCapacityError returned, so its pods are provisioned
// again elsewhere.
func (p *Provisioner) Launch(ctx context.Context, nc *karpv1.NodeClaim) error {
	set, err := p.loadUnavailable(ctx)
	if err != nil {
		return err
	}
	_, err = p.launch(ctx, nc, set)
	return err
}

type launchResult struct {
	marked []string // offerings marked unavailable, described
}

func (p *Provisioner) launch(ctx context.Context, nc *karpv1.NodeClaim, set *offerings.Set) (launchResult, error) {
	var lr launchResult
	class, err := p.nodeClass(ctx, nc)
	if err != nil {
		return lr, err
	}
	spec := class.DefaultedSpec()
	var (
		inst    *azure.Instance
		choice  Choice
		lastErr error
	)
	for attempt := 0; ; attempt++ {
		choice, err = Choose(set.Apply(p.catalog), nc, *spec.MaxPods)
		if err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%w; the last launch failed with: %v", err, lastErr)
			}
			return lr, p.giveUp(ctx, nc, NewInsufficientCapacityError(nc.Name, "%v", err))
		}
		if attempt >= p.maxAttempts {
			return lr, p.giveUp(ctx, nc, NewInsufficientCapacityError(nc.Name, "%d offerings failed in a row; the last with: %v", attempt, lastErr))
		}
		it, off := choice.InstanceType, choice.Offering
		inst, err = p.launcher.Create(ctx, p.launchRequest(nc, spec, choice))
		if err == nil {
			break
		}
		p.warn(ctx, nc, events.ReasonLaunchFailed, fmt.Sprintf("launching %s (%s, %s): %v", it.Name, off.Zone, off.CapacityType, err))
		entries, unavailable := offerings.ForLaunchError(err, it, off, p.clock.Now())
		if !unavailable {
			return lr, fmt.Errorf("launching NodeClaim %s as %s in %s (%s): %w", nc.Name, it.Name, off.Zone, off.CapacityType, err)
		}
		if p.offerings != nil {
			if merr := p.offerings.Mark(ctx, entries...); merr != nil {
				return lr, fmt.Errorf("launching NodeClaim %s: %v; then recording the unavailable offering: %w", nc.Name, err, merr)
			}
		}
		for _, e := range entries {
			lr.marked = append(lr.marked, e.String())
			p.log.Info("offering marked unavailable", "nodeclaim", nc.Name, "entry", e.String())
		}
		set = set.With(entries...)
		lastErr = err
	}
	// A VM an earlier, interrupted attempt created may be another offering
	// than today's first choice: describe the VM that exists.
	it, off := p.actual(inst, choice)

	// The liveness check is scheduled before Launched is written: if this
	// invocation dies in between, the retry schedules it again under the
	// same MessageId, which duplicate detection drops.
	if err := p.scheduleLiveness(ctx, nc); err != nil {
		return lr, err
	}

	// Labels first (metadata), then status: two writes, each guarded by
	// resourceVersion so a concurrent writer makes us retry, not clobber.
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if nc.Labels == nil {
		nc.Labels = map[string]string{}
	}
	for k, v := range it.Labels {
		nc.Labels[k] = v
	}
	nc.Labels[corev1.LabelTopologyZone] = off.Zone
	nc.Labels[karpv1.CapacityTypeLabelKey] = off.CapacityType
	if err := p.kube.Patch(ctx, nc, patch); err != nil {
		return lr, fmt.Errorf("labelling NodeClaim %s after launch: %w", nc.Name, err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = inst.ProviderID
	nc.Status.ImageID = inst.ImageID
	nc.Status.Capacity = it.Capacity.DeepCopy()
	nc.Status.Allocatable = it.Allocatable()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := p.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return lr, fmt.Errorf("writing NodeClaim %s status after launch: %w", nc.Name, err)
	}
	p.log.Info("launched nodeclaim", "nodeclaim", nc.Name, "instanceType", it.Name, "zone", off.Zone,
		"capacityType", off.CapacityType, "price", off.Price, "providerID", inst.ProviderID)
	if err := p.recorder.Publish(ctx, events.Event{Object: nc, Type: corev1.EventTypeNormal, Reason: events.ReasonLaunched,
		Message: fmt.Sprintf("Launched %s in %s (%s) at $%.4f/h", it.Name, off.Zone, off.CapacityType, off.Price)}); err != nil {
		p.log.Warn("writing event", "error", err)
	}
	if err := nodepoolstatus.Update(ctx, p.kube, nc.Labels[karpv1.NodePoolLabelKey]); err != nil {
		p.log.Warn("updating nodepool resources", "error", err)
	}
	return lr, nil
}

func (p *Provisioner) launchRequest(nc *karpv1.NodeClaim, spec v1beta1.AKSNodeClassSpec, choice Choice) azure.LaunchRequest {
	it, off := choice.InstanceType, choice.Offering
	nodeLabels := map[string]string{}
	for k, v := range nc.Labels {
		nodeLabels[k] = v
	}
	for k, v := range it.Labels {
		nodeLabels[k] = v
	}
	nodeLabels[corev1.LabelTopologyZone] = off.Zone
	nodeLabels[karpv1.CapacityTypeLabelKey] = off.CapacityType
	taints := append([]corev1.Taint{}, nc.Spec.Taints...)
	taints = append(taints, nc.Spec.StartupTaints...)
	taints = append(taints, karpv1.UnregisteredNoExecuteTaint)
	req := azure.LaunchRequest{
		Name: nc.Name, NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		InstanceType: it.Name, Zone: off.Zone, CapacityType: off.CapacityType,
		Architecture: it.Architecture, HyperVGenerations: it.HyperVGenerations,
		ImageFamily: *spec.ImageFamily, OSDiskSizeGB: *spec.OSDiskSizeGB, MaxPods: *spec.MaxPods,
		Labels: nodeLabels, Taints: taints, Kubelet: spec.Kubelet, Tags: spec.Tags,
	}
	if spec.VNETSubnetID != nil {
		req.SubnetID = *spec.VNETSubnetID
	}
	return req
}

// actual is the instance type and offering of the VM that exists.
func (p *Provisioner) actual(inst *azure.Instance, choice Choice) (*catalog.InstanceType, catalog.Offering) {
	if inst.InstanceType == "" || strings.EqualFold(inst.InstanceType, choice.InstanceType.Name) &&
		inst.Zone == choice.Offering.Zone && inst.CapacityType == choice.Offering.CapacityType {
		return choice.InstanceType, choice.Offering
	}
	it, ok := p.catalog.Get(inst.InstanceType)
	if !ok {
		return choice.InstanceType, choice.Offering
	}
	it = it.WithMaxPods(int32(choice.InstanceType.Capacity.Pods().Value()))
	for _, o := range it.Offerings {
		if o.Zone == inst.Zone && o.CapacityType == inst.CapacityType {
			return it, o
		}
	}
	return it, catalog.Offering{Zone: inst.Zone, CapacityType: inst.CapacityType, Available: true}
}

// giveUp deletes a NodeClaim no offering could be launched for, as
// Karpenter does on InsufficientCapacityError: the deletion goes through the
// termination finalizer (which deletes anything a failed attempt left), and
// the pods, pending again, are provisioned on the next pass.
func (p *Provisioner) giveUp(ctx context.Context, nc *karpv1.NodeClaim, cause error) error {
	p.warn(ctx, nc, events.ReasonInsufficientCapacityError, fmt.Sprintf("NodeClaim %s event: %v", nc.Name, cause))
	if err := p.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("%v; then deleting the NodeClaim: %w", cause, err)
	}
	p.log.Warn("gave up nodeclaim", "nodeclaim", nc.Name, "reason", cause)
	return cause
}

func (p *Provisioner) scheduleLiveness(ctx context.Context, nc *karpv1.NodeClaim) error {
	if p.publisher == nil {
		return nil
	}
	at := p.clock.Now().Add(p.regTTL)
	m, err := triggers.NodeClaim(messages.TypeNodeClaimLiveness, p.clusterName, nc.Name, string(nc.UID), triggers.LivenessID(string(nc.UID)), at)
	if err != nil {
		return err
	}
	if err := p.publisher.Publish(ctx, bus.QueueLifecycle, m); err != nil {
		return fmt.Errorf("scheduling the liveness check of NodeClaim %s: %w", nc.Name, err)
	}
	return nil
}

func (p *Provisioner) warn(ctx context.Context, obj client.Object, reason, msg string) {
	if err := p.recorder.Publish(ctx, events.Event{Object: obj, Type: corev1.EventTypeWarning, Reason: reason, Message: msg}); err != nil {
		p.log.Warn("writing event", "error", err)
	}
}

func (p *Provisioner) nodeClass(ctx context.Context, nc *karpv1.NodeClaim) (*v1beta1.AKSNodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Group != NodeClassGroup || ref.Kind != NodeClassKind {
		return nil, fmt.Errorf("NodeClaim %s: nodeClassRef must be group %s kind %s", nc.Name, NodeClassGroup, NodeClassKind)
	}
	class := &v1beta1.AKSNodeClass{}
	if err := p.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("NodeClaim %s references AKSNodeClass %q, which does not exist; create it or fix the NodePool's nodeClassRef", nc.Name, ref.Name)
		}
		return nil, fmt.Errorf("reading AKSNodeClass %s: %w", ref.Name, err)
	}
	return class, nil
}
