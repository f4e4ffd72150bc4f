package provisioning

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// MaxInstanceTypes caps the instance-type options written into a NodeClaim,
// as Karpenter does (60), so a NodeClaim stays a readable, bounded object.
const MaxInstanceTypes = 60

// NodeClassGroup and NodeClassKind are the nodeClassRef every NodePool must use.
const (
	NodeClassGroup = lifecycle.NodeClassGroup
	NodeClassKind  = lifecycle.NodeClassKind
)

// create writes the NodeClaim for plan and nominates its pods.
//
// The name is the idempotency key and is never used twice (package
// claimnames): derived from the NodePool, the pods' UIDs and the first
// generation, from the pass's view of the name counter on, whose name no
// NodeClaim in the pass's snapshot holds. Two passes that act on the same
// view (a redelivery after a lost lock) pick the same name, so the second
// finds the first's claim instead of making another; a pass whose snapshot
// already holds a claim of that name for these pods (one going away, or one
// the pods cannot use: its Node was tainted, cordoned, filled) moves on to
// the next generation at once instead of waiting for it. Just before the
// Create the counter is read again: if it has moved past the generation,
// the claim is adopted when it exists and otherwise not created (a
// NameRetiredError), since the name may be one already used and removed.
// The caller retires the generations of the claims it created.
//
// It returns the claim and whether this call created it (false: a
// concurrent pass created it after this pass's snapshot), or a
// LimitExceededError when a fresh count of the NodePool's claims leaves no
// room for it.
func (p *Provisioner) create(ctx context.Context, plan *scheduler.NodeClaimPlan, held func(string) bool, view int64, annotations map[string]string) (*karpv1.NodeClaim, bool, error) {
	nc := NodeClaimFor(plan)
	// Born with the caller's annotations (a replacement's command): no
	// reader ever sees the claim without them.
	for key, value := range annotations {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[key] = value
	}
	name, generation := claimnames.Free(plan.NodePool.Name, plan.Pods, view, held)
	nc.Name = name
	claimnames.SetGeneration(nc, generation)
	created := true
	err := p.limits.guard(ctx, plan.NodePool, func() error {
		if err := p.checkLimits(ctx, plan.NodePool, nc); err != nil {
			return err
		}
		adopted, err := p.adoptIfRetired(ctx, nc, generation)
		if err != nil || adopted {
			created = false
			return err
		}
		err = p.kube.Create(ctx, nc)
		if apierrors.IsAlreadyExists(err) {
			created = false
			return p.kube.Get(ctx, client.ObjectKeyFromObject(nc), nc)
		}
		return err
	})
	if err != nil {
		if IsLimitExceeded(err) || IsNameRetired(err) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("creating NodeClaim %s for NodePool %s: %w", nc.Name, plan.NodePool.Name, err)
	}
	if !created {
		return nc, false, nil
	}
	p.log.Info("created nodeclaim", "nodeclaim", nc.Name, "nodepool", plan.NodePool.Name, "pods", len(plan.Pods),
		"instanceTypes", len(plan.InstanceTypes))
	return nc, true, nil
}

// nominationCause is why a Nominated event over the limit is not written.
const nominationCause = "nomination rate limit, Karpenter's PodNominationRateLimiter: 5 a second, burst 10"

// nominate writes a Nominated event on each pod of a NodeClaim the caller
// created, as Karpenter's NominatePodEvent (sigs.k8s.io/karpenter
// pkg/controllers/provisioning/scheduling/events.go): deduplicated by pod
// UID, and through the limiter all nominations share, so a burst of a
// thousand pods costs a few requests, not a thousand. Those the limiter
// refuses are counted in unwritten.
func (p *Provisioner) nominate(ctx context.Context, nc *karpv1.NodeClaim, pods []*corev1.Pod, unwritten *events.Unwritten) {
	refused := 0
	for _, pod := range pods {
		done, err := p.recorder.Record(ctx, events.Event{Object: pod, Type: corev1.EventTypeNormal, Reason: events.ReasonNominated,
			Message: fmt.Sprintf("Pod should schedule on: nodeclaim/%s", nc.Name), DedupeValues: []string{string(pod.UID)},
			RateLimiter: p.nominations})
		if err != nil {
			p.log.Warn("writing event", "error", err)
		}
		if done == events.RateLimited {
			refused++
		}
	}
	unwritten.Add(events.ReasonNominated, nominationCause, refused)
}

// adoptIfRetired reads the name counter just before nc is created. While
// it has not passed generation the name was never removed, and Create may
// go ahead (false). Once it has, nc is read back and adopted (true) when it
// exists; when it does not, a NameRetiredError: the name may have been used
// and removed since the pass's view, so it must not be created again.
func (p *Provisioner) adoptIfRetired(ctx context.Context, nc *karpv1.NodeClaim, generation int64) (bool, error) {
	counter, err := p.names.Read(ctx)
	if err != nil || counter <= generation {
		return false, err
	}
	existing := &karpv1.NodeClaim{}
	err = p.kube.Get(ctx, client.ObjectKeyFromObject(nc), existing)
	switch {
	case err == nil:
		*nc = *existing
		return true, nil
	case apierrors.IsNotFound(err):
		return false, &NameRetiredError{NodeClaim: nc.Name, Generation: generation, Counter: counter}
	default:
		return false, fmt.Errorf("reading NodeClaim %s: %w", nc.Name, err)
	}
}

// NodeClaimFor builds the NodeClaim object for a plan (unnamed: create
// names it): the NodePool's
// template (labels, annotations, taints, startup taints, expiry, grace
// period), requirements narrowed to the plan's instance-type options, the
// pods' summed requests, and Karpenter's finalizer and owner reference.
func NodeClaimFor(plan *scheduler.NodeClaimPlan) *karpv1.NodeClaim {
	np := plan.NodePool
	tmpl := np.Spec.Template
	labels := map[string]string{}
	for key, value := range tmpl.Labels {
		labels[key] = value
	}
	labels[karpv1.NodePoolLabelKey] = np.Name
	annotations := map[string]string{}
	for key, value := range tmpl.Annotations {
		annotations[key] = value
	}
	// Hashes of the NodePool template and AKSNodeClass: drift detection.
	for key, value := range disruption.HashAnnotations(np, plan.NodeClass) {
		annotations[key] = value
	}
	reqs := scheduling.NewRequirements(plan.Requirements.Values()...)
	names := make([]string, 0, len(plan.InstanceTypes))
	for i, it := range plan.InstanceTypes {
		if i == MaxInstanceTypes {
			break
		}
		names = append(names, it.Name)
	}
	reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...))
	var nodeSelector []karpv1.NodeSelectorRequirementWithMinValues
	for _, requirement := range reqs.NodeSelectorRequirements() {
		// Keys Karpenter reserves (hostname, karpenter.sh/* other than
		// the well-known ones) are rejected by the NodeClaim CRD; pods may
		// still carry them, but they describe the pod, not the node.
		if karpv1.IsRestrictedLabel(requirement.Key) != nil {
			continue
		}
		nodeSelector = append(nodeSelector, requirement)
	}
	sort.Slice(nodeSelector, func(i, j int) bool { return nodeSelector[i].Key < nodeSelector[j].Key })
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      labels,
			Annotations: annotations,
			Finalizers:  []string{karpv1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: np.Name, UID: np.UID,
				BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           nodeSelector,
			Resources:              karpv1.ResourceRequirements{Requests: plan.Requests},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
	ownership.Mark(nc)
	return nc
}

func ptr[T any](v T) *T { return &v }

var _ client.Object = (*karpv1.NodeClaim)(nil)
