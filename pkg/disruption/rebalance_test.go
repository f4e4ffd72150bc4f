package disruption

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// skewedPair is two Standard_D8as_v5 nodes ($0.344/h each) with mixed
// pods: seven lean pods (1 CPU, 1Gi) and three rich ones (1 CPU, 7Gi).
// Neither node fits a cheaper type, nor both one node, nor one node's pods
// the other's free room; the lean pods and one rich pod on a D8als_v6
// ($0.322/h) and the other rich pods on a D8as_v5 save $0.022/h (3.2 %),
// and the kube-scheduler can place the evicted pods on the two in any
// order (TestRebalanceKubeSchedulerOrder).
func skewedPair(f *fixture) { mixedPair(f, "1") }

// tightPair is skewedPair with CPU-full nodes (rich pods of 2 CPU): the
// same re-pack fits the two cheaper nodes only if the rich pods land
// first, and the kube-scheduler, spreading lean pods first, strands one.
func tightPair(f *fixture) { mixedPair(f, "2") }

// mixedPair: node a holds four lean pods and one rich one, node b three
// lean and two rich; rich pods request richCPU and 7Gi.
func mixedPair(f *fixture, richCPU string) {
	f.node("a", "Standard_D8as_v5", "on-demand")
	f.pods("a-lean", "a", 4, "1", "1Gi")
	f.pods("a-rich", "a", 1, richCPU, "7Gi")
	f.node("b", "Standard_D8as_v5", "on-demand")
	f.pods("b-lean", "b", 3, "1", "1Gi")
	f.pods("b-rich", "b", 2, richCPU, "7Gi")
}

func TestRebalance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rebalance bool
		build     func(f *fixture)
		// want: the candidates of the rebalance ("" none) and a refusal
		// (substring) for node a when there is none.
		want, refusal string
	}{
		{"off: Karpenter's methods leave the pair alone", false, skewedPair, "", "fit neither in the rest of the fleet's free capacity nor on a cheaper instance type"},
		{"on: the pair is re-packed onto two cheaper nodes", true, skewedPair, "a,b", ""},
		{"on: a re-pack the kube-scheduler can strand is refused", true, tightPair, "", "fit neither"},
		{"a budget of one node blocks a two-node rebalance", true, func(f *fixture) {
			skewedPair(f)
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}, "", "fit neither"},
		{"spot nodes are not rebalanced onto spot without SpotToSpot", true, spotPair, "", "fit neither"},
		{"a do-not-disrupt pod keeps its node out of every group", true, func(f *fixture) {
			skewedPair(f)
			f.pod("stay", "a", "100m", "128Mi", func(p *corev1.Pod) {
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			})
		}, "", "do-not-disrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			f.opts.Rebalance = tc.rebalance
			d := f.decide()
			if tc.want == "" {
				if d.Command != nil {
					t.Fatalf("command %s, want none", d.Command)
				}
				if got := refusalOf(d, "a"); !strings.Contains(got, tc.refusal) {
					t.Errorf("refusal of a = %q, want it to contain %q", got, tc.refusal)
				}
				return
			}
			cmd := d.Command
			if cmd == nil {
				t.Fatalf("no command; refusals %+v", d.Refusals)
			}
			if got := strings.Join(names(cmd.Candidates), ","); cmd.Method != MethodRebalance || got != tc.want {
				t.Fatalf("command %s, want a %s of %s", cmd, MethodRebalance, tc.want)
			}
			total := sumPrice(cmd.Candidates)
			if cmd.Savings < MinRebalanceSaving*total || cmd.Savings != total-replacementPrice(cmd.Replacements) {
				t.Errorf("saves $%.4f/h of $%.4f/h, want at least %.0f%% and the price difference", cmd.Savings, total, 100*MinRebalanceSaving)
			}
			if !strings.Contains(cmd.String(), "rebalancing consolidation replace (Underutilized)") {
				t.Errorf("String() = %q", cmd.String())
			}
			if len(cmd.Replacements) != 2 {
				t.Fatalf("command %s, want two replacements", cmd)
			}
			shapes := map[string]bool{}
			for _, r := range cmd.Replacements {
				it, _ := r.Cheapest()
				shapes[it.Name] = true
			}
			if !shapes["Standard_D8als_v6"] && !shapes["Standard_D8als_v7"] || !shapes["Standard_D8as_v5"] {
				t.Errorf("replacements %s, want a low-memory D8als and a D8as_v5", cmd)
			}
		})
	}
}

