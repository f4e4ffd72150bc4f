package scheduler_test

import (
	"testing"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// A class without maxPods plans the cluster network's default: 30 pods a
// node on the node subnet (AKS's default there), 250 on overlay; a class's
// own maxPods wins.
func TestDefaultMaxPodsFollowsTheNetwork(t *testing.T) {
	cat, err := catalog.Parse([]byte(`{"region":"test","zones":["test-1"],"instanceTypes":[
 {"name":"big","architecture":"amd64","hyperVGenerations":["V2"],"capacity":{"cpu":"64","memory":"256Gi"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":1}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		classMaxPods   int32
		defaultMaxPods int32
		want           int // NodeClaims for 60 small pods
	}{
		{"overlay default", 0, 250, 1},
		{"node subnet default", 0, 30, 2},
		{"no default given", 0, 0, 1},
		{"the class's own wins", 60, 30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scheduler.Solve(scheduler.Input{Pods: pods(60, "10m", "10Mi"), NodePools: []*karpv1.NodePool{nodePool("general", "default")},
				NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", tc.classMaxPods)}, Catalog: cat, DefaultMaxPods: tc.defaultMaxPods})
			expectClaims(t, r, tc.want)
		})
	}
}
