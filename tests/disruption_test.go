package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// TestDisruption drives the live Disruption function on the local loop:
// a workload scaled down by 80 % shrinks its fleet (PDB and do-not-disrupt
// respected), the consolidated fleet is then left alone, an invalid budget
// stops disruption with an event until it is fixed, and expireAfter
// replaces a node.
func TestDisruption(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "disrupt", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	// Nodes of at most 8 vCPU, so 20 one-vCPU pods take several; a short
	// consolidateAfter keeps the test quick.
	patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"consolidateAfter":"10s"},"template":{"spec":{"requirements":[
		{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]},
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"karpenter.azure.com/sku-family","operator":"In","values":["D"]},
		{"key":"karpenter.azure.com/sku-cpu","operator":"Lt","values":["9"]}]}}}}`)
	// A second NodePool whose nodes expire after 45 s.
	short := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, short); err != nil {
		t.Fatal(err)
	}
	short = &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "short"}, Spec: *short.Spec.DeepCopy()}
	expire := 45 * time.Second
	short.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(expire.String())
	short.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
	if err := kube.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	// One for replace-with-cheaper consolidation.
	shrink := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "shrink"}, Spec: *short.Spec.DeepCopy()}
	shrink.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	shrink.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("10s")
	if err := kube.Create(ctx, shrink); err != nil {
		t.Fatal(err)
	}
	// A third, whose template the drift case changes.
	drifty := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "drifty"}, Spec: *short.Spec.DeepCopy()}
	drifty.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("720h")
	if err := kube.Create(ctx, drifty); err != nil {
		t.Fatal(err)
	}

	web := deployment("web", 20, "1", "2Gi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
	pinned := deployment("pinned", 1, "100m", "128Mi")
	pinned.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
	pinned.Spec.Template.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	ephemeral := deployment("ephemeral", 1, "100m", "128Mi")
	ephemeral.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "short"}
	steady := deployment("steady", 2, "500m", "512Mi")
	steady.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "drifty"}
	big := deployment("big", 1, "6", "8Gi")
	big.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "shrink"}
	for _, d := range []client.Object{web, pinned, ephemeral, steady, big} {
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	minAvailable := intstr.FromInt32(3)
	if err := kube.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}); err != nil {
		t.Fatal(err)
	}
	for app, n := range map[string]int{"web": 20, "pinned": 1, "ephemeral": 1, "steady": 2, "big": 1} {
		eventually(t, 3*time.Minute, app+" running", func() (bool, string) { return allRunning(ctx, kube, app, n) })
	}
	pinnedPod := onlyPod(t, ctx, kube, "pinned")
	ephemeralClaim := claimOfPod(t, ctx, kube, onlyPod(t, ctx, kube, "ephemeral"))

	t.Run("scaled down by 80 %, the fleet shrinks within PDBs and do-not-disrupt", func(t *testing.T) {
		before := poolClaims(t, ctx, kube, "general")
		priceBefore := fleetPrice(env.Catalog, before)
		if len(before) < 3 {
			t.Fatalf("20 one-vCPU pods on nodes of at most 8 vCPU took %d NodeClaims; want at least 3", len(before))
		}
		fleet := watchFleet(ctx, kube, "general")
		scale(t, ctx, kube, "web", 4)
		eventually(t, time.Minute, "web scaled down", func() (bool, string) { return allRunning(ctx, kube, "web", 4) })
		// The 4 web pods as web settled: any of them gone later was
		// disrupted, and its ReplicaSet's replacement must be measured.
		settledWeb, err := podsWithLabel(ctx, kube, "app", "web")
		if err != nil {
			t.Fatal(err)
		}
		watch := watchAvailable(ctx, kube, "web", 4)
		// 4 vCPU of web fit beside the pinned pod on its 8-vCPU node,
		// which may not be disrupted: one node is left.
		// Consolidated means drained too: a NodeClaim still deleting may
		// still evict web pods, whose replacements the watch must see.
		eventually(t, 3*time.Minute, "the fleet consolidated", func() (bool, string) {
			now := poolClaims(t, ctx, kube, "general")
			deleting := deletingClaims(t, ctx, kube, "general")
			ok, why := allRunning(ctx, kube, "web", 4)
			return ok && len(now) == 1 && len(deleting) == 0, fmt.Sprintf("%d NodeClaims (%s), deleting %v; %s", len(now), strings.Join(claimNames(now), ", "), deleting, why)
		})
		armed, minimum, samples := watch.result()
		sampled := fleet.result()
		after := poolClaims(t, ctx, kube, "general")
		priceAfter := fleetPrice(env.Catalog, after)
		// At rest, the fleet costs about what `plan` would pick for the
		// pods that are left.
		planned, how := planPrice(t, ctx, kube, env.Catalog, "general")
		t.Logf("at rest $%.4f/h; plan for the remaining pods $%.4f/h (%s)", priceAfter, planned, how)
		if priceAfter > 1.10*planned {
			t.Errorf("at rest the fleet costs $%.4f/h, more than 10 %% above the $%.4f/h plan picks for its pods (%s)", priceAfter, planned, how)
		}
		// Sampled throughout: no budget exceeded, and no pod pending
		// longer than a NodeClaim takes to launch.
		launches := launchTimes(append(slices.Clone(before), after...))
		slowest := slices.Max(append(launches, 0))
		t.Logf("%d samples: at most %d NodeClaims disrupting at once; %d pods created and bound meanwhile, longest pending %s (%s); slowest launch %s",
			sampled.samples, sampled.mostDisrupting, sampled.bound, sampled.longestPendingPod, sampled.longestPending.Round(time.Millisecond), slowest.Round(time.Second))
		for _, over := range sampled.overBudget {
			t.Errorf("budget exceeded: %s", over)
		}
		if sampled.samples == 0 {
			t.Error("the fleet watch took no sample")
		}
		if len(launches) == 0 {
			t.Error("no NodeClaim of the pool reports when it was Initialized")
		}
		// Once web has settled at 4, a web pod disrupted is replaced by its
		// ReplicaSet, and the watch must have seen the new pod. (Counting
		// Evicted events after the settle time instead failed in CI: events
		// carry whole seconds, so evictions of pods the scale-down removed
		// anyway, in the second web settled, counted too.)
		webNow, err := podsWithLabel(ctx, kube, "app", "web")
		if err != nil {
			t.Fatal(err)
		}
		var gone []string
		for _, p := range settledWeb {
			if !slices.ContainsFunc(webNow, func(q corev1.Pod) bool { return q.UID == p.UID }) {
				gone = append(gone, p.Name)
			}
		}
		if len(gone) > 0 && sampled.bound == 0 {
			t.Errorf("web pods %s were disrupted after web settled at 4 replicas, but the watch saw no new pod bound", strings.Join(gone, ", "))
		}
		if sampled.longestPending > slowest {
			t.Errorf("pod %s stayed pending %s, longer than the slowest launch (%s)", sampled.longestPendingPod, sampled.longestPending.Round(time.Millisecond), slowest.Round(time.Second))
		}
		t.Logf("fleet: %d NodeClaims at $%.4f/h before, %d at $%.4f/h after; %d pods evicted; web available min %d over %d samples",
			len(before), priceBefore, len(after), priceAfter, eventCount(t, ctx, kube, events.ReasonEvicted, ""), minimum, samples)
		if !armed || minimum < int(minAvailable.IntVal) {
			t.Errorf("web's PDB (minAvailable %d) was violated: %d pods available at the lowest (armed %t)", minAvailable.IntVal, minimum, armed)
		}
		if priceAfter >= priceBefore {
			t.Errorf("fleet price $%.4f/h after consolidation, $%.4f/h before", priceAfter, priceBefore)
		}
		now := onlyPod(t, ctx, kube, "pinned")
		if now.UID != pinnedPod.UID || now.DeletionTimestamp != nil {
			t.Errorf("the do-not-disrupt pod was disrupted: %s (uid %s) became %s (uid %s)", pinnedPod.Name, pinnedPod.UID, now.Name, now.UID)
		}
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, ""); n == 0 {
			t.Error("no DisruptionTerminating event was written")
		}
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionBlocked, "karpenter.sh/do-not-disrupt"); n == 0 {
			t.Error("no DisruptionBlocked event names the do-not-disrupt pod")
		}
		for _, nc := range after {
			if c := nc.StatusConditions().Get(karpv1.ConditionTypeConsolidatable); c == nil {
				t.Errorf("NodeClaim %s has no Consolidatable condition", nc.Name)
			}
		}
		// Every NodeClaim consolidated away has its decision record, with
		// what it cost.
		recs := decisionRecords(t, env.LogPath, decisions.Consolidation)
		for _, nc := range before {
			if slices.ContainsFunc(after, func(a karpv1.NodeClaim) bool { return a.Name == nc.Name }) {
				continue
			}
			rec, ok := recs[nc.Name]
			if !ok {
				t.Errorf("NodeClaim %s was consolidated away without a %q decision record", nc.Name, decisions.Consolidation)
				continue
			}
			if price, _ := rec["pricePerHour"].(float64); rec["size"] == "" || rec["zone"] == "" || rec["reason"] == "" || price <= 0 {
				t.Errorf("consolidation decision lacks a field: %v", rec)
			}
		}
	})

	t.Run("budgets the CRD or the function refuses disrupt nothing", func(t *testing.T) {
		for _, bad := range []struct{ patch, want string }{
			{`{"spec":{"disruption":{"budgets":[{"nodes":"150%"}]}}}`, "spec.disruption.budgets[0].nodes"},
			{`{"spec":{"disruption":{"budgets":[{"nodes":"1","duration":"10m"}]}}}`, "'schedule' must be set with 'duration'"},
		} {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
			err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(bad.patch)))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("patch %s: error %v; want one containing %q", bad.patch, err, bad.want)
			}
		}
		// A cron expression the CRD's pattern admits but no cron reads; then
		// new nodes, emptied at once.
		patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"budgets":[{"nodes":"1","schedule":"61 * * * *","duration":"10m"}]}}}`)
		scale(t, ctx, kube, "web", 16)
		eventually(t, 2*time.Minute, "web scaled up", func() (bool, string) { return allRunning(ctx, kube, "web", 16) })
		before := poolClaims(t, ctx, kube, "general")
		scale(t, ctx, kube, "web", 0)
		eventually(t, time.Minute, "a DisruptionBlocked event on the NodePool", func() (bool, string) {
			n := eventCount(t, ctx, kube, events.ReasonDisruptionBlocked, `spec.disruption.budgets[0]: schedule "61 * * * *" is not a cron expression`)
			return n > 0, "none yet"
		})
		disruptionSettled(t, ctx, env, "budget-refused")
		if after := poolClaims(t, ctx, kube, "general"); len(after) != len(before) {
			t.Fatalf("NodeClaims went from %v to %v under an unreadable budget", claimNames(before), claimNames(after))
		}
		// Fixed, the NodePool's change is a trigger: the empty nodes go.
		patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"budgets":[{"nodes":"100%"}]}}}`)
		eventually(t, 90*time.Second, "the emptied nodes removed once the budget is fixed", func() (bool, string) {
			after := poolClaims(t, ctx, kube, "general")
			return len(after) == 1, fmt.Sprintf("%d NodeClaims (%s); want only the pinned pod's", len(after), strings.Join(claimNames(after), ", "))
		})
	})

	t.Run("expireAfter replaces a node", func(t *testing.T) {
		eventually(t, 2*time.Minute, "the ephemeral pod's node expired and the pod runs on a new one", func() (bool, string) {
			var nc karpv1.NodeClaim
			err := kube.Get(ctx, client.ObjectKey{Name: ephemeralClaim.Name}, &nc)
			if err == nil {
				return false, fmt.Sprintf("NodeClaim %s still exists (deleting %t), created %s ago", nc.Name, nc.DeletionTimestamp != nil, time.Since(nc.CreationTimestamp.Time).Round(time.Second))
			}
			if ok, why := allRunning(ctx, kube, "ephemeral", 1); !ok {
				return false, why
			}
			return true, ""
		})
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Expired"); n == 0 {
			t.Error("no DisruptionTerminating event for the expired NodeClaim")
		}
		now := claimOfPod(t, ctx, kube, onlyPod(t, ctx, kube, "ephemeral"))
		if now.Name == ephemeralClaim.Name || now.Labels[karpv1.NodePoolLabelKey] != "short" {
			t.Errorf("the ephemeral pod runs on %s (pool %s); want a new NodeClaim of pool short", now.Name, now.Labels[karpv1.NodePoolLabelKey])
		}
		// No more churn: the pool and its nodes go.
		if err := kube.Delete(ctx, ephemeral); err != nil {
			t.Fatal(err)
		}
		if err := kube.Delete(ctx, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "short"}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a NodePool change drifts its node, replaced first", func(t *testing.T) {
		before := poolClaims(t, ctx, kube, "drifty")
		if len(before) != 1 {
			t.Fatalf("drifty has %d NodeClaims; want 1", len(before))
		}
		patchPool(t, ctx, kube, "drifty", `{"spec":{"template":{"metadata":{"labels":{"tier":"two"}}}}}`)
		eventually(t, 2*time.Minute, "the drifted node replaced", func() (bool, string) {
			now := poolClaims(t, ctx, kube, "drifty")
			ok, why := allRunning(ctx, kube, "steady", 2)
			if len(now) != 1 || now[0].Name == before[0].Name || !ok {
				return false, fmt.Sprintf("%d NodeClaims (%s); %s", len(now), strings.Join(claimNames(now), ", "), why)
			}
			return now[0].Labels["tier"] == "two", "the replacement lacks the new label"
		})
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionLaunching, "Launching NodeClaim: Drifted"); n == 0 {
			t.Error("no DisruptionLaunching event for the drift replacement")
		}
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Drifted"); n == 0 {
			t.Error("no DisruptionTerminating event for the drifted NodeClaim")
		}
	})
	t.Run("a node much bigger than its pods is replaced by a cheaper one, replacement first", func(t *testing.T) {
		before := poolClaims(t, ctx, kube, "shrink")
		if len(before) != 1 {
			t.Fatalf("shrink has %d NodeClaims; want 1", len(before))
		}
		priceBefore := fleetPrice(env.Catalog, before)
		// The big pod goes, a small one takes its place on the same node.
		scale(t, ctx, kube, "big", 0)
		small := deployment("small", 1, "500m", "512Mi")
		small.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "shrink"}
		if err := kube.Create(ctx, small); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the node replaced by a cheaper one", func() (bool, string) {
			now := poolClaims(t, ctx, kube, "shrink")
			ok, why := allRunning(ctx, kube, "small", 1)
			if len(now) != 1 || now[0].Name == before[0].Name || !ok {
				return false, fmt.Sprintf("%d NodeClaims (%s); %s", len(now), strings.Join(claimNames(now), ", "), why)
			}
			return true, ""
		})
		after := poolClaims(t, ctx, kube, "shrink")
		t.Logf("shrink: %s at $%.4f/h -> %s at $%.4f/h", strings.Join(claimNames(before), ","), priceBefore,
			strings.Join(claimNames(after), ","), fleetPrice(env.Catalog, after))
		if fleetPrice(env.Catalog, after) >= priceBefore {
			t.Errorf("the replacement costs $%.4f/h, the node it replaced $%.4f/h", fleetPrice(env.Catalog, after), priceBefore)
		}
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionLaunching, "Launching NodeClaim: Underutilized"); n == 0 {
			t.Error("no DisruptionLaunching event for the consolidation replacement")
		}
	})

	t.Run("a fleet at rest is left alone", func(t *testing.T) {
		// Settled first: nothing deleting, the emptied nodes gone.
		waitNoClaimDeleting(t, ctx, kube, time.Minute)
		// The last subtest's tail (its pod events, a deadline pass, the
		// provisioning pass a termination asks for) is over when 10 s go by
		// without an invocation.
		invocations := func() int64 {
			var n int64
			for _, s := range env.Host.FunctionStats() {
				n += s.Invocations
			}
			return n
		}
		last := invocations()
		eventually(t, 90*time.Second, "10 s without an invocation", func() (bool, string) {
			time.Sleep(10 * time.Second)
			now := invocations()
			quiet := now == last
			last = now
			return quiet, fmt.Sprintf("%d invocations so far", now)
		})
		before := strings.Join(claimNames(nodeClaimList(t, ctx, kube)), ",")
		terminating := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "")
		stats := env.Host.FunctionStats()
		disruptionSettled(t, ctx, env, "at-rest")
		if after := strings.Join(claimNames(nodeClaimList(t, ctx, kube)), ","); after != before {
			t.Errorf("NodeClaims changed at rest: %s -> %s", before, after)
		}
		if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, ""); n != terminating {
			t.Errorf("%d disruptions at rest", n-terminating)
		}
		if n := eventCount(t, ctx, kube, events.ReasonUnconsolidatable, ""); n == 0 {
			t.Error("no Unconsolidatable event says why a node stays")
		}
		now := env.Host.FunctionStats()
		var parts []string
		var total int64
		for _, fn := range []string{"Provision", "Lifecycle", "Disruption", "Sweep", "Interruption"} {
			d := now[fn].Invocations - stats[fn].Invocations
			total += d
			parts = append(parts, fmt.Sprintf("%s %d", fn, d))
		}
		t.Logf("invocations at rest (%d NodeClaims): %s", len(nodeClaimList(t, ctx, kube)), strings.Join(parts, ", "))
		// At rest only the pass asked for runs, and the Sweep timer (every
		// 5 minutes) with the pass it asks for: nothing the passes decide
		// (a command's re-check, a launch) follows.
		disruptions := now["Disruption"].Invocations - stats["Disruption"].Invocations
		sweeps := now["Sweep"].Invocations - stats["Sweep"].Invocations
		if disruptions < 1 || disruptions > 1+sweeps || total-disruptions-sweeps > 0 {
			t.Errorf("invocations at rest: %s; want the disruption pass asked for, and at most the Sweep and its pass", strings.Join(parts, ", "))
		}
	})
}

// disruptionSettled is the barrier before asserting that disruption did
// nothing: it asks for a disruption pass (cause names it in the log),
// then waits until the host has run it and everything it led to, and has
// handled every message due within a validation delay after that (a
// disruption command is re-checked and carried out a validation delay
// after the pass that decided it); while passes keep coming, it waits
// again. Anything disruption would do to the fleet as it stands has been
// done when it returns, however slow the loop.
func disruptionSettled(t *testing.T, ctx context.Context, env *localenv.Env, cause string) {
	t.Helper()
	pass := triggers.DisruptionPass(env.Options.ClusterName, "test-"+cause, time.Now())
	msg, err := pass.Message("/karpfunc/tests")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Host.Publish(ctx, pass.Queue(), msg); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		if err := env.Host.WaitIdle(waitCtx); err != nil {
			t.Fatal(err)
		}
		passes := env.Host.FunctionStats()["Disruption"].Invocations
		if err := env.Host.WaitIdleUntil(waitCtx, time.Now().Add(disruption.ValidationDelay)); err != nil {
			t.Fatal(err)
		}
		if env.Host.FunctionStats()["Disruption"].Invocations == passes {
			return
		}
	}
}

func patchPool(t *testing.T, ctx context.Context, kube client.Client, name, patch string) {
	t.Helper()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching NodePool %s: %v", name, err)
	}
}

func onlyPod(t *testing.T, ctx context.Context, kube client.Client, app string) corev1.Pod {
	t.Helper()
	pods, err := podsWithLabel(ctx, kube, "app", app)
	if err != nil {
		t.Fatal(err)
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		t.Fatalf("%d live %s pods; want 1", len(live), app)
	}
	return live[0]
}

// soleLivePod is app's one live pod, if it has exactly one (not while a
// replacement is on its way).
func soleLivePod(ctx context.Context, kube client.Client, app string) (corev1.Pod, bool) {
	pods, err := podsWithLabel(ctx, kube, "app", app)
	if err != nil {
		return corev1.Pod{}, false
	}
	var live []corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			live = append(live, pod)
		}
	}
	if len(live) != 1 {
		return corev1.Pod{}, false
	}
	return live[0], true
}

func claimOfPod(t *testing.T, ctx context.Context, kube client.Client, pod corev1.Pod) karpv1.NodeClaim {
	t.Helper()
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Status.NodeName == pod.Spec.NodeName && pod.Spec.NodeName != "" {
			return nc
		}
	}
	t.Fatalf("no NodeClaim for node %q of pod %s", pod.Spec.NodeName, pod.Name)
	return karpv1.NodeClaim{}
}

// poolClaims are the pool's NodeClaims not being deleted.
func poolClaims(t *testing.T, ctx context.Context, kube client.Client, pool string) []karpv1.NodeClaim {
	var out []karpv1.NodeClaim
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Labels[karpv1.NodePoolLabelKey] == pool && nc.DeletionTimestamp == nil {
			out = append(out, nc)
		}
	}
	return out
}

// deletingClaims names the pool's NodeClaims being deleted (any pool's
// when pool is "").
func deletingClaims(t *testing.T, ctx context.Context, kube client.Client, pool string) []string {
	var out []string
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if (pool == "" || nc.Labels[karpv1.NodePoolLabelKey] == pool) && nc.DeletionTimestamp != nil {
			out = append(out, nc.Name)
		}
	}
	return out
}

func claimNames(ncs []karpv1.NodeClaim) []string {
	names := make([]string, len(ncs))
	for i, nc := range ncs {
		names[i] = nc.Name + "(" + nc.Labels[corev1.LabelInstanceTypeStable] + ")"
	}
	sort.Strings(names)
	return names
}

func fleetPrice(cat *catalog.Catalog, ncs []karpv1.NodeClaim) float64 {
	total := 0.0
	for _, nc := range ncs {
		it, ok := cat.Get(nc.Labels[corev1.LabelInstanceTypeStable])
		if !ok {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == nc.Labels[corev1.LabelTopologyZone] && o.CapacityType == nc.Labels[karpv1.CapacityTypeLabelKey] {
				total += o.Price
			}
		}
	}
	return total
}

// eventCount counts the events with reason whose message contains substr.
func eventCount(t *testing.T, ctx context.Context, kube client.Client, reason, substr string) int {
	t.Helper()
	n, err := testfixtures.CountEvents(ctx, kube, testfixtures.EventFilter{Reason: reason, MessageContains: substr})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIdleCost measures what a fleet at rest costs in invocations: 20
// nodes, then KARPFUNC_IDLE_MINUTES minutes without a pod coming or going
// (skipped when unset: it is a measurement, not a check `make test` runs).
// It fails if anything but the Sweep timer and the disruption pass it asks
// for ran.
func TestIdleCost(t *testing.T) {
	minutes, _ := strconv.Atoi(os.Getenv("KARPFUNC_IDLE_MINUTES"))
	if minutes <= 0 {
		t.Skip("set KARPFUNC_IDLE_MINUTES to measure")
	}
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "idle", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	// One pod per node: 5 of 8 vCPUs.
	patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"consolidateAfter":"10s"},"template":{"spec":{"requirements":[
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"karpenter.azure.com/sku-family","operator":"In","values":["D"]},
		{"key":"karpenter.azure.com/sku-cpu","operator":"In","values":["8"]}]}}}}`)
	if err := kube.Create(ctx, deployment("idle", 20, "5", "4Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*time.Minute, "idle running", func() (bool, string) { return allRunning(ctx, kube, "idle", 20) })
	total := func() int64 {
		var n int64
		for _, s := range env.Host.FunctionStats() {
			n += s.Invocations
		}
		return n
	}
	last := total()
	eventually(t, 3*time.Minute, "20 s without an invocation", func() (bool, string) {
		time.Sleep(20 * time.Second)
		now := total()
		quiet := now == last
		last = now
		return quiet, fmt.Sprintf("%d invocations so far", now)
	})
	nodes := len(nodeClaimList(t, ctx, kube))
	before := env.Host.FunctionStats()
	window := time.Duration(minutes) * time.Minute
	time.Sleep(window)
	after := env.Host.FunctionStats()
	var parts []string
	var sum int64
	for _, fn := range []string{"Provision", "Lifecycle", "Disruption", "Sweep", "Interruption"} {
		d := after[fn].Invocations - before[fn].Invocations
		sum += d
		parts = append(parts, fmt.Sprintf("%s %d", fn, d))
	}
	perHour := float64(sum) * float64(time.Hour) / float64(window)
	t.Logf("idle cost: %d NodeClaims, %s at rest: %s; %.0f invocations an hour", nodes, window, strings.Join(parts, ", "), perHour)
	sweeps := after["Sweep"].Invocations - before["Sweep"].Invocations
	if others := sum - sweeps - (after["Disruption"].Invocations - before["Disruption"].Invocations); others > 0 {
		t.Errorf("%d invocations at rest besides Sweep and Disruption", others)
	}
	// The window is real time: the Sweep timer firing in it shows the
	// loop ran, so "nothing else ran" is not merely a stalled host.
	if window >= 5*time.Minute && sweeps == 0 {
		t.Errorf("no Sweep ran in %s; the timer fires every 5 minutes, so the host was not running and nothing was measured", window)
	}
	if d := after["Disruption"].Invocations - before["Disruption"].Invocations; d > sweeps+1 {
		t.Errorf("%d disruption passes at rest for %d sweeps", d, sweeps)
	}
}

// decisionRecords reads the decision records of kind from the process log,
// by NodeClaim.
func decisionRecords(t *testing.T, logPath string, kind decisions.Kind) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, line := range strings.Split(string(data), "\n") {
		i := strings.Index(line, "{")
		if i < 0 || !strings.Contains(line, decisions.Message) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line[i:]), &rec); err != nil || rec["msg"] != decisions.Message || rec["decision"] != string(kind) {
			continue
		}
		if name, ok := rec["nodeClaim"].(string); ok {
			out[name] = rec
		}
	}
	return out
}
