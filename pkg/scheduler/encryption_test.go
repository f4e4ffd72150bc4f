package scheduler_test

import (
	"slices"
	"strings"
	"testing"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// eahCatalog: the cheapest size lacks encryption at host, the next has it,
// and the dearest does not say.
const eahCatalog = `{"region":"test","zones":["test-1"],"instanceTypes":[
 {"name":"noeah","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},"encryptionAtHostSupported":false,
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.01}]},
 {"name":"eah","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},"encryptionAtHostSupported":true,
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.10}]},
 {"name":"unknown","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.20}]}]}`

// TestEncryptionAtHostSizes: a class with encryptionAtHost never launches
// a size whose EncryptionAtHostSupported capability is False, as the Azure
// provider filters them; without it the cheapest size is fine.
func TestEncryptionAtHostSizes(t *testing.T) {
	cat, err := catalog.Parse([]byte(eahCatalog))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		eah       bool
		want, not string
	}{
		{"encryption at host", true, "eah", "noeah"},
		{"no encryption at host", false, "noeah", ""},
	} {
		class := nodeClass("default", 0)
		class.Spec.Security = &v1beta1.Security{EncryptionAtHost: &tc.eah}
		r := scheduler.Solve(scheduler.Input{Pods: pods(1, "1", "1Gi"), NodePools: []*karpv1.NodePool{nodePool("general", "default")},
			NodeClasses: []*v1beta1.AKSNodeClass{class}, Catalog: cat})
		expectClaims(t, r, 1)
		names := typeNames(r.NewNodeClaims[0])
		cheapest, _ := r.NewNodeClaims[0].Cheapest()
		if cheapest.Name != tc.want || slices.Contains(strings.Split(names, ","), tc.not) {
			t.Errorf("%s: claim may launch %s (cheapest %s); want cheapest %s and never %q", tc.name, names, cheapest.Name, tc.want, tc.not)
		}
	}
}
