package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/events"
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
func (p *Provisioner) Launch(ctx context.Context, nc *karpv1.NodeClaim) error {
	class, err := p.nodeClass(ctx, nc)
	if err != nil {
		return err
	}
	spec := class.DefaultedSpec()
	choice, err := Choose(p.catalog, nc, *spec.MaxPods)
	if err != nil {
		return err
	}
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
		ImageFamily: *spec.ImageFamily, OSDiskSizeGB: *spec.OSDiskSizeGB, MaxPods: *spec.MaxPods,
		Labels: nodeLabels, Taints: taints, Tags: spec.Tags,
	}
	if spec.VNETSubnetID != nil {
		req.SubnetID = *spec.VNETSubnetID
	}
	inst, err := p.launcher.Create(ctx, req)
	if err != nil {
		if perr := p.recorder.Publish(ctx, events.Event{Object: nc, Type: corev1.EventTypeWarning, Reason: events.ReasonLaunchFailed,
			Message: fmt.Sprintf("launching %s (%s, %s): %v", it.Name, off.Zone, off.CapacityType, err)}); perr != nil {
			p.log.Warn("writing event", "error", perr)
		}
		return fmt.Errorf("launching NodeClaim %s as %s in %s (%s): %w", nc.Name, it.Name, off.Zone, off.CapacityType, err)
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
		return fmt.Errorf("labelling NodeClaim %s after launch: %w", nc.Name, err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = inst.ProviderID
	nc.Status.ImageID = imageID(*spec.ImageFamily)
	nc.Status.Capacity = it.Capacity.DeepCopy()
	nc.Status.Allocatable = it.Allocatable()
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := p.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing NodeClaim %s status after launch: %w", nc.Name, err)
	}
	p.log.Info("launched nodeclaim", "nodeclaim", nc.Name, "instanceType", it.Name, "zone", off.Zone,
		"capacityType", off.CapacityType, "price", off.Price, "providerID", inst.ProviderID)
	if err := p.recorder.Publish(ctx, events.Event{Object: nc, Type: corev1.EventTypeNormal, Reason: events.ReasonLaunched,
		Message: fmt.Sprintf("Launched %s in %s (%s) at $%.4f/h", it.Name, off.Zone, off.CapacityType, off.Price)}); err != nil {
		p.log.Warn("writing event", "error", err)
	}
	return nil
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

// imageID records the image family the VM booted from. The launcher picks
// the family's current AKS node image; recording the family (not a version)
// keeps drift detection for a later issue honest about what we know.
func imageID(family string) string { return "aks-node-image/" + family }
