// Package v1beta1 holds karpenter.azure.com/v1beta1, the AKSNodeClass: the
// Azure-specific half of a NodePool (subnet, OS disk, image family, kubelet),
// with the same field names as the Azure Karpenter provider so manifests
// written for NAP apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.azure.com
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const Group = "karpenter.azure.com"

var (
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}
	SchemeBuilder      = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &AKSNodeClass{}, &AKSNodeClassList{})
		return nil
	})
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		metav1AddToGroupVersion(s)
		return nil
	})
}
