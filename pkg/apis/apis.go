// Package apis gathers the API types karpfunc serves and reads: the
// karpenter.sh/v1 NodePool and NodeClaim exactly as sigs.k8s.io/karpenter ships
// them, and our karpenter.azure.com/v1beta1 AKSNodeClass.
package apis

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	karpenterapis "sigs.k8s.io/karpenter/pkg/apis"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.0 object crd paths=./... output:crd:artifacts:config=crds

//go:embed crds/karpenter.azure.com_aksnodeclasses.yaml
var aksNodeClassCRD []byte

// Scheme knows the built-in Kubernetes types, karpenter.sh/v1 and
// karpenter.azure.com/v1beta1.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	// karpenter.sh/v1 registers itself only into client-go's global scheme;
	// register the same kinds here so callers never depend on that global.
	gv := schema.GroupVersion{Group: karpenterapis.Group, Version: "v1"}
	metav1.AddToGroupVersion(Scheme, gv)
	Scheme.AddKnownTypes(gv, &karpv1.NodePool{}, &karpv1.NodePoolList{}, &karpv1.NodeClaim{}, &karpv1.NodeClaimList{})
	alpha := schema.GroupVersion{Group: karpenterapis.Group, Version: "v1alpha1"}
	metav1.AddToGroupVersion(Scheme, alpha)
	Scheme.AddKnownTypes(alpha, &v1alpha1.NodeOverlay{}, &v1alpha1.NodeOverlayList{})
	// CapacityBuffer (autoscaling.x-k8s.io/v1beta1), as Karpenter ships it.
	buffers := schema.GroupVersion{Group: autoscalingv1beta1.Group, Version: "v1beta1"}
	metav1.AddToGroupVersion(Scheme, buffers)
	Scheme.AddKnownTypes(buffers, &autoscalingv1beta1.CapacityBuffer{}, &autoscalingv1beta1.CapacityBufferList{})
	utilruntime.Must(v1beta1.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
}

// CRDs returns the CRDs a cluster needs: NodePool, NodeClaim, NodeOverlay
// and CapacityBuffer read unchanged from the sigs.k8s.io/karpenter module,
// and AKSNodeClass.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := []*apiextensionsv1.CustomResourceDefinition{}
	for _, raw := range [][]byte{karpenterapis.NodePoolCRD, karpenterapis.NodeClaimCRD, karpenterapis.NodeOverlayCRD, aksNodeClassCRD, karpenterapis.CapacityBufferCRD} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD: %w", err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// CRDFiles are the same CRDs as YAML exactly as shipped, by file name: what
// `make generate` copies into the relay chart's crds/ directory.
func CRDFiles() map[string][]byte {
	return map[string][]byte{
		"karpenter.sh_nodepools.yaml":               karpenterapis.NodePoolCRD,
		"karpenter.sh_nodeclaims.yaml":              karpenterapis.NodeClaimCRD,
		"karpenter.sh_nodeoverlays.yaml":            karpenterapis.NodeOverlayCRD,
		"karpenter.azure.com_aksnodeclasses.yaml":   aksNodeClassCRD,
		"autoscaling.x-k8s.io_capacitybuffers.yaml": karpenterapis.CapacityBufferCRD,
	}
}
