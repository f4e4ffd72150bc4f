package disruption

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSingleNodeConsolidationFindings: Karpenter's single-node
// consolidation, as Karpenter decides it.
func TestSingleNodeConsolidationFindings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(f *fixture)
		// want: the replacement's cheapest type; on: where some of a's
		// pods go instead ("" nowhere).
		want, on string
		check    func(t *testing.T, e *Engine, cmd *Command)
	}{
		{
			// The scheduler, packing for price, would spread the 24 pods
			// over three claims of different shapes; Karpenter asks
			// whether they fit on one cheaper node, and they do.
			name: "pods the scheduler would spread over three claims fit on one cheaper node",
			build: func(f *fixture) {
				f.node("a", "Standard_D64als_v6", "on-demand")
				f.pods("a-lean", "a", 20, "1", "1Gi")
				f.pods("a-rich", "a", 4, "1", "7Gi")
			},
			want: "Standard_D32als_v6",
			check: func(t *testing.T, e *Engine, _ *Command) {
				if n := len(e.Simulate(e.Candidates).Result.NewNodeClaims); n < 2 {
					t.Errorf("packing for price needs %d new claims; the case shows nothing unless it needs several", n)
				}
			},
		},
		{
			// a's pods fit neither b's free room nor a D8als_v6 alone, but
			// the rich pod on b and the lean ones on a D8als_v6 do.
			name: "pods shared between another node's free room and a cheaper node",
			build: func(f *fixture) {
				f.node("a", "Standard_D8as_v5", "on-demand")
				f.pods("a-lean", "a", 4, "1", "1Gi")
				f.pods("a-rich", "a", 1, "1", "7Gi")
				f.node("b", "Standard_D8as_v5", "on-demand")
				f.pods("b-lean", "b", 3, "1", "1Gi")
				f.pods("b-rich", "b", 2, "1", "7Gi")
			},
			want: "Standard_D8als_v6", on: "b",
		},
		{
			// b (kept by a do-not-disrupt pod) has CPU to spare and little
			// memory. The simulation puts a's lean pods on b and its rich
			// ones on a D8as_v5, sized for them; the kube-scheduler would
			// fill that empty node with lean pods first and strand the
			// rich ones, so the replacement is the next roomier type.
			name: "a replacement sized exactly for its pods is widened for the kube-scheduler",
			build: func(f *fixture) {
				f.node("b", "Standard_D32als_v6", "on-demand")
				f.pods("b-hog", "b", 20, "250m", "2Gi")
				f.pod("stay", "b", "100m", "128Mi", func(p *corev1.Pod) {
					p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				})
				f.node("a", "Standard_D32als_v6", "on-demand")
				f.pods("a-lean", "a", 10, "1", "1Gi")
				f.pods("a-rich", "a", 3, "1", "6Gi")
			},
			want: "Standard_D16als_v6", on: "b",
			check: func(t *testing.T, e *Engine, cmd *Command) {
				sim := e.simulateOnOne(cmd.Candidates)
				if len(sim.Result.NewNodeClaims) != 1 {
					t.Fatalf("simulation: %d new claims, want 1", len(sim.Result.NewNodeClaims))
				}
				exact, _ := e.cheaper(sim.Result.NewNodeClaims[0], cmd.Candidates, sumPrice(cmd.Candidates))
				it, _ := exact.Cheapest()
				narrow := *cmd
				narrow.Replacements = []*scheduler.NodeClaimPlan{exact}
				if why := e.survivesSpread(&narrow); it.Name != "Standard_D8as_v5" || !strings.Contains(why, "the kube-scheduler") {
					t.Errorf("the exact replacement %s: kube-scheduler model says %q; want a D8as_v5 it refuses", it.Name, why)
				}
				if why := e.survivesSpread(cmd); why != "" {
					t.Errorf("the widened command is refused by the model: %s", why)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			d := f.decide()
			cmd := d.Command
			if cmd == nil || cmd.Method != MethodSingleNode || len(cmd.Replacements) != 1 {
				t.Fatalf("command %v, want a single-node replace; refusals %+v", cmd, d.Refusals)
			}
			if it, _ := cmd.Replacements[0].Cheapest(); it.Name != tc.want {
				t.Errorf("replacement %s, want %s", it.Name, tc.want)
			}
			r := cmd.Replacements[0]
			for _, it := range r.InstanceTypes {
				one := scheduler.NodeClaimPlan{InstanceTypes: []*catalog.InstanceType{it}, Requirements: r.Requirements}
				if _, off := one.Cheapest(); off.Price >= cmd.Candidates[0].Price {
					t.Errorf("replacement option %s at $%.4f/h is not cheaper than the candidate's $%.4f/h", it.Name, off.Price, cmd.Candidates[0].Price)
				}
			}
			moved := 0
			for _, pl := range cmd.Existing {
				if pl.Node == tc.on {
					moved += len(pl.Pods)
				}
			}
			if (tc.on != "") != (moved > 0) {
				t.Errorf("%d pods go to existing node %q, want some exactly when it is named; command %s", moved, tc.on, cmd)
			}
			if tc.check != nil {
				tc.check(t, NewEngine(State{Cluster: f.c, Catalog: f.cat, Now: now}), cmd)
			}
		})
	}
}
