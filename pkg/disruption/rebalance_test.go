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
// pods, seven lean (1 CPU, 1Gi) and five rich (1 CPU, 4Gi): node a holds
// four lean pods and three rich, node b three lean and two rich. Neither
// node's pods fit a cheaper type, nor both nodes' pods one node, and a is
// CPU-full. Node a's pods would fit b's free room and a D8als_v6 together,
// but only as packed: the kube-scheduler, spreading the lean pods first,
// would strand a rich one. Re-packed, the lean pods and a rich one on a
// D8als_v6 ($0.322/h) and the other rich pods on a D8as_v5 save $0.022/h
// (3.2 %), and the kube-scheduler can place the evicted pods on the two in
// any order (TestRebalanceKubeSchedulerOrder).
func skewedPair(f *fixture) { mixedPair(f, [2]int{4, 3}, [2]int{3, 2}, "1", "4Gi") }

// tightPair: node a holds four lean pods and one rich one of 2 CPU and
// 7Gi, node b three lean and two rich. Both nodes are CPU-full: the same
// re-pack onto a D8als_v6 and a D8as_v5 fits only if the rich pods land
// first, and the kube-scheduler, spreading lean pods first, strands one.
func tightPair(f *fixture) { mixedPair(f, [2]int{4, 1}, [2]int{3, 2}, "2", "7Gi") }

// mixedPair: nodes a and b, Standard_D8as_v5, each with its number of lean
// pods (1 CPU, 1Gi) and of rich pods (richCPU, richMem).
func mixedPair(f *fixture, a, b [2]int, richCPU, richMem string) {
	for _, n := range []struct {
		name string
		pods [2]int
	}{{"a", a}, {"b", b}} {
		f.node(n.name, "Standard_D8as_v5", "on-demand")
		f.pods(n.name+"-lean", n.name, n.pods[0], "1", "1Gi")
		f.pods(n.name+"-rich", n.name, n.pods[1], richCPU, richMem)
	}
}

func TestRebalance(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rebalance bool
		build     func(f *fixture)
		// want: the candidates of the rebalance, sorted ("" none), and
		// its replacements' types ("" for any); refusal: a substring of
		// node a's refusal when there is no command.
		want, types, refusal string
	}{
		{"off: Karpenter's methods leave the pair alone", false, skewedPair, "", "", "no replacement is cheaper than $0.3440/h"},
		{"on: the pair is re-packed onto two cheaper nodes", true, skewedPair, "a,b", "Standard_D8als_v6,Standard_D8as_v5", ""},
		{"on: a re-pack the kube-scheduler can strand is refused", true, tightPair, "", "", "no replacement is cheaper"},
		{"a budget of one node leaves single nodes: b alone on two smaller nodes", true, func(f *fixture) {
			skewedPair(f)
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}, "b", "Standard_D4als_v6,Standard_D4as_v5", ""},
		{"spot nodes are not rebalanced onto spot without SpotToSpot", true, spotPair, "", "", "fit neither"},
		{"a do-not-disrupt pod keeps its node out of every group", true, func(f *fixture) {
			skewedPair(f)
			f.pod("stay", "a", "100m", "128Mi", func(p *corev1.Pod) {
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			})
		}, "b", "", ""},
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
			if got := names(cmd.Candidates); cmd.Method != MethodRebalance || strings.Join(slices.Sorted(slices.Values(got)), ",") != tc.want {
				t.Fatalf("command %s, want a %s of %s", cmd, MethodRebalance, tc.want)
			}
			total := sumPrice(cmd.Candidates)
			if cmd.Savings < MinRebalanceSaving*total || cmd.Savings != total-replacementPrice(cmd.Replacements) {
				t.Errorf("saves $%.4f/h of $%.4f/h, want at least %.0f%% and the price difference", cmd.Savings, total, 100*MinRebalanceSaving)
			}
			if !strings.Contains(cmd.String(), "rebalancing consolidation replace (Underutilized)") {
				t.Errorf("String() = %q", cmd.String())
			}
			var types []string
			for _, r := range cmd.Replacements {
				it, _ := r.Cheapest()
				types = append(types, it.Name)
			}
			if slices.Sort(types); tc.types != "" && strings.Join(types, ",") != tc.types {
				t.Errorf("replacements %s, want %s", cmd, tc.types)
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
			orders := 0
			for order := range arrivalOrders(movedPods(cmd.Candidates)) {
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
			if orders != 792 {
				t.Errorf("%d arrival orders of seven lean and five rich pods, want 792", orders)
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
		{"a rich pod more: the re-pack no longer saves", func(f *fixture) { f.pod("late", "b", "1500m", "8Gi") }, Options{Rebalance: true}, "finds no rebalance that saves 2%"},
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