// spotPair is skewedPair on spot nodes of a spot-only NodePool.
func spotPair(f *fixture) {
	f.np.Spec.Template.Spec.Requirements[2].Values = []string{"spot"}
	skewedPair(f)
	for i := range f.c.NodeClaims {
		f.c.NodeClaims[i].Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeSpot
	}
}

// TestRebalanceSpot: as Karpenter, spot nodes are re-packed onto spot
// only with SpotToSpot, and then with at least MinSpotToSpotTypes cheaper
// types per replacement.
func TestRebalanceSpot(t *testing.T) {
	for _, tc := range []struct {
		spotToSpot bool
		want       string
	}{
		{false, "SpotToSpotConsolidation is disabled"},
		{true, "SpotToSpotConsolidation requires 15 cheaper spot instance types"},
	} {
		f := newFixture(t)
		spotPair(f)
		e := NewEngine(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: Options{Rebalance: true, SpotToSpot: tc.spotToSpot}})
		if len(e.Candidates) != 2 || e.Candidates[0].CapacityType != karpv1.CapacityTypeSpot {
			t.Fatalf("candidates %v, want the two spot nodes", names(e.Candidates))
		}
		cmd, why := e.rebalance(e.Candidates)
		if cmd != nil || !strings.Contains(why, tc.want) {
			t.Errorf("SpotToSpot %t: command %v, reason %q; want a refusal containing %q", tc.spotToSpot, cmd, why, tc.want)
		}
	}
}

// TestRebalanceKubeSchedulerOrder: a re-pack is a command only when the
// kube-scheduler, placing the evicted pods one at a time, cannot strand
// one. skewedPair's can go in any arrival order; tightPair's fits in
// first-fit order but not when lean pods come first, and is refused.
func TestRebalanceKubeSchedulerOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(*fixture)
		want  string // "" = a command whose pods fit in every arrival order
	}{
		{"skewed pair", skewedPair, ""},
		{"tight pair", tightPair, "the kube-scheduler, placing them one at a time on the least allocated node, would leave pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			e := NewEngine(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: Options{Rebalance: true}})
			r := e.rebalancer()
			cmd, why := e.consolidateInto(MethodRebalance, e.Candidates, func(c []*Candidate) Simulation { return e.simulateSplit(r, c) }, 2, MinRebalanceSaving)
			if tc.want != "" {
				if cmd != nil || !strings.Contains(why, tc.want) {
					t.Fatalf("command %v, reason %q; want a refusal containing %q", cmd, why, tc.want)
				}
				return
			}
			if cmd == nil {
				t.Fatalf("refused: %s", why)
			}
			var moved []*corev1.Pod
			for _, c := range cmd.Candidates {
				moved = append(moved, c.unbound()...)
			}
			orders := 0
			for order := range arrivalOrders(moved) {
				orders++
				in := e.simInput(cmd.Candidates, order)
				in.Spread = true
				for i, r := range cmd.Replacements {
					in.NodeClaims = append(in.NodeClaims, plannedClaim(fmt.Sprintf("replacement-%d", i), r))
				}
				if res := scheduler.Solve(in); len(res.Unschedulable) > 0 {
					t.Fatalf("arrival order %s strands %s", podNames(order), res.Unschedulable[0].Pod.Name)
				}
			}
			if orders != 120 {
				t.Errorf("%d arrival orders of seven lean and three rich pods, want 120", orders)
			}
		})
	}
}

