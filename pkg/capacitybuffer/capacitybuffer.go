// Package capacitybuffer keeps room ahead of demand for CapacityBuffers
// (autoscaling.x-k8s.io/v1beta1), as Karpenter v1.14.1 provisions them: a
// buffer of N chunks shaped like a PodTemplate or a workload's pod template
// becomes N virtual pods that every provisioning pass places next to the
// pending pods, so NodeClaims are created for them when no node has room.
// No Pod is ever created. It is pure: objects in, buffers, virtual pods and
// status out; reading them from the API server is Read's (read.go).
//
// The semantics are Karpenter v1.14.1's (sigs.k8s.io/karpenter
// pkg/controllers/capacitybuffer/controller.go:166-228, helpers.go;
// pkg/state/virtualpods/utilities.go; pkg/utils/apps/resolve.go;
// pkg/controllers/provisioning/buffers.go):
//
//   - Replicas = max(spec.replicas, ceil(percentage% of the scalableRef's
//     replicas), at least 1 when both are positive), then at most as many
//     chunks as fit in spec.limits; limits alone when neither is set.
//   - scalableRef resolves Deployment, ReplicaSet and StatefulSet of the
//     apps group (a Deployment without spec.replicas counts 1); any other
//     kind or group is refused by name.
//   - Virtual pods carry the template's labels, the buffer's annotations,
//     priority MinInt32, no nodeName and no PVC or ephemeral volumes.
//   - Provisioning is FitsExistingCapacity when every virtual pod went to
//     an existing node or in-flight NodeClaim, RequiresNewCapacity when any
//     needed a new NodeClaim or went nowhere, NotReadyForProvisioning when
//     the buffer did not resolve, BufferEmpty at zero replicas.
//
// Invariants: a buffer that is not ReadyForProvisioning, or has zero
// replicas, has no virtual pods; a virtual pod is always recognised by
// IsVirtual; a provisioning strategy other than
// buffer.x-k8s.io/active-capacity is refused by name, never provisioned.
package capacitybuffer

