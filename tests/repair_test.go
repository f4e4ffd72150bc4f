package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/repair"
)

// repairToleration stands in for the 10 minutes Ready may stay Unknown,
// through the setting the handler documents for tests.
const repairToleration = 20 * time.Second

// TestRepair stops kubelets and fails node health checks through the ARM
// emulator (the VMs keep running) and checks that karpfunc replaces the
// node after the toleration, launching the replacement before it deletes
// the broken NodeClaim, that the pods run again, that a static pool is
// repaired 1:1, and that repair holds off when more than 20 % of a
// NodePool's nodes are unhealthy.
func TestRepair(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "repair", BootDelay: time.Second,
		HostSettings: map[string]string{"KARPFUNC_NODE_REPAIR_READY_TOLERATION": repairToleration.String()}})
	ctx := context.Background()
	kube := env.Kube
	// 2-vCPU on-demand sizes: two 800m pods fill a node, so a replacement
	// is always a new NodeClaim.
	pinGeneralPool(t, kube, karpv1.CapacityTypeOnDemand, "2")
	const replicas = 4
	if err := kube.Create(ctx, deployment("web", replicas, "800m", "256Mi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "web running", func() (bool, string) { return allRunning(ctx, kube, "web", replicas) })

	t.Run("a node whose kubelet stops is replaced after the toleration and its pods run again", func(t *testing.T) {
		victim, node, pods := repairVictim(t, ctx, kube)
		before := claimSet(t, ctx, kube)
		hold(t, ctx, kube, victim)
		if err := env.ARM.StopKubelet(victim); err != nil {
			t.Fatal(err)
		}
		var unknownSince time.Time
		eventually(t, 2*time.Minute, "node "+node+" Ready Unknown (the node lifecycle controller)", func() (bool, string) {
			n := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return false, err.Error()
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
					unknownSince = c.LastTransitionTime.Time
					return true, ""
				}
			}
			return false, fmt.Sprintf("conditions %v", n.Status.Conditions)
		})
		deleted, replacements := watchRepair(t, ctx, kube, victim, before, 3*time.Minute)
		if deleted.Before(unknownSince.Add(repairToleration)) {
			t.Errorf("NodeClaim %s deleted at %s, before Ready Unknown since %s was tolerated for %s", victim, deleted, unknownSince, repairToleration)
		}
		t.Logf("kubelet of %s stopped; Ready Unknown at %s; NodeClaim deleted at %s with replacements %v launched first (pods %v)",
			victim, unknownSince.Format(time.RFC3339), deleted.Format(time.RFC3339), replacements, pods)
		if n := eventsFor(t, ctx, kube, "Node", node, repair.ReasonUnhealthy); n == 0 {
			t.Errorf("no %s event on node %s", repair.ReasonUnhealthy, node)
		}
		runningOff(t, ctx, kube, "web", replicas, node)
	})

	t.Run("a node that fails its health check is replaced at once", func(t *testing.T) {
		victim, node, _ := repairVictim(t, ctx, kube)
		before := claimSet(t, ctx, kube)
		hold(t, ctx, kube, victim)
		if err := env.ARM.ReportNodeHealthy(victim, false, "pod networking check failed"); err != nil {
			t.Fatal(err)
		}
		_, replacements := watchRepair(t, ctx, kube, victim, before, 2*time.Minute)
		t.Logf("NodeHealthy=False on %s: replaced by %v", node, replacements)
		runningOff(t, ctx, kube, "web", replicas, node)
	})

	t.Run("a static pool is repaired 1:1; more than 20 % unhealthy blocks repair", func(t *testing.T) {
		if _, err := env.Apply(ctx, []byte(staticPool(3)), "static pool"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, "static pool at 3 ready nodes", func() (bool, string) { return staticSettled(ctx, t, kube, 3) })
		fixed := staticClaims(t, ctx, kube)
		before := claimSet(t, ctx, kube)
		hold(t, ctx, kube, fixed[0])
		if err := env.ARM.StopKubelet(fixed[0]); err != nil {
			t.Fatal(err)
		}
		_, replacements := watchRepair(t, ctx, kube, fixed[0], before, 4*time.Minute)
		if len(replacements) != 1 {
			t.Errorf("static NodeClaim %s replaced by %v, want exactly one", fixed[0], replacements)
		}
		eventually(t, 3*time.Minute, "static pool back at 3 ready nodes", func() (bool, string) { return staticSettled(ctx, t, kube, 3) })

		// Two of three unhealthy: more than 20 % (rounded up, 1).
		fixed = staticClaims(t, ctx, kube)
		for _, name := range fixed[:2] {
			if err := env.ARM.StopKubelet(name); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 4*time.Minute, "NodePool fixed NodeRepairBlocked and an event on both NodeClaims", func() (bool, string) {
			pool := &karpv1.NodePool{}
			if err := kube.Get(ctx, client.ObjectKey{Name: "fixed"}, pool); err != nil {
				return false, err.Error()
			}
			cond := pool.StatusConditions().Get(nodepoolstatus.ConditionTypeNodeRepairBlocked)
			if cond == nil || !cond.IsTrue() {
				return false, fmt.Sprintf("condition %+v", cond)
			}
			for _, name := range fixed[:2] {
				if eventsFor(t, ctx, kube, "NodeClaim", name, repair.ReasonRepairBlocked) == 0 {
					return false, "no " + repair.ReasonRepairBlocked + " event on NodeClaim " + name
				}
			}
			return true, ""
		})
		// Both checks that wrote the events decided Blocked: neither
		// NodeClaim may be deleting.
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if slices.Contains(fixed[:2], nc.Name) && nc.DeletionTimestamp != nil {
				t.Errorf("NodeClaim %s is being deleted although repair is blocked", nc.Name)
			}
		}
	})
}

