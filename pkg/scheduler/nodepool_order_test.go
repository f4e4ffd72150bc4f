package scheduler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestNodePoolOrder: NodePools are tried by weight, heaviest first, and
// equal weights by name descending, as Karpenter's
// utils/nodepool.OrderByWeight orders them (v1.14.1 nodepool.go:161-171),
// so a user moving from Karpenter gets the same pool for the same pod.
func TestNodePoolOrder(t *testing.T) {
	small := req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small")
	medium := req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "medium")
	for _, tc := range []struct {
		name  string
		pools func() []*karpv1.NodePool
		want  string
	}{
		{
			name: "equal weights: the name last in order wins",
			pools: func() []*karpv1.NodePool {
				return []*karpv1.NodePool{nodePool("alpha", "default", small), nodePool("beta", "default", medium)}
			},
			want: "beta",
		},
		{
			name: "equal weights listed in the other order",
			pools: func() []*karpv1.NodePool {
				return []*karpv1.NodePool{nodePool("beta", "default", medium), nodePool("alpha", "default", small)}
			},
			want: "beta",
		},
		{
			name: "weight before name",
			pools: func() []*karpv1.NodePool {
				alpha := nodePool("alpha", "default", small)
				alpha.Spec.Weight = new(int32(5))
				return []*karpv1.NodePool{alpha, nodePool("beta", "default", medium)}
			},
			want: "alpha",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput(t, pod("a", "1", "1Gi"))
			in.NodePools = tc.pools()
			r := scheduler.Solve(in)
			expectClaims(t, r, 1)
			if got := r.NewNodeClaims[0].NodePool.Name; got != tc.want {
				t.Errorf("NodePool %s, want %s", got, tc.want)
			}
		})
	}
}
