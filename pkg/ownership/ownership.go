// Package ownership is karpfunc's mark on what it creates, and the one test
// of whether karpfunc may act on an object.
//
// karpfunc shares the karpenter.sh API and the node resource group's tag
// names with the Azure Karpenter provider (NAP): their NodeClaims, VMs and
// NICs look like ours. So karpfunc marks its NodeClaims with the annotation
// apis.AnnotationManagedBy and its VMs and NICs with the Azure tag pkg/azure.TagManagedBy, and acts
// (launches, registers, finalizes, deletes, garbage-collects) only on what
// carries the mark. Others' NodeClaims still count as capacity when pods are
// placed: they are real nodes, or will be.
package ownership

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

const (
	// Value is the mark's value, on NodeClaims and in Azure tags.
	Value = "karpfunc"
)

// Mark puts karpfunc's mark on obj, replacing any value a template gave it.
func Mark(obj metav1.Object) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[apis.AnnotationManagedBy] = Value
	obj.SetAnnotations(annotations)
}

// Owns reports whether obj carries karpfunc's mark.
func Owns(obj metav1.Object) bool { return obj.GetAnnotations()[apis.AnnotationManagedBy] == Value }