// claimSet names the NodeClaims that exist now.
func claimSet(t *testing.T, ctx context.Context, kube client.Client) map[string]bool {
	out := map[string]bool{}
	for _, nc := range nodeClaimList(t, ctx, kube) {
		out[nc.Name] = true
	}
	return out
}

// staticClaims names the fixed pool's live NodeClaims, sorted.
func staticClaims(t *testing.T, ctx context.Context, kube client.Client) []string {
	var out []string
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Labels[karpv1.NodePoolLabelKey] == "fixed" && nc.DeletionTimestamp == nil {
			out = append(out, nc.Name)
		}
	}
	slices.Sort(out)
	return out
}

// watchRepair waits for NodeClaim victim to be deleted for repair and
// returns when, and the NodeClaims (not in before) created no later: at
// least one must have been, with the DisruptionReason Unhealthy on the
// victim.
func watchRepair(t *testing.T, ctx context.Context, kube client.Client, victim string, before map[string]bool, timeout time.Duration) (time.Time, []string) {
	t.Helper()
	var deleted time.Time
	var replacements []string
	eventually(t, timeout, "NodeClaim "+victim+" deleted for repair", func() (bool, string) {
		claims := nodeClaimList(t, ctx, kube)
		var v *karpv1.NodeClaim
		for i := range claims {
			if claims[i].Name == victim {
				v = &claims[i]
			}
		}
		if v == nil {
			t.Fatalf("NodeClaim %s vanished although the test holds it with finalizer %s", victim, testHold)
		}
		if v.DeletionTimestamp == nil {
			return false, "not deleted yet"
		}
		if cond := v.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason); cond == nil || cond.Reason != repair.ReasonUnhealthy {
			t.Errorf("NodeClaim %s is deleted with DisruptionReason %+v, want reason %s", victim, cond, repair.ReasonUnhealthy)
		}
		deleted = v.DeletionTimestamp.Time
		for _, nc := range claims {
			if !before[nc.Name] && !nc.CreationTimestamp.After(deleted) {
				replacements = append(replacements, nc.Name)
			}
		}
		return true, ""
	})
	release(t, ctx, kube, victim)
	if len(replacements) == 0 {
		t.Errorf("no replacement NodeClaim was created before NodeClaim %s was deleted", victim)
	}
	return deleted, replacements
}

// testHold is the test's own finalizer on a victim NodeClaim: the claim
// stays readable after karpfunc's termination removes its own finalizer,
// so the test sees its deletion timestamp however fast the forced
// termination runs.
const testHold = "tests.karpfunc.dev/hold"

func hold(t *testing.T, ctx context.Context, kube client.Client, name string) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Finalizers = append(nc.Finalizers, testHold)
	if err := kube.Patch(ctx, nc, patch); err != nil {
		t.Fatal(err)
	}
}

func release(t *testing.T, ctx context.Context, kube client.Client, name string) {
	t.Helper()
	eventually(t, time.Minute, "test finalizer released from "+name, func() (bool, string) {
		nc := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			return client.IgnoreNotFound(err) == nil, err.Error()
		}
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		nc.Finalizers = slices.DeleteFunc(nc.Finalizers, func(f string) bool { return f == testHold })
		if err := kube.Patch(ctx, nc, patch); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// repairVictim is an initialized, live NodeClaim of NodePool general
// running web pods: its name (the VM's), its node and the pods.
func repairVictim(t *testing.T, ctx context.Context, kube client.Client) (string, string, []string) {
	t.Helper()
	var victim, node string
	var names []string
	eventually(t, time.Minute, "a NodeClaim running web pods", func() (bool, string) {
		pods, err := podsWithLabel(ctx, kube, "app", "web")
		if err != nil {
			return false, err.Error()
		}
		byNode := map[string][]string{}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
			}
		}
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if nc.DeletionTimestamp == nil && nc.Labels[karpv1.NodePoolLabelKey] == "general" &&
				nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() && len(byNode[nc.Status.NodeName]) > 0 {
				victim, node, names = nc.Name, nc.Status.NodeName, byNode[nc.Status.NodeName]
				return true, ""
			}
		}
		return false, "none"
	})
	return victim, node, names
}

// runningOff waits until node is gone and all want pods of app run on
// other nodes.
func runningOff(t *testing.T, ctx context.Context, kube client.Client, app string, want int, node string) {
	t.Helper()
	eventually(t, 3*time.Minute, app+" running again, node "+node+" gone", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}); client.IgnoreNotFound(err) != nil || err == nil {
			return false, fmt.Sprintf("node %s still there (%v)", node, err)
		}
		if ok, why := allRunning(ctx, kube, app, want); !ok {
			return false, why
		}
		pods, err := podsWithLabel(ctx, kube, "app", app)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.Spec.NodeName == node {
				return false, "pod " + p.Name + " is still bound to " + node
			}
		}
		return true, ""
	})
}
