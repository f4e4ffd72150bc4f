package disruption

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// firstFitFleet is a running fleet that is not well packed: n generic pods
// (CPU from {100m, 250m, 500m, 1, 1.5}, memory from {100Mi, 256Mi, 512Mi,
// 1Gi, 2Gi, 4Gi}, drawn from seed) placed first fit, in arrival order, on
// on-demand nodes of one mid-size type, as a fleet grown by a
// fixed-size node group would be.
func firstFitFleet(b *testing.B, typ string, seed int64, n int) (*fixture, []*corev1.Pod) {
	f := newFixture(b)
	f.np.Spec.Disruption.Budgets = nil // Karpenter's default: 10% of the nodes
	it, ok := f.cat.Get(typ)
	if !ok {
		b.Fatalf("no instance type %s", typ)
	}
	room := resOf(it.Allocatable())
	r := rand.New(rand.NewSource(seed)) //nolint:gosec // deterministic workload
	var free []res
	var pods []*corev1.Pod
	for i := range n {
		cpu := fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[r.Intn(5)])
		mem := fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[r.Intn(6)])
		p := f.pod(fmt.Sprintf("g%04d", i), "", cpu, mem)
		need := podRequests(p)
		j := 0
		for j < len(free) && !need.fitsIn(free[j]) {
			j++
		}
		if j == len(free) {
			f.node(fmt.Sprintf("ff-%03d", j), typ, "on-demand")
			free = append(free, room)
		}
		free[j] = free[j].sub(need)
		p.Spec.NodeName = fmt.Sprintf("ff-%03d", j)
		pods = append(pods, p)
	}
	return f, pods
}

// BenchmarkReplayToRest: 2,000 generic pods run on Standard_D8as_v5 nodes
// packed first fit; Replay (what `karpfunc plan --disruption` runs) applies
// consolidation until nothing is left to do. It reports the fleet's price
// before and after, the LP bound for the pods over the offerings the
// NodePool allows (D family, amd64, on-demand), after/bound, what a fresh
// plan for the same pods costs (plan/bound) and the number of moves.
// "karpenter": Karpenter's methods; "rebalance": with rebalancing
// consolidation (Options.Rebalance) after them.
func BenchmarkReplayToRest(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"karpenter", Options{}},
		{"rebalance", Options{Rebalance: true}},
	} {
		b.Run(tc.name, func(b *testing.B) { replayToRest(b, tc.opts) })
	}
}

// BenchmarkReplayScaledDown: the fleet karpfunc provisions for 10,000
// generic pods (BenchmarkReplayToRest's mix) with the NodePool's D family
// and no size cap, a few dozen large nodes, loses four pods in five at
// random, as after a traffic peak; Replay consolidates it to rest. It
// reports what BenchmarkReplayToRest does; plan/bound is a fresh plan for
// the pods left.
func BenchmarkReplayScaledDown(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"karpenter", Options{}},
		{"rebalance", Options{Rebalance: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f, pods := scaledDownFleet(b, 7, 10000)
			replayFleet(b, f, pods, tc.opts)
		})
	}
}

// scaledDownFleet provisions n generic pods (drawn from seed) as a fresh
// plan, with one Ready node per planned NodeClaim, and keeps one pod in
// five (drawn from seed).
func scaledDownFleet(b *testing.B, seed int64, n int) (*fixture, []*corev1.Pod) {
	f := newFixture(b)
	f.np.Spec.Disruption.Budgets = nil  // Karpenter's default: 10% of the nodes
	r := rand.New(rand.NewSource(seed)) //nolint:gosec // deterministic workload
	var pods []*corev1.Pod
	for i := range n {
		cpu := fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[r.Intn(5)])
		mem := fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[r.Intn(6)])
		pods = append(pods, f.pod(fmt.Sprintf("g%05d", i), "", cpu, mem))
	}
	_, provisioned := planPrice(f, pods)
	if len(provisioned.Unschedulable) > 0 {
		b.Fatalf("unschedulable: %s", provisioned.Unschedulable[0].Reason)
	}
	provision(f, pods, provisioned, now.Add(-time.Hour))
	var kept []*corev1.Pod
	for _, p := range f.c.Pods {
		if r.Intn(5) == 0 {
			kept = append(kept, p)
		}
	}
	f.c.Pods = kept
	return f, kept
}

func replayToRest(b *testing.B, opts Options) {
	f, pods := firstFitFleet(b, "Standard_D8as_v5", 7, 2000)
	replayFleet(b, f, pods, opts)
}

// replayFleet replays disruption on f, whose pods are pods, to rest.
func replayFleet(b *testing.B, f *fixture, pods []*corev1.Pod, opts Options) {
	st := State{Cluster: f.c, Catalog: f.cat, Now: now, Options: opts}
	e := NewEngine(st)
	var need res
	for _, p := range pods {
		need = need.add(podRequests(p))
	}
	bound := lpBound(e.fleet().poolTypes(e, f.np), need)
	plan, _ := planPrice(f, pods)
	var moves []Move
	var before float64
	var last Decision
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		moves, before, last = Replay(st, 10000)
	}
	b.StopTimer()
	after := before
	if len(moves) > 0 {
		after = moves[len(moves)-1].FleetPriceAfter
	}
	nodes := 0
	for _, r := range last.Refusals {
		if r.NodeClaim != "" {
			nodes++
		}
	}
	replaced, deleted, rebalanced := 0, 0, 0
	for _, m := range moves {
		if m.Command.Method == MethodRebalance {
			rebalanced++
		}
		if m.Command.Action() == "replace" {
			replaced++
		} else {
			deleted++
		}
	}
	b.Logf("before $%.3f/h on %d nodes; after %d moves (%d replace, %d delete; %d rebalance) $%.3f/h on %d nodes; LP bound $%.3f/h; fresh plan $%.3f/h",
		before, len(f.c.Nodes), len(moves), replaced, deleted, rebalanced, after, nodes, bound, plan)
	if len(last.Refusals) > 0 {
		b.Logf("at rest, e.g. %s: %s", last.Refusals[0].NodeClaim, last.Refusals[0].Reason)
	}
	b.ReportMetric(before, "before$/h")
	b.ReportMetric(after, "after$/h")
	b.ReportMetric(bound, "lp$/h")
	b.ReportMetric(after/bound, "after/bound")
	b.ReportMetric(plan/bound, "plan/bound")
	b.ReportMetric(float64(len(moves)), "moves")
}
