package disruption

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

// TestStaticDrift: a static NodePool's drifted nodes are replaced one for
// one by pod-less NodeClaims of the pool, launched first, within the
// pool's budget for Drifted, only while the pool holds no more NodeClaims
// than replicas, and within limits.nodes; ordinary drift leaves them.
func TestStaticDrift(t *testing.T) {
	static := func(f *fixture, replicas int64, budget string) {
		f.np.Spec.Replicas = &replicas
		f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: budget}}
	}
	drift := func(f *fixture) { f.np.Spec.Template.Labels = map[string]string{"tier": "two"} }
	nodeLimit := func(f *fixture, n string) {
		f.np.Spec.Limits = karpv1.Limits{corev1.ResourceName("nodes"): resource.MustParse(n)}
	}
	for _, tc := range []struct {
		name  string
		build func(f *fixture)
		// method of the command ("" none) and its candidates, each
		// replaced by one pod-less NodeClaim of the pool.
		method     string
		candidates []string
		expired    []string
		refusal    map[string]string // node -> substring of its refusal
	}{
		{name: "a pool of 2 with a budget of 1: one node replaced, the other waits for the budget", build: func(f *fixture) {
			static(f, 2, "1")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, method: MethodStaticDrift, candidates: []string{"a"},
			refusal: map[string]string{"b": "drifted (NodePoolDrifted) but the NodePool's budget for Drifted allows no more disruptions now"}},
		{name: "a budget of 100%: both nodes at once, each by its own replacement", build: func(f *fixture) {
			static(f, 2, "100%")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, method: MethodStaticDrift, candidates: []string{"a", "b"}},
		{name: "a node with pods is replaced by a pod-less NodeClaim, pending pods or not", build: func(f *fixture) {
			static(f, 1, "1")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("web", "a", 3, "1", "2Gi")
			f.pod("pending", "", "1", "2Gi")
			drift(f)
		}, method: MethodStaticDrift, candidates: []string{"a"}},
		{name: "no budget for Drifted: nothing is replaced", build: func(f *fixture) {
			static(f, 2, "0")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, refusal: map[string]string{"a": "budget for Drifted allows no more", "b": "budget for Drifted allows no more"}},
		{name: "more NodeClaims than replicas: drift waits for the scale-down", build: func(f *fixture) {
			static(f, 1, "100%")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, refusal: map[string]string{"a": "more than its replicas (1): drift waits until it is scaled down", "b": "more than its replicas (1)"}},
		{name: "a node being replaced counts toward replicas: the next waits", build: func(f *fixture) {
			static(f, 2, "100%")
			a := f.node("a", "Standard_D4s_v5", "on-demand")
			a.UID = "uid-a"
			f.node("b", "Standard_D4s_v5", "on-demand")
			f.node("r", "Standard_D4s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.Annotations[apis.AnnotationDisruptionCandidates] = "a=uid-a"
				nc.Status.Conditions = nil // launching: not yet a candidate
			})
			drift(f)
		}, refusal: map[string]string{"b": "static NodePool general has 3 NodeClaims counting those being replaced, more than its replicas (2)"}},
		{name: "limits.nodes at replicas leaves no room for a replacement", build: func(f *fixture) {
			static(f, 2, "100%")
			nodeLimit(f, "2")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, refusal: map[string]string{"a": "limits.nodes (2) leaves no room for a replacement: the NodePool has 2 NodeClaims (0 being deleted)"}},
		{name: "limits.nodes one above replicas: one node at a time", build: func(f *fixture) {
			static(f, 2, "100%")
			nodeLimit(f, "3")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			drift(f)
		}, method: MethodStaticDrift, candidates: []string{"a"}, refusal: map[string]string{"b": "limits.nodes (3) leaves no room"}},
		{name: "a NodeClaim being deleted counts against limits.nodes", build: func(f *fixture) {
			static(f, 2, "100%")
			nodeLimit(f, "3")
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand")
			f.node("gone", "Standard_D4s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
			})
			drift(f)
		}, refusal: map[string]string{"a": "the NodePool has 3 NodeClaims (1 being deleted)"}},
		{name: "a static node that has not drifted is never consolidated", build: func(f *fixture) {
			static(f, 1, "100%")
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("web", "a", 1, "1", "2Gi")
		}, refusal: map[string]string{"a": "NodePool is static (spec.replicas): its nodes are never consolidated"}},
		{name: "an expired static node is expired, not replaced by drift", build: func(f *fixture) {
			static(f, 2, "100%")
			f.node("a", "Standard_D4s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
			})
			f.node("b", "Standard_D4s_v5", "on-demand")
		}, expired: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			d := f.decide()
			switch {
			case tc.method == "" && d.Command != nil:
				t.Fatalf("command %s, want none; refusals %+v", d.Command, d.Refusals)
			case tc.method != "" && (d.Command == nil || d.Command.Method != tc.method):
				t.Fatalf("command %v, want %s; refusals %+v", d.Command, tc.method, d.Refusals)
			}
			if cmd := d.Command; cmd != nil {
				if got := names(cmd.Candidates); !slices.Equal(got, tc.candidates) {
					t.Errorf("candidates %v, want %v", got, tc.candidates)
				}
				if cmd.Reason != ReasonDrifted {
					t.Errorf("reason %s, want %s (the budget it spends)", cmd.Reason, ReasonDrifted)
				}
				if len(cmd.Replacements) != len(cmd.Candidates) {
					t.Errorf("%d replacements for %d candidates, want one each", len(cmd.Replacements), len(cmd.Candidates))
				}
				for i, r := range cmd.Replacements {
					if r.NodePool.Name != "general" || len(r.Pods) != 0 || len(r.InstanceTypes) == 0 {
						t.Errorf("replacement %d: NodePool %s, %d pods, %d instance types; want a pod-less NodeClaim of general", i, r.NodePool.Name, len(r.Pods), len(r.InstanceTypes))
					}
				}
				if len(cmd.Existing) != 0 {
					t.Errorf("the command places pods on existing nodes (%d placements); a static replacement is for the pool, not for the pods", len(cmd.Existing))
				}
			}
			var expired []string
			for _, nc := range d.Expired {
				expired = append(expired, nc.Name)
			}
			if !slices.Equal(expired, tc.expired) {
				t.Errorf("expired %v, want %v", expired, tc.expired)
			}
			for node, sub := range tc.refusal {
				if r := refusalOf(d, node); !strings.Contains(r, sub) {
					t.Errorf("refusal for %s = %q, want it to contain %q", node, r, sub)
				}
			}
		})
	}
}