// arrivalOrders yields pods in every order that tells pods of different
// requests apart (pods of equal requests are interchangeable).
func arrivalOrders(pods []*corev1.Pod) iter.Seq[[]*corev1.Pod] {
	return func(yield func([]*corev1.Pod) bool) {
		var walk func(prefix []*corev1.Pod, rest []*corev1.Pod) bool
		walk = func(prefix, rest []*corev1.Pod) bool {
			if len(rest) == 0 {
				return yield(slices.Clone(prefix))
			}
			seen := map[res]bool{}
			for i, p := range rest {
				if r := podRequests(p); !seen[r] {
					seen[r] = true
					others := append(slices.Clone(rest[:i]), rest[i+1:]...)
					if !walk(append(prefix, p), others) {
						return false
					}
				}
			}
			return true
		}
		walk(nil, pods)
	}
}

func podNames(pods []*corev1.Pod) string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return strings.Join(names, ",")
}

// TestRebalanceMinimumSaving: the same re-pack (3.2 %) is a command at a
// lower minimum and refused, with the figures, at a higher one.
func TestRebalanceMinimumSaving(t *testing.T) {
	for _, tc := range []struct {
		min  float64
		want string // "" = a command
	}{
		{0.02, ""},
		{0.03, ""},
		{0.04, "2 replacements would cost at least $0.6660/h, not below $0.6605/h"},
		{0.10, "not below"},
	} {
		f := newFixture(t)
		skewedPair(f)
		e := NewEngine(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: Options{Rebalance: true}})
		r := e.rebalancer()
		cmd, why := e.consolidateInto(MethodRebalance, e.Candidates, func(c []*Candidate) Simulation { return e.simulateSplit(r, c) }, 2, tc.min)
		switch {
		case tc.want == "" && cmd == nil:
			t.Errorf("minimum %.2f: refused (%s), want a command", tc.min, why)
		case tc.want != "" && (cmd != nil || !strings.Contains(why, tc.want)):
			t.Errorf("minimum %.2f: command %v, reason %q; want a refusal containing %q", tc.min, cmd, why, tc.want)
		}
	}
}

func TestValidateRebalance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixture)
		opts   Options
		want   string // "" = still valid
	}{
		{"unchanged", func(*fixture) {}, Options{Rebalance: true}, ""},
		{"a rich pod more: the re-pack no longer saves", func(f *fixture) { f.pod("late", "b", "500m", "4Gi") }, Options{Rebalance: true}, "finds no rebalance that saves 2%"},
		{"rebalancing turned off", func(*fixture) {}, Options{}, "turned off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			skewedPair(f)
			f.opts.Rebalance = true
			d := f.decide()
			if d.Command == nil || d.Command.Method != MethodRebalance {
				t.Fatalf("decided %v, want a rebalance; refusals %+v", d.Command, d.Refusals)
			}
			tc.change(f)
			got, err := Validate(State{Cluster: f.c, Catalog: f.cat, Now: now.Add(ValidationDelay), Options: tc.opts}, d.Command)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want the command to hold", err)
				}
				if len(got.Replacements) != 2 || got.Savings < d.Command.Savings-savingsTolerance {
					t.Errorf("validated %s, decided %s", got, d.Command)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want a ValidationError containing %q", err, tc.want)
			}
		})
	}
}

// TestValidateRebalanceSavesLess: a re-simulation that still saves the
// minimum but less than decided is refused.
func TestValidateRebalanceSavesLess(t *testing.T) {
	f := newFixture(t)
	skewedPair(f)
	f.opts.Rebalance = true
	d := f.decide()
	if d.Command == nil {
		t.Fatal("no command")
	}
	decided := *d.Command
	decided.Savings += 0.01 // as if the first simulation had found more
	_, err := Validate(State{Cluster: f.c, Catalog: f.cat, Now: now.Add(ValidationDelay), Options: f.opts}, &decided)
	if err == nil || !strings.Contains(err.Error(), "less than the") {
		t.Fatalf("Validate: %v, want a refusal for saving less than decided", err)
	}
}
