package scheduler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestRequiredLabelPresence: a node selector or required node affinity
// that asks a label to have a value (In, Exists, Gt, Lt) is never met by a
// node without that label, even when it is combined with terms that
// alone admit a missing label (NotIn, or a preference whose values
// conflict): Karpenter's Requirements keep only the combined set, which
// for "Exists and NotIn [b]" reads as NotIn [b] and for "In [web] and In
// [batch]" as DoesNotExist, and both pass for a label the NodePool does
// not define. The node launched would not carry the label and the pod
// would stay pending.
func TestRequiredLabelPresence(t *testing.T) {
	teamExistsNotB := func() *corev1.Pod {
		return withAffinity(pod("p", "1", "1Gi"), []corev1.NodeSelectorRequirement{
			req("team", corev1.NodeSelectorOpExists), req("team", corev1.NodeSelectorOpNotIn, "b")})
	}
	webPreferringBatch := func() *corev1.Pod {
		p := pod("p", "1", "1Gi")
		p.Spec.NodeSelector = map[string]string{"workload": "web"}
		return preferNode(p, 10, req("workload", corev1.NodeSelectorOpIn, "batch"))
	}
	labeledPool := func(name, key, value string) *karpv1.NodePool {
		np := nodePool(name, "default")
		np.Spec.Template.Labels = map[string]string{key: value}
		return np
	}
	for _, tc := range []struct {
		name  string
		input func(t *testing.T) scheduler.Input
		// wantPool is the NodePool of the one claim; "" wants the pod
		// pending with a reason naming wantReason.
		wantPool, wantReason string
	}{
		{
			name:       "Exists and NotIn on a NodePool without the label",
			input:      func(t *testing.T) scheduler.Input { return baseInput(t, teamExistsNotB()) },
			wantReason: `"team"`,
		},
		{
			name: "Exists and NotIn go to the NodePool that sets the label",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, teamExistsNotB())
				in.NodePools = append(in.NodePools, labeledPool("a-team", "team", "a"))
				return in
			},
			wantPool: "a-team",
		},
		{
			name: "Exists and NotIn do not take a NodePool whose value is excluded",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, teamExistsNotB())
				in.NodePools = []*karpv1.NodePool{labeledPool("b-team", "team", "b")}
				return in
			},
			wantReason: "team",
		},
		{
			name:       "a preference conflicting with the node selector on a NodePool without the label",
			input:      func(t *testing.T) scheduler.Input { return baseInput(t, webPreferringBatch()) },
			wantReason: `"workload"`,
		},
		{
			name: "a preference conflicting with the node selector is relaxed",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, webPreferringBatch())
				in.NodePools = append(in.NodePools, labeledPool("a-web", "workload", "web"))
				return in
			},
			wantPool: "a-web",
		},
		{
			name: "an existing node without the label is passed over",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, teamExistsNotB())
				node, _ := existingNode("node-1", "test-1")
				in.Nodes = []*corev1.Node{node}
				in.NodePools = append(in.NodePools, labeledPool("a-team", "team", "a"))
				return in
			},
			wantPool: "a-team",
		},
		{
			name: "NotIn alone admits a node without the label",
			input: func(t *testing.T) scheduler.Input {
				return baseInput(t, withAffinity(pod("p", "1", "1Gi"), []corev1.NodeSelectorRequirement{req("team", corev1.NodeSelectorOpNotIn, "b")}))
			},
			wantPool: "general",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scheduler.Solve(tc.input(t))
			if tc.wantPool == "" {
				if len(r.NewNodeClaims) > 0 || len(r.Existing) > 0 {
					t.Fatalf("%d new claims (first in %s), %d existing placements; want the pod pending", len(r.NewNodeClaims), poolOf(r), len(r.Existing))
				}
				expectUnschedulable(t, r, tc.wantReason)
				return
			}
			if len(r.Existing) > 0 {
				t.Fatalf("placed on existing node %s, want a new claim in %s", r.Existing[0].Node, tc.wantPool)
			}
			expectClaims(t, r, 1)
			if got := poolOf(r); got != tc.wantPool {
				t.Errorf("claim in NodePool %s, want %s", got, tc.wantPool)
			}
		})
	}
}

func poolOf(r scheduler.Result) string {
	var names []string
	for _, nc := range r.NewNodeClaims {
		names = append(names, nc.NodePool.Name)
	}
	return strings.Join(names, ",")
}
