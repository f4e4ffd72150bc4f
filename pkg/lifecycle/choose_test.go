package lifecycle

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

const testCatalog = `{"region":"eastus","zones":["eastus-1","eastus-2"],"instanceTypes":[
 {"name":"small","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.10,"available":true},
               {"zone":"eastus-1","capacityType":"spot","price":0.02,"available":true},
               {"zone":"eastus-2","capacityType":"on-demand","price":0.09,"available":true}]},
 {"name":"large","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.40,"available":true},
               {"zone":"eastus-2","capacityType":"spot","price":0.08,"available":false}]}]}`

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func TestChoose(t *testing.T) {
	cat, err := catalog.Parse([]byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	both := req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small", "large")
	tests := []struct {
		name     string
		reqs     []karpv1.NodeSelectorRequirementWithMinValues
		cpu      string
		wantType string
		wantZone string
		wantCap  string
		wantErr  string
	}{
		{"cheapest overall is small spot", []karpv1.NodeSelectorRequirementWithMinValues{both}, "1", "small", "eastus-1", "spot", ""},
		{"on-demand only picks the cheaper zone", []karpv1.NodeSelectorRequirementWithMinValues{both,
			req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand")}, "1", "small", "eastus-2", "on-demand", ""},
		{"requests too big for small", []karpv1.NodeSelectorRequirementWithMinValues{both}, "4", "large", "eastus-1", "on-demand", ""},
		{"unavailable offering is skipped", []karpv1.NodeSelectorRequirementWithMinValues{both,
			req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eastus-2")}, "4", "", "", "", "no available offering"},
		{"instance type not allowed", []karpv1.NodeSelectorRequirementWithMinValues{
			req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small")}, "3", "", "", "", "fits its requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}, Spec: karpv1.NodeClaimSpec{
				Requirements: tt.reqs,
				Resources:    karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tt.cpu)}},
			}}
			got, err := Choose(cat, nc, 110)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.InstanceType.Name != tt.wantType || got.Offering.Zone != tt.wantZone || got.Offering.CapacityType != tt.wantCap {
				t.Errorf("chose %s %s %s; want %s %s %s", got.InstanceType.Name, got.Offering.Zone, got.Offering.CapacityType, tt.wantType, tt.wantZone, tt.wantCap)
			}
		})
	}
}