import (
	"errors"
	"fmt"
	"math"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	"sigs.k8s.io/karpenter/pkg/state/virtualpods"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

// Setting is the handler setting that turns CapacityBuffers off
// ("true"/"false", default true: the CRD is installed, and a buffer a user
// writes is expected to act). Off, every buffer is refused by name.
const Setting = "KARPFUNC_CAPACITY_BUFFERS"

// Condition reasons. The first four and the Provisioning reasons are
// Karpenter's (pkg/controllers/capacitybuffer/constants.go:24-36); the
// last two are karpfunc's refusals.
const (
	ReasonResolved                = "Resolved"
	ReasonScalableRefNotFound     = "ScalableRefNotFound"
	ReasonPodTemplateNotFound     = "PodTemplateNotFound"
	ReasonResolutionFailed        = "ResolutionFailed"
	ReasonFitsExistingCapacity    = "FitsExistingCapacity"
	ReasonRequiresNewCapacity     = "RequiresNewCapacity"
	ReasonNotReadyForProvisioning = "NotReadyForProvisioning"
	ReasonBufferEmpty             = "BufferEmpty"
	// ReasonUnsupportedStrategy: spec.provisioningStrategy names a strategy
	// karpfunc does not implement.
	ReasonUnsupportedStrategy = "UnsupportedProvisioningStrategy"
	// ReasonDisabled: Setting is false.
	ReasonDisabled = "CapacityBuffersDisabled"
)

// Objects are what buffers resolve against, in the buffers' namespaces.
type Objects struct {
	PodTemplates []*corev1.PodTemplate
	Deployments  []*appsv1.Deployment
	ReplicaSets  []*appsv1.ReplicaSet
	StatefulSets []*appsv1.StatefulSet
}

// Options tune Evaluate.
type Options struct {
	// Disabled refuses every buffer (Setting false).
	Disabled bool
}

// Buffer is one CapacityBuffer as karpfunc provisions it.
type Buffer struct {
	Object *autoscalingv1beta1.CapacityBuffer
	// Ready: the buffer resolved and is provisioned; else Reason and
	// Message say why not (ReadyForProvisioning=False).
	Ready           bool
	Reason, Message string
	// Replicas is the number of chunks kept (status.replicas); 0 when not
	// Ready.
	Replicas int32
	// Template is the shape of one chunk.
	Template corev1.PodTemplateSpec
	// PodTemplate and PodTemplateGeneration: the PodTemplate a
	// podTemplateRef resolved to (status.podTemplateRef).
	PodTemplate           string
	PodTemplateGeneration int64
}

// Key is the buffer's namespace/name.
func (b *Buffer) Key() string { return b.Object.Namespace + "/" + b.Object.Name }

// ResolveError says why a buffer's reference did not resolve.
type ResolveError struct {
	Reason  string // a Reason* constant
	Message string
}

func (e *ResolveError) Error() string { return e.Message }

// Evaluate resolves every buffer against objs and computes its replicas,
// sorted by namespace and name.
func Evaluate(cbs []*autoscalingv1beta1.CapacityBuffer, objs Objects, opts Options) []Buffer {
	out := make([]Buffer, 0, len(cbs))
	for _, cb := range cbs {
		if cb.DeletionTimestamp != nil {
			continue
		}
		out = append(out, evaluate(cb, objs, opts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

func evaluate(cb *autoscalingv1beta1.CapacityBuffer, objs Objects, opts Options) Buffer {
	b := Buffer{Object: cb}
	if opts.Disabled {
		b.Reason, b.Message = ReasonDisabled, DisabledMessage()
		return b
	}
	if strategy := Strategy(cb); strategy != autoscalingv1beta1.ActiveProvisioningStrategy {
		b.Reason = ReasonUnsupportedStrategy
		b.Message = fmt.Sprintf("provisioningStrategy %q is not implemented by karpfunc: only %q is; this buffer keeps no room",
			strategy, autoscalingv1beta1.ActiveProvisioningStrategy)
		return b
	}
	res, err := Resolve(cb, objs)
	if rerr := (*ResolveError)(nil); errors.As(err, &rerr) {
		b.Reason, b.Message = rerr.Reason, rerr.Message
		return b
	}
	b.Ready, b.Reason, b.Message = true, ReasonResolved, "Pod template resolved successfully"
	b.Template = res.Template
	b.PodTemplate, b.PodTemplateGeneration = res.PodTemplate, res.PodTemplateGeneration
	var percent *int32
	if res.PodTemplate == "" && cb.Spec.Percentage != nil && res.ScalableReplicas > 0 {
		p := PercentageReplicas(res.ScalableReplicas, *cb.Spec.Percentage)
		percent = &p
	}
	b.Replicas = Replicas(cb.Spec.Replicas, percent, corev1.ResourceList(cb.Spec.Limits), &res.Template.Spec)
	return b
}

// DisabledMessage is the refusal of every buffer while Setting is false.
func DisabledMessage() string {
	return "CapacityBuffers are turned off (" + Setting + "=false): this buffer keeps no room; set it to true to provision it"
}

// Strategy is the buffer's provisioning strategy, the CRD's default when
// unset.
func Strategy(cb *autoscalingv1beta1.CapacityBuffer) string {
	if cb.Spec.ProvisioningStrategy == nil || *cb.Spec.ProvisioningStrategy == "" {
		return autoscalingv1beta1.ActiveProvisioningStrategy
	}
	return *cb.Spec.ProvisioningStrategy
}

// Resolution is a resolved buffer reference.
type Resolution struct {
	Template corev1.PodTemplateSpec
	// PodTemplate and PodTemplateGeneration are set for a podTemplateRef.
	PodTemplate           string
	PodTemplateGeneration int64
	// ScalableReplicas is the workload's replicas for a scalableRef.
	ScalableReplicas int32
}

// Resolve finds the pod template a buffer references, as Karpenter's
// apps.ResolveCapacityBuffer: podTemplateRef first, then scalableRef of
// the apps group. Its errors are *ResolveError.
func Resolve(cb *autoscalingv1beta1.CapacityBuffer, objs Objects) (Resolution, error) {
	switch {
	case cb.Spec.PodTemplateRef != nil:
		name := cb.Spec.PodTemplateRef.Name
		for _, pt := range objs.PodTemplates {
			if pt.Namespace == cb.Namespace && pt.Name == name {
				return Resolution{Template: pt.Template, PodTemplate: pt.Name, PodTemplateGeneration: pt.Generation}, nil
			}
		}
		return Resolution{}, &ResolveError{Reason: ReasonPodTemplateNotFound,
			Message: fmt.Sprintf("podtemplates %q not found in namespace %s", name, cb.Namespace)}
	case cb.Spec.ScalableRef != nil:
		return resolveScalable(cb.Namespace, cb.Spec.ScalableRef, objs)
	default:
		return Resolution{}, &ResolveError{Reason: ReasonResolutionFailed, Message: "Neither podTemplateRef nor scalableRef is set"}
	}
}

// SupportedKinds are the scalableRef kinds Karpenter v1.14.1 resolves
// (pkg/utils/apps/resolve.go:113-134), all of the apps group.
var SupportedKinds = []string{autoscalingv1beta1.KindDeployment, autoscalingv1beta1.KindReplicaSet, autoscalingv1beta1.KindStatefulSet}

func resolveScalable(ns string, ref *autoscalingv1beta1.ScalableRef, objs Objects) (Resolution, error) {
	if ref.APIGroup != "" && ref.APIGroup != "apps" {
		return Resolution{}, &ResolveError{Reason: ReasonResolutionFailed,
			Message: fmt.Sprintf("unsupported scalableRef API group %q: only apps (%v) is supported", ref.APIGroup, SupportedKinds)}
	}
	var res Resolution
	var found bool
	switch ref.Kind {
	case autoscalingv1beta1.KindDeployment:
		res, found = find(objs.Deployments, ns, ref.Name, func(d *appsv1.Deployment) (corev1.PodTemplateSpec, *int32) { return d.Spec.Template, d.Spec.Replicas })
	case autoscalingv1beta1.KindReplicaSet:
		res, found = find(objs.ReplicaSets, ns, ref.Name, func(rs *appsv1.ReplicaSet) (corev1.PodTemplateSpec, *int32) {
			return rs.Spec.Template, rs.Spec.Replicas
		})
	case autoscalingv1beta1.KindStatefulSet:
		res, found = find(objs.StatefulSets, ns, ref.Name, func(ss *appsv1.StatefulSet) (corev1.PodTemplateSpec, *int32) {
			return ss.Spec.Template, ss.Spec.Replicas
		})
	default:
		return Resolution{}, &ResolveError{Reason: ReasonResolutionFailed,
			Message: fmt.Sprintf("unsupported scalableRef kind %q: karpfunc resolves %v of the apps group", ref.Kind, SupportedKinds)}
	}
	if !found {
		return Resolution{}, &ResolveError{Reason: ReasonScalableRefNotFound, Message: fmt.Sprintf("%s %q not found in namespace %s", ref.Kind, ref.Name, ns)}
	}
	return res, nil
}

// find resolves the workload named ns/name among objs; a workload without
// spec.replicas counts 1, as the API server defaults it.
func find[T interface {
	GetNamespace() string
	GetName() string
}](objs []T, ns, name string, spec func(T) (corev1.PodTemplateSpec, *int32)) (Resolution, bool) {
	for _, obj := range objs {
		if obj.GetNamespace() == ns && obj.GetName() == name {
			template, replicas := spec(obj)
			res := Resolution{Template: template, ScalableReplicas: 1}
			if replicas != nil {
				res.ScalableReplicas = *replicas
			}
			return res, true
		}
	}
	return Resolution{}, false
}

// PercentageReplicas is ceil(scalable × percentage / 100), at least 1 when
// both are positive (Karpenter's calculatePercentageReplicas).
func PercentageReplicas(scalable, percentage int32) int32 {
	n := int32(math.Ceil(float64(scalable) * float64(percentage) / 100.0))
	if n < 1 && percentage > 0 && scalable > 0 {
		n = 1
	}
	return n
}

// Replicas combines a buffer's constraints as Karpenter's computeReplicas:
// the larger of replicas and the percentage's count, at most what fits in
// limits; limits alone when neither is set; 0 when nothing is set.
func Replicas(replicas, percent *int32, limits corev1.ResourceList, spec *corev1.PodSpec) int32 {
	var desired int32
	sized := false
	for _, c := range []*int32{replicas, percent} {
		if c != nil {
			desired = max(desired, *c)
			sized = true
		}
	}
	if len(limits) > 0 && spec != nil {
		if fit, ok := LimitReplicas(limits, spec); ok {
			if sized {
				return min(desired, fit)
			}
			return fit
		}
	}
	return desired
}

// LimitReplicas is how many chunks of spec fit in limits: the least, over
// the resources both name, of floor(limit / request). false when no
// resource overlaps (limits constrain nothing).
func LimitReplicas(limits corev1.ResourceList, spec *corev1.PodSpec) (int32, bool) {
	requests := resources.RequestsForSpec(spec)
	fit := int64(math.MaxInt32)
	matched := false
	for name, limit := range limits {
		request, ok := requests[name]
		if !ok || request.IsZero() {
			continue
		}
		matched = true
		fit = min(fit, int64(math.Floor(float64(limit.MilliValue())/float64(request.MilliValue()))))
	}
	if !matched {
		return 0, false
	}
	return int32(fit), true //nolint:gosec // at most MaxInt32
}

// VirtualPods are the buffer's placeholder pods: none unless Ready with
// replicas. Built by Karpenter's own virtualpods.BuildVirtualPods, so
// their names (capacity-buffer-<name>-<i>), UIDs and annotations are
// Karpenter's.
func (b *Buffer) VirtualPods() []*corev1.Pod {
	if !b.Ready || b.Replicas <= 0 {
		return nil
	}
	cb := b.Object.DeepCopy()
	replicas := b.Replicas
	cb.Status.Replicas = &replicas
	return virtualpods.BuildVirtualPods(cb, b.Template)
}

// AllVirtualPods are every buffer's virtual pods.
func AllVirtualPods(bufs []Buffer) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range bufs {
		out = append(out, bufs[i].VirtualPods()...)
	}
	return out
}

// IsVirtual reports whether pod is a buffer's virtual pod.
func IsVirtual(pod *corev1.Pod) bool {
	return pod != nil && pod.Annotations[autoscalingv1beta1.FakePodAnnotationKey] == autoscalingv1beta1.FakePodAnnotationValue
}

// KeyOf is the namespace/name of the buffer a virtual pod belongs to, ""
// for any other pod.
func KeyOf(pod *corev1.Pod) string {
	if !IsVirtual(pod) {
		return ""
	}
	return pod.Annotations[autoscalingv1beta1.BufferNamespaceAnnotation] + "/" + pod.Annotations[autoscalingv1beta1.BufferNameAnnotation]
}

// Room is where one buffer's virtual pods went in a pass.
type Room struct {
	// Existing: on existing nodes or in-flight NodeClaims.
	Existing int
	// New: on NodeClaims the pass creates.
	New int
	// Failed: nowhere; Why is the first reason.
	Failed int
	Why    string
	// Nodes are the node (or in-flight NodeClaim) names holding Existing.
	Nodes []string
}

// Status writes b into cb's status: replicas, the resolved PodTemplate,
// the strategy and ReadyForProvisioning; then the Provisioning condition
// from room (nil: no pass placed its pods, leave Provisioning as it is,
// as Karpenter does). now stamps changed conditions.
func Status(cb *autoscalingv1beta1.CapacityBuffer, b *Buffer, room *Room, now metav1.Time) {
	cb.Status.ProvisioningStrategy = cb.Spec.ProvisioningStrategy
	if b.Ready {
		replicas := b.Replicas
		cb.Status.Replicas = &replicas
		if b.PodTemplate != "" {
			cb.Status.PodTemplateRef = &autoscalingv1beta1.LocalObjectRef{Name: b.PodTemplate}
			generation := b.PodTemplateGeneration
			cb.Status.PodTemplateGeneration = &generation
		} else {
			cb.Status.PodTemplateRef, cb.Status.PodTemplateGeneration = nil, nil
		}
	}
	setCondition(cb, autoscalingv1beta1.ReadyForProvisioningCondition, b.Ready, b.Reason, b.Message, now)
	if cond := provisioning(b, room); cond != nil {
		setCondition(cb, autoscalingv1beta1.ProvisioningCondition, cond.Status == metav1.ConditionTrue, cond.Reason, cond.Message, now)
	}
}

func setCondition(cb *autoscalingv1beta1.CapacityBuffer, kind string, ok bool, reason, message string, now metav1.Time) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(&cb.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason,
		Message: message, ObservedGeneration: cb.Generation, LastTransitionTime: now})
}

// provisioning is the Provisioning condition Karpenter's
// computeProvisioningCondition writes (pkg/controllers/provisioning/
// buffers.go:146-194), nil when it writes none.
func provisioning(b *Buffer, room *Room) *metav1.Condition {
	switch {
	case !b.Ready:
		return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonNotReadyForProvisioning,
			Message: "Buffer is not ReadyForProvisioning: " + b.Message}
	case b.Replicas == 0:
		return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonBufferEmpty, Message: "Buffer has zero desired replicas"}
	case room == nil:
		return nil
	case room.New > 0 || room.Failed > 0:
		message := fmt.Sprintf("%d/%d virtual pods required new capacity, %d failed", room.New, b.Replicas, room.Failed)
		if room.Why != "" {
			message += ": " + room.Why
		}
		return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonRequiresNewCapacity, Message: message}
	case room.Existing == int(b.Replicas):
		return &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonFitsExistingCapacity,
			Message: fmt.Sprintf("All %d virtual pods fit on existing capacity", b.Replicas)}
	}
	return nil
}
