package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestDecide(t *testing.T) {
	type want struct {
		method     string // "" = no command
		candidates []string
		replace    bool
		expired    []string
		refusal    map[string]string // node -> substring of its refusal
		minSavings float64
	}
	for _, tc := range []struct {
		name  string
		build func(f *fixture)
		want  want
	}{
		{"an empty node is deleted by emptiness", func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("web", "a", 3, "1", "2Gi")
			f.node("b", "Standard_D4s_v5", "on-demand")
		}, want{method: "emptiness", candidates: []string{"b"}}},
		{"two underused nodes become one cheaper node", func(f *fixture) {
			f.node("a", "Standard_D8s_v5", "on-demand")
			f.pods("a", "a", 2, "1", "2Gi")
			f.node("b", "Standard_D8s_v5", "on-demand")
			f.pods("b", "b", 2, "1", "2Gi")
		}, want{method: "multi-node consolidation", candidates: []string{"a", "b"}, replace: true, minSavings: 0.3}},
		{"pods that fit on the rest of the fleet: the node is deleted", func(f *fixture) {
			f.node("a", "Standard_D8s_v5", "on-demand")
			f.pods("a", "a", 4, "1", "2Gi")
			f.pod("stay", "a", "100m", "128Mi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })
			f.node("b", "Standard_D8s_v5", "on-demand")
			f.pods("b", "b", 2, "1", "2Gi")
		}, want{method: "single-node consolidation", candidates: []string{"b"}, minSavings: 0.38}},
		{"one big underused node is replaced by one cheaper node", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{method: "single-node consolidation", candidates: []string{"a"}, replace: true, minSavings: 0.5}},
		{"a well-packed fleet is left alone", func(f *fixture) {
			f.node("a", "Standard_D4as_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.node("b", "Standard_D4as_v5", "on-demand")
			f.pods("b", "b", 3, "1", "4Gi")
		}, want{refusal: map[string]string{"a": "", "b": ""}}},
		{"a do-not-disrupt pod blocks its node", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pod("keep", "a", "1", "2Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })
		}, want{refusal: map[string]string{"a": "do-not-disrupt"}}},
		{"a do-not-disrupt duration not yet elapsed blocks", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pod("keep", "a", "1", "2Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "2h"} })
		}, want{refusal: map[string]string{"a": "do-not-disrupt until 2026-12-01T13:00:00Z"}}},
		{"an elapsed do-not-disrupt duration does not block", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pod("keep", "a", "1", "2Gi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "30m"} })
		}, want{method: "single-node consolidation", candidates: []string{"a"}, replace: true}},
		{"a node annotated do-not-disrupt is blocked", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand", func(_ *karpv1.NodeClaim, n *corev1.Node) {
				n.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			})
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "node has the karpenter.sh/do-not-disrupt"}}},
		{"a PDB that allows no disruption blocks", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
			one := intstr.FromInt32(1)
			f.c.PodDisruptionBudgets = append(f.c.PodDisruptionBudgets, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
				Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}})
		}, want{refusal: map[string]string{"a": "pdb default/web prevents pod evictions"}}},
		{"a pod no other capacity can take keeps its node", func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pod("pinned", "a", "1", "2Gi", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "a"} })
		}, want{refusal: map[string]string{"a": "could not go anywhere else"}}},
		{"consolidateAfter not yet passed since the last pod event", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-30 * time.Second))
			})
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "not consolidatable until 2026-12-01T12:00:30Z"}}},
		{"consolidateAfter Never", func(f *fixture) {
			f.np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
			f.node("a", "Standard_D16s_v5", "on-demand")
		}, want{refusal: map[string]string{"a": "consolidateAfter is Never"}}},
		{"WhenEmpty leaves underused nodes alone", func(f *fixture) {
			f.np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "WhenEmpty"}}},
		{"a zero budget stops emptiness", func(f *fixture) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
			f.node("a", "Standard_D4s_v5", "on-demand")
		}, want{refusal: map[string]string{"a": "budget for Empty"}}},
		{"a budget for Drifted only does not stop emptiness", func(f *fixture) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}}
			f.node("a", "Standard_D4s_v5", "on-demand")
		}, want{method: "emptiness", candidates: []string{"a"}}},
		{"a node NotReady counts against the budget", func(f *fixture) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.node("b", "Standard_D4s_v5", "on-demand", func(_ *karpv1.NodeClaim, n *corev1.Node) {
				n.Status.Conditions[0].Status = corev1.ConditionFalse
			})
			f.pods("b", "b", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "budget for Empty", "b": "not Ready"}}},
		{"a spot node is not replaced by spot without SpotToSpot", func(f *fixture) {
			f.np.Spec.Template.Spec.Requirements[2].Values = []string{"spot", "on-demand"}
			f.node("a", "Standard_D16s_v5", "spot")
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "SpotToSpotConsolidation is disabled"}}},
		{"an on-demand node may be replaced by spot", func(f *fixture) {
			f.np.Spec.Template.Spec.Requirements[2].Values = []string{"spot", "on-demand"}
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{method: "single-node consolidation", candidates: []string{"a"}, replace: true}},
		{"a changed NodePool template drifts its nodes", func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, want{method: "drift", candidates: []string{"a"}, replace: true}},
		{"requirements that no longer allow the node drift it", func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Spec.Requirements[0].Values = []string{"E"}
		}, want{method: "drift", candidates: []string{"a"}, replace: true}},
		{"expireAfter passed: expired, whatever the budget", func(f *fixture) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
			f.node("a", "Standard_D4s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.Spec.ExpireAfter = karpv1.MustParseNillableDuration("1h")
			})
			f.pods("a", "a", 3, "1", "4Gi")
		}, want{expired: []string{"a"}}},
		{"Balanced refuses a move that saves little for its disruption", func(f *fixture) {
			f.np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyBalanced
			f.node("f", "Standard_D16as_v5", "on-demand")
			f.pod("big", "f", "15", "56Gi")
			f.node("e", "Standard_D8s_v5", "on-demand")
			f.pods("e", "e", 30, "50m", "256Mi")
		}, want{refusal: map[string]string{"e": "Balanced: score"}}},
		{"the same move under WhenEmptyOrUnderutilized is made", func(f *fixture) {
			f.node("f", "Standard_D16as_v5", "on-demand")
			f.pod("big", "f", "15", "56Gi")
			f.node("e", "Standard_D8s_v5", "on-demand")
			f.pods("e", "e", 30, "50m", "256Mi")
		}, want{method: "single-node consolidation", candidates: []string{"e"}, replace: true}},
		{"a spent time limit leaves candidates for the next pass", func(f *fixture) {
			f.opts.TimeLimit = time.Nanosecond
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
		}, want{refusal: map[string]string{"a": "time limit (1ns) ran out"}}},
		{"pending pods: consolidation waits for provisioning", func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
			f.pod("pending", "", "1", "2Gi", func(p *corev1.Pod) {
				p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
			})
		}, want{refusal: map[string]string{"a": "1 pods are pending"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			d := f.decide()
			if len(d.BudgetErrors) > 0 {
				t.Fatalf("budget errors: %v", d.BudgetErrors)
			}
			var got []string
			for _, nc := range d.Expired {
				got = append(got, nc.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want.expired, ",") {
				t.Errorf("expired = %v, want %v", got, tc.want.expired)
			}
			switch {
			case tc.want.method == "" && d.Command != nil:
				t.Errorf("command %s, want none", d.Command)
			case tc.want.method != "" && d.Command == nil:
				t.Fatalf("no command, want %s of %v; refusals %+v", tc.want.method, tc.want.candidates, d.Refusals)
			case d.Command != nil:
				c := d.Command
				if c.Method != tc.want.method || strings.Join(names(c.Candidates), ",") != strings.Join(tc.want.candidates, ",") || (len(c.Replacements) > 0) != tc.want.replace {
					t.Errorf("command %s, want %s of %v (replace %t)", c, tc.want.method, tc.want.candidates, tc.want.replace)
				}
				if c.Reason != ReasonDrifted && (c.Savings <= 0 || c.Savings < tc.want.minSavings) {
					t.Errorf("command %s saves %.4f, want > 0 and >= %.4f", c, c.Savings, tc.want.minSavings)
				}
				for _, r := range c.Replacements {
					if len(r.InstanceTypes) == 0 {
						t.Errorf("replacement without instance types")
					}
				}
			}
			for node, sub := range tc.want.refusal {
				r := refusalOf(d, node)
				if r == "" || !strings.Contains(r, sub) {
					t.Errorf("refusal for %s = %q, want it to contain %q (all: %+v)", node, r, sub, d.Refusals)
				}
			}
			t.Logf("command: %v; refusals: %+v", d.Command, d.Refusals)
		})
	}
}
