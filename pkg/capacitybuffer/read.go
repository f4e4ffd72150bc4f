package capacitybuffer

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
)

// ReadError names what could not be read and keeps the cause.
type ReadError struct {
	What string
	error
}

func (e *ReadError) Error() string { return fmt.Sprintf("reading %s: %v", e.What, e.error) }
func (e *ReadError) Unwrap() error { return e.error }

// Read lists every CapacityBuffer and gets the objects they reference (one
// GET each; a reference not found is left out, and Evaluate says so in
// the buffer's status). A cluster without the CapacityBuffer CRD has no
// buffers.
func Read(ctx context.Context, kube client.Reader) ([]*autoscalingv1beta1.CapacityBuffer, Objects, error) {
	var list autoscalingv1beta1.CapacityBufferList
	if err := kube.List(ctx, &list); err != nil {
		if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, Objects{}, nil
		}
		return nil, Objects{}, &ReadError{What: "capacitybuffers", error: err}
	}
	var objs Objects
	cbs := make([]*autoscalingv1beta1.CapacityBuffer, 0, len(list.Items))
	seen := map[string]bool{}
	for i := range list.Items {
		cb := &list.Items[i]
		cbs = append(cbs, cb)
		obj, what := referenced(cb)
		if obj == nil || seen[what] {
			continue
		}
		seen[what] = true
		key := types.NamespacedName{Namespace: cb.Namespace, Name: obj.GetName()}
		if err := kube.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, Objects{}, &ReadError{What: what, error: err}
		}
		switch o := obj.(type) {
		case *corev1.PodTemplate:
			objs.PodTemplates = append(objs.PodTemplates, o)
		case *appsv1.Deployment:
			objs.Deployments = append(objs.Deployments, o)
		case *appsv1.ReplicaSet:
			objs.ReplicaSets = append(objs.ReplicaSets, o)
		case *appsv1.StatefulSet:
			objs.StatefulSets = append(objs.StatefulSets, o)
		}
	}
	return cbs, objs, nil
}

// referenced is an empty object of the kind cb references, named, and a
// description; nil when the reference is of no kind karpfunc resolves.
func referenced(cb *autoscalingv1beta1.CapacityBuffer) (client.Object, string) {
	var obj client.Object
	switch {
	case cb.Spec.PodTemplateRef != nil:
		obj = &corev1.PodTemplate{}
		obj.SetName(cb.Spec.PodTemplateRef.Name)
	case cb.Spec.ScalableRef != nil && (cb.Spec.ScalableRef.APIGroup == "" || cb.Spec.ScalableRef.APIGroup == "apps"):
		switch cb.Spec.ScalableRef.Kind {
		case autoscalingv1beta1.KindDeployment:
			obj = &appsv1.Deployment{}
		case autoscalingv1beta1.KindReplicaSet:
			obj = &appsv1.ReplicaSet{}
		case autoscalingv1beta1.KindStatefulSet:
			obj = &appsv1.StatefulSet{}
		default:
			return nil, ""
		}
		obj.SetName(cb.Spec.ScalableRef.Name)
	default:
		return nil, ""
	}
	return obj, fmt.Sprintf("%T %s/%s", obj, cb.Namespace, obj.GetName())
}
