package provisioning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// MaxInstanceTypes caps the instance-type options written into a NodeClaim,
// as Karpenter does (60), so a NodeClaim stays a readable, bounded object.
const MaxInstanceTypes = 60

// NodeClassGroup and NodeClassKind are the nodeClassRef every NodePool must use.
const (
	NodeClassGroup = v1beta1.Group
	NodeClassKind  = "AKSNodeClass"
)

// create writes the NodeClaim for plan and nominates its pods.
//
// The name is the idempotency key: a hash of the NodePool, the pods' UIDs
// and the first generation whose name no NodeClaim in the pass's snapshot
// holds (see NodeClaimName). Two passes that act on the same snapshot (a
// redelivery after a lost lock) pick the same name, so the second finds the
// first's claim instead of making another; a pass whose snapshot already
// holds a claim of that name for these pods (one going away, or one the
// pods cannot use: its Node was tainted, cordoned, filled) moves on to the
// next generation at once instead of waiting for it.
//
// It returns the claim and whether this call created it (false: a
// concurrent pass created it after this pass's snapshot), or a
// LimitExceededError when a fresh count of the NodePool's claims leaves no
// room for it.
func (p *Provisioner) create(ctx context.Context, plan *scheduler.NodeClaimPlan, held func(string) bool) (*karpv1.NodeClaim, bool, error) {
	nc := NodeClaimFor(plan)
	nc.Name = FreeNodeClaimName(plan.NodePool.Name, plan.Pods, held)
	created := true
	err := p.limits.guard(ctx, plan.NodePool, func() error {
		if err := p.checkLimits(ctx, plan.NodePool, nc); err != nil {
			return err
		}
		err := p.kube.Create(ctx, nc)
		if apierrors.IsAlreadyExists(err) {
			created = false
			return p.kube.Get(ctx, client.ObjectKeyFromObject(nc), nc)
		}
		return err
	})
	if err != nil {
		if IsLimitExceeded(err) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("creating NodeClaim %s for NodePool %s: %w", nc.Name, plan.NodePool.Name, err)
	}
	if !created {
		return nc, false, nil
	}
	p.log.Info("created nodeclaim", "nodeclaim", nc.Name, "nodepool", plan.NodePool.Name, "pods", len(plan.Pods),
		"instanceTypes", len(plan.InstanceTypes))
	for _, pod := range plan.Pods {
		if err := p.recorder.Publish(ctx, events.Event{Object: pod, Type: corev1.EventTypeNormal, Reason: events.ReasonNominated,
			Message: fmt.Sprintf("Pod should schedule on: nodeclaim/%s", nc.Name)}); err != nil {
			p.log.Warn("writing event", "error", err)
		}
	}
	return nc, true, nil
}

// NodeClaimFor builds the NodeClaim object for a plan: the NodePool's
// template (labels, annotations, taints, startup taints, expiry, grace
// period), requirements narrowed to the plan's instance-type options, the
// pods' summed requests, and Karpenter's finalizer and owner reference.
func NodeClaimFor(plan *scheduler.NodeClaimPlan) *karpv1.NodeClaim {
	np := plan.NodePool
	tmpl := np.Spec.Template
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	labels[karpv1.NodePoolLabelKey] = np.Name
	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	// Hashes of the NodePool template and AKSNodeClass: drift detection.
	for k, v := range disruption.HashAnnotations(np, plan.NodeClass) {
		annotations[k] = v
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
	for _, r := range reqs.NodeSelectorRequirements() {
		// Keys Karpenter reserves (hostname, karpenter.sh/* other than
		// the well-known ones) are rejected by the NodeClaim CRD; pods may
		// still carry them, but they describe the pod, not the node.
		if karpv1.IsRestrictedLabel(r.Key) != nil {
			continue
		}
		nodeSelector = append(nodeSelector, r)
	}
	sort.Slice(nodeSelector, func(i, j int) bool { return nodeSelector[i].Key < nodeSelector[j].Key })
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeClaimName(np.Name, plan.Pods, 0),
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

// NodeClaimName is "<nodepool>-<10 hex>" from the NodePool, its pods and a
// generation: generation 0 is the first claim ever made for exactly these
// pods in this NodePool, generation n the claim made after n earlier ones
// could not take them.
func NodeClaimName(nodePool string, pods []*corev1.Pod, generation int) string {
	uids := make([]string, 0, len(pods))
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	sort.Strings(uids)
	key := nodePool + "\x00" + strings.Join(uids, ",")
	if generation > 0 {
		key += "\x00" + strconv.Itoa(generation)
	}
	sum := sha256.Sum256([]byte(key))
	prefix := nodePool
	if len(prefix) > 50 {
		prefix = prefix[:50]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}

// FreeNodeClaimName is the NodeClaimName of the lowest generation that held
// does not report as taken.
func FreeNodeClaimName(nodePool string, pods []*corev1.Pod, held func(string) bool) string {
	for generation := 0; ; generation++ {
		if name := NodeClaimName(nodePool, pods, generation); !held(name) {
			return name
		}
	}
}

func ptr[T any](v T) *T { return &v }

var _ client.Object = (*karpv1.NodeClaim)(nil)
