package disruption

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// A control-plane upgrade across an operating-system boundary is image
// drift: imageFamily Ubuntu boots 22.04 before 1.34 and 24.04 from it,
// AzureLinux 2.0 before 1.32 and 3.0 from it. Within one definition the
// node is judged on its version only.
func TestDefinitionDriftAcrossVersions(t *testing.T) {
	id := func(def string) string {
		gallery := nodeimage.UbuntuGallery
		if def[0] == 'V' {
			gallery = nodeimage.AzureLinuxGallery
		}
		return "/CommunityGalleries/" + gallery + "/images/" + def + "/versions/" + nodeimage.ExampleVersion
	}
	for _, tc := range []struct {
		name, family, booted, kube string
		want                       string
	}{
		{"Ubuntu 22.04 node, control plane still 1.33", "Ubuntu", "2204gen2containerd", "1.33.2", ""},
		{"Ubuntu 22.04 node, control plane now 1.34", "Ubuntu", "2204gen2containerd", "1.34.0", DriftImage},
		{"Ubuntu 24.04 node at 1.37", "Ubuntu", "2404gen2containerd", "1.37.2", ""},
		{"arm64 Ubuntu 22.04 node at 1.34", "Ubuntu", "2204gen2arm64containerd", "1.34.0", DriftImage},
		{"Ubuntu2204 pinned family at 1.33", "Ubuntu2204", "2204gen2containerd", "1.33.9", ""},
		{"Ubuntu2204 at 1.34: not offered, not judged", "Ubuntu2204", "2204gen2containerd", "1.34.0", ""},
		{"Azure Linux 2 node, control plane now 1.32", "AzureLinux", "V2gen2", "1.32.0", DriftImage},
		{"no control-plane version known", "Ubuntu", "2204gen2containerd", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			family := tc.family
			class := &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v1beta1.AKSNodeClassSpec{ImageFamily: &family}}
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: "default"}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			nc.Status.ImageID = id(tc.booted)
			want := desired{classes: map[string]classInfo{"default": {hash: NodeClassHash(class), family: family}},
				versions: Versions{Kubernetes: tc.kube}}
			if got := drift(nc, nil, np, want); got != tc.want {
				t.Errorf("drift = %q, want %q", got, tc.want)
			}
		})
	}
}
