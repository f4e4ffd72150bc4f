package lifecycle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// TestLaunchRequestCarriesNodeClassSecurityAndSysctls: the AKSNodeClass
// fields karpfunc implements reach the launch request.
func TestLaunchRequestCarriesNodeClassSecurityAndSysctls(t *testing.T) {
	on := true
	maxMap := int32(262144)
	nc := &v1beta1.AKSNodeClass{Spec: v1beta1.AKSNodeClassSpec{
		Security:      &v1beta1.Security{EncryptionAtHost: &on},
		LinuxOSConfig: &v1beta1.LinuxOSConfiguration{Sysctls: &v1beta1.SysctlConfiguration{VMMaxMapCount: &maxMap}},
	}}
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{karpv1.NodePoolLabelKey: "p"}}}
	choice := Choice{InstanceType: &catalog.InstanceType{Name: "Standard_D2s_v5"}, Offering: catalog.Offering{Zone: "eastus-1", CapacityType: "on-demand"}}
	req := (&launcher{}).launchRequest(claim, nc.DefaultedSpec(), choice)
	if !req.EncryptionAtHost {
		t.Error("EncryptionAtHost not carried to the launch request")
	}
	if req.Sysctls == nil || req.Sysctls.VMMaxMapCount == nil || *req.Sysctls.VMMaxMapCount != maxMap {
		t.Errorf("Sysctls = %+v; want vmMaxMapCount %d", req.Sysctls, maxMap)
	}
	plain := (&launcher{}).launchRequest(claim, (&v1beta1.AKSNodeClass{}).DefaultedSpec(), choice)
	if plain.EncryptionAtHost || plain.Sysctls != nil {
		t.Errorf("a class without security or linuxOSConfig gave EncryptionAtHost=%v Sysctls=%+v", plain.EncryptionAtHost, plain.Sysctls)
	}
}
