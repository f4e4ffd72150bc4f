package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/funchost"
	"github.com/karpfunc/karpfunc/internal/kubechaos"
	"github.com/karpfunc/karpfunc/internal/localbus"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// TestChaos runs the whole loop with faults on — ARM capacity, quota,
// throttling, 5xx and slow operations, a handler killed mid-launch, VMs that
// never join, duplicate and reordered messages — while Deployments scale up
// and down, a user deletes a NodeClaim and a spot VM is evicted; then turns
// the faults off and checks that the fleet converges with no VM or NIC
// leaked, no NodeClaim without its VM, every pod running, the PDB never
// violated and nothing dead-lettered but the message that was invalid on
// purpose. Seeds: KARPFUNC_CHAOS_SEEDS (default "1,2,3"); rounds of scaling:
// KARPFUNC_CHAOS_ROUNDS (default 5).
func TestChaos(t *testing.T) {
	seeds := []int64{1, 2, 3}
	if v := os.Getenv("KARPFUNC_CHAOS_SEEDS"); v != "" {
		seeds = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil {
				t.Fatalf("KARPFUNC_CHAOS_SEEDS=%q: %v", v, err)
			}
			seeds = append(seeds, n)
		}
	}
	rounds := 5
	if v := os.Getenv("KARPFUNC_CHAOS_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KARPFUNC_CHAOS_ROUNDS=%q: want a positive integer", v)
		}
		rounds = n
	}
	// The handler inherits the test's environment: short timeouts so
	// liveness and garbage collection act within the run.
	t.Setenv("KARPFUNC_REGISTRATION_TTL", "12s")
	t.Setenv("KARPFUNC_GC_GRACE_PERIOD", "10s")
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed, rounds) })
	}
}

const guardedMinAvailable = 3

func runChaos(t *testing.T, seed int64, rounds int) {
	env := startEnv(t, localenv.Options{ClusterName: "chaos", BootDelay: time.Second, SweepSchedule: "*/20 * * * * *",
		MaxDeliveryCount: 10, RetryDelay: 300 * time.Millisecond, BatchIdle: 500 * time.Millisecond, BatchMax: 3 * time.Second})
	ctx := context.Background()
	kube := env.Kube
	rng := rand.New(rand.NewSource(seed))
	if _, err := env.ApplyFile(ctx, filepath.Join(env.Options.RepoRoot, "examples", "nodepool.yaml")); err != nil {
		t.Fatal(err)
	}
	// Small nodes (2 and 4 vCPUs), so the workload needs many launches.
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == "karpenter.azure.com/sku-cpu" {
			np.Spec.Template.Spec.Requirements[i].Values = []string{"5"}
		}
	}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}

	// Faults.
	kills := 0
	chaos := armemulator.NewChaos(seed,
		armemulator.ChaosRule{Kind: "ZonalAllocationFailed(async)", Operation: armemulator.OpPutVM, Rate: 0.2,
			Fault: armemulator.Fault{Code: "ZonalAllocationFailed", Async: true, Message: "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone."}},
		armemulator.ChaosRule{Kind: "AllocationFailed", Operation: armemulator.OpPutVM, Rate: 0.06,
			Fault: armemulator.Fault{Code: "AllocationFailed", Message: "Allocation failed in this region."}},
		armemulator.ChaosRule{Kind: "SkuNotAvailable", Operation: armemulator.OpPutVM, Rate: 0.05,
			Fault: armemulator.Fault{Code: "SkuNotAvailable", Message: "The requested size is currently not available in this location."}},
		armemulator.ChaosRule{Kind: "FamilyQuota", Operation: armemulator.OpPutVM, Rate: 0.05,
			Fault: armemulator.Fault{Code: "OperationNotAllowed", Message: "Operation could not be completed as it results in exceeding approved standardDASv5Family Cores quota."}},
		armemulator.ChaosRule{Kind: "Throttled(429)", Operation: armemulator.OpPutNIC, Rate: 0.15,
			Fault: armemulator.Fault{Code: "TooManyRequests", RetryAfter: 200 * time.Millisecond}},
		armemulator.ChaosRule{Kind: "Throttled(429)", Operation: armemulator.OpGetVM, Rate: 0.10,
			Fault: armemulator.Fault{Code: "TooManyRequests", RetryAfter: 300 * time.Millisecond}},
		armemulator.ChaosRule{Kind: "Throttled(429)", Operation: armemulator.OpDeleteVM, Rate: 0.10,
			Fault: armemulator.Fault{Code: "TooManyRequests", RetryAfter: 300 * time.Millisecond}},
		armemulator.ChaosRule{Kind: "ServerError(500)", Operation: armemulator.OpGetNIC, Rate: 0.05,
			Fault: armemulator.Fault{Code: "InternalServerError", StatusCode: 500}},
		armemulator.ChaosRule{Kind: "Slow(1.5s)", Operation: armemulator.OpPutVM, Rate: 0.15,
			Fault: armemulator.Fault{Delay: 1500 * time.Millisecond}},
		// Polling of long-running operations.
		armemulator.ChaosRule{Kind: "PollThrottled(429)", Operation: armemulator.OpGetOperation, Rate: 0.10,
			Fault: armemulator.Fault{Code: "TooManyRequests", RetryAfter: 200 * time.Millisecond}},
		armemulator.ChaosRule{Kind: "PollServerError(500)", Operation: armemulator.OpGetOperation, Rate: 0.05,
			Fault: armemulator.Fault{Code: "InternalServerError", StatusCode: 500}},
		armemulator.ChaosRule{Kind: "PollConnectionDropped", Operation: armemulator.OpGetOperation, Rate: 0.05,
			Fault: armemulator.Fault{Drop: true}},
		armemulator.ChaosRule{Kind: "ConnectionDropped", Operation: armemulator.OpGetVM, Rate: 0.05,
			Fault: armemulator.Fault{Drop: true}},
	)
	chaos.Hook = func(req armemulator.Request, r *rand.Rand) string {
		// Kill the handler between the NIC and the VM of a launch, at most
		// twice a run: the restarted handler must finish the launch.
		if req.Operation == armemulator.OpPutVM && kills < 2 && r.Float64() < 0.15 {
			if pid := env.Host.HandlerPID(); pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				kills++
				return "HandlerKilledMidLaunch"
			}
		}
		return ""
	}
	env.ARM.SetInjector(chaos)
	// The API server fails some of the handler's writes as a busy one does.
	kubeFaults, err := kubechaos.Start(ctx, kube, kubechaos.Options{Seed: seed, Rules: []kubechaos.Rule{
		{Kind: "Conflict(409)", Resource: "nodeclaims/status", Operation: "UPDATE", Rate: 0.08, Code: 409},
		{Kind: "Conflict(409)", Resource: "nodeclaims", Operation: "UPDATE", Rate: 0.05, Code: 409},
		{Kind: "Conflict(409)", Resource: "configmaps", Operation: "UPDATE", Rate: 0.10, Code: 409},
		{Kind: "APFRejected(429)", Resource: "nodeclaims", Operation: "CREATE", Rate: 0.10, Code: 429, RetryAfterSeconds: 1},
		{Kind: "APFRejected(429)", Resource: "pods/eviction", Operation: "CREATE", Rate: 0.10, Code: 429, RetryAfterSeconds: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kubeFaults.Close(context.Background(), kube) })
	t.Cleanup(func() {
		if t.Failed() {
			var schedule []string
			for _, in := range chaos.Schedule() {
				schedule = append(schedule, in.String())
			}
			for _, in := range kubeFaults.Schedule() {
				schedule = append(schedule, in.String())
			}
			reportFailure(t, env, schedule)
		}
	})
	env.ARM.SetNeverJoins(neverJoins(seed))
	env.Host.Bus().SetChaos(&localbus.ChaosOptions{Seed: seed, DuplicateRate: 0.1, ReorderRate: 0.3})

	// A message that is invalid on purpose: the only one allowed in a DLQ.
	if err := env.Host.Publish(ctx, bus.QueueLifecycle, bus.Message{ID: "invalid-on-purpose", ContentType: messages.ContentType,
		Body: []byte(`{"specversion":"1.0","id":"invalid-on-purpose","type":"com.example.nope","source":"/tests"}`)}); err != nil {
		t.Fatal(err)
	}

	// Workload: two Deployments that scale, one under a PDB that does not.
	replicas := map[string]int32{"web": 4, "batch": 2, "guarded": 4}
	for _, d := range []struct {
		app, cpu, mem string
	}{{"web", "250m", "256Mi"}, {"batch", "1", "2Gi"}, {"guarded", "500m", "512Mi"}} {
		if err := kube.Create(ctx, deployment(d.app, replicas[d.app], d.cpu, d.mem)); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(guardedMinAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}
	if err := kube.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	watch := watchAvailable(ctx, kube, "guarded", int(replicas["guarded"]))
	eventually(t, 3*time.Minute, "guarded running", func() (bool, string) { return allRunning(ctx, kube, "guarded", 4) })

	start := time.Now()
	relayKills := 0
	for r := 0; r < rounds; r++ {
		replicas["web"] = int32(6 + rng.Intn(20))
		replicas["batch"] = int32(2 + rng.Intn(12))
		scale(t, ctx, kube, "web", replicas["web"])
		scale(t, ctx, kube, "batch", replicas["batch"])
		t.Logf("round %d: web=%d batch=%d", r, replicas["web"], replicas["batch"])
		if r == rounds/2 {
			// The relay dies while its batch window is open, and restarts.
			time.Sleep(time.Duration(200+rng.Intn(600)) * time.Millisecond)
			if err := env.KillRelay(); err != nil {
				t.Fatal(err)
			}
			relayKills++
			t.Logf("round %d: relay killed mid-batch and restarted", r)
		}
		time.Sleep(4 * time.Second)
		switch r % 3 {
		case 1: // a user deletes a NodeClaim, preferably one under the PDB
			if name := pickNodeClaim(ctx, t, kube, rng, "guarded", true); name != "" {
				t.Logf("round %d: deleting NodeClaim %s", r, name)
				nc := &karpv1.NodeClaim{}
				nc.Name = name
				if err := kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}
		case 2: // Azure evicts a spot VM (not one under the PDB: that is involuntary)
			if name := pickNodeClaim(ctx, t, kube, rng, "guarded", false); name != "" {
				if err := env.ARM.Evict(name); err == nil {
					t.Logf("round %d: evicted spot VM %s", r, name)
				}
			}
		}
	}

	// Faults off; the loop must converge.
	chaos.Stop()
	kubeFaults.Stop()
	env.ARM.SetNeverJoins(nil)
	env.Host.Bus().SetChaos(nil)
	faultsOff := time.Now()
	lastWhy := ""
	// Converged means converged for a while: a single good poll can fall
	// between a late disruption (a scheduled liveness check, a Sweep pass
	// collecting a spot-evicted VM) and the replacement pod it causes.
	const stablePolls = 12 // eventually polls every 250ms: 3 s
	stable, stableSince := 0, time.Time{}
	eventually(t, 4*time.Minute, "convergence", func() (bool, string) {
		ok, why := converged(ctx, env, replicas)
		if !ok {
			stable = 0
		} else if stable++; stable == 1 {
			stableSince = time.Now()
		}
		if ok && stable < stablePolls {
			why = fmt.Sprintf("converged for %d of %d polls", stable, stablePolls)
		}
		if why != lastWhy && (!ok || stable == 1) {
			t.Logf("  converging (%s): %s", time.Since(faultsOff).Round(100*time.Millisecond), why)
		}
		lastWhy = why
		return ok && stable >= stablePolls, why
	})
	convergedIn := stableSince.Sub(faultsOff)
	armed, minUp, samples := watch.result()

	// Invariants.
	if problems := fleetReport(ctx, env); len(problems) > 0 {
		t.Errorf("fleet inconsistent: %v", problems)
	}
	if !armed || samples == 0 {
		t.Errorf("the PDB watch never saw all guarded pods running")
	} else if minUp < guardedMinAvailable {
		t.Errorf("PDB violated: only %d guarded pods were running at one point; minAvailable is %d", minUp, guardedMinAvailable)
	}
	var pending []string
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning && p.DeletionTimestamp == nil {
			// Say enough to tell a pod that was just replaced from one
			// that was stranded.
			why := string(p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
					why += " " + c.Reason + ": " + c.Message
				}
			}
			pending = append(pending, fmt.Sprintf("%s (%s, node %q, created %s ago)", p.Name, why, p.Spec.NodeName,
				time.Since(p.CreationTimestamp.Time).Round(100*time.Millisecond)))
		}
	}
	if len(pending) > 0 {
		t.Errorf("pods not running: %v", pending)
	}
	dead := map[string]int{}
	for _, q := range []string{bus.QueueProvision, bus.QueueLifecycle} {
		dls, err := env.Host.DeadLetters(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range dls {
			if dl.ID == "invalid-on-purpose" {
				continue
			}
			t.Errorf("dead-lettered on %s: %s (%s): %s", q, dl.ID, dl.DeadLetterReason, dl.DeadLetterErrorDescription)
		}
		dead[q] = len(dls)
	}
	if got := dead[bus.QueueLifecycle]; got < 1 {
		t.Errorf("the invalid message is not in the lifecycle dead-letter queue")
	}

	// Figures.
	c := env.ARM.Counters()
	stats := env.Host.Stats()
	fn := env.Host.FunctionStats()
	evs := eventCounts(ctx, t, kube)
	unavailable := unavailableEntries(ctx, kube)
	var abandoned, redelivered, reordered int64
	for _, s := range stats {
		abandoned += s.Abandoned
		redelivered += s.Redelivered
		reordered += s.Reordered
	}
	var ncs karpv1.NodeClaimList
	if err := kube.List(ctx, &ncs); err != nil {
		t.Fatal(err)
	}
	t.Logf("CHAOS seed=%d rounds=%d run=%s", seed, rounds, faultsOff.Sub(start).Round(time.Second))
	t.Logf("  launches: %d VM PUTs accepted, %d NIC PUTs, %d VM deletes, %d NIC deletes, %d spot evictions; %d NodeClaims at the end",
		c.VMCreates, c.NICCreates, c.VMDeletes, c.NICDeletes, c.Evictions, len(ncs.Items))
	t.Logf("  failures injected: ARM %s; Kubernetes writes %s", formatCounts(chaos.Counts()), formatCounts(kubeFaults.Counts()))
	if len(kubeFaults.Counts()) == 0 {
		t.Errorf("no Kubernetes write was failed: the fault webhook is not reached")
	}
	t.Logf("  retries: %d invocations failed and redelivered (abandoned), %d duplicate deliveries, %d reordered deliveries, %d handler restarts, %d relay kills; invocations %s",
		abandoned, redelivered, reordered, env.Host.Restarts(), relayKills, formatFunctionStats(fn))
	var described []string
	for _, e := range unavailable {
		described = append(described, e.String())
	}
	t.Logf("  offerings marked unavailable: %d now (%s)", len(unavailable), strings.Join(described, "; "))
	t.Logf("  events: %s", formatCounts(evs))
	t.Logf("  PDB: min %d of %d guarded pods running (minAvailable %d) over %d samples; dead letters: %v", minUp, replicas["guarded"], guardedMinAvailable, samples, dead)
	t.Logf("  time to converge after faults off: %s", convergedIn.Round(100*time.Millisecond))
	for _, fnName := range []string{"Provision", "Lifecycle"} {
		if reasons := failureReasons(env.LogPath, fnName); len(reasons) > 0 {
			t.Logf("  %s failures by reason: %s", fnName, formatCounts(reasons))
		}
	}
}

func converged(ctx context.Context, env *localenv.Env, replicas map[string]int32) (bool, string) {
	for _, app := range []string{"guarded", "web", "batch"} {
		if ok, why := allRunning(ctx, env.Kube, app, int(replicas[app])); !ok {
			return false, why
		}
	}
	if problems := fleetReport(ctx, env); len(problems) > 0 {
		return false, strings.Join(problems, "; ")
	}
	return nodePoolCountsNodes(ctx, env.Kube)
}

// pickNodeClaim picks a live, initialized NodeClaim whose node does (with
// true) or does not (false) run a pod of app; "" when there is none. For
// eviction (with false) only spot NodeClaims qualify.
func pickNodeClaim(ctx context.Context, t *testing.T, kube client.Client, rng *rand.Rand, app string, with bool) string {
	t.Helper()
	var ncs karpv1.NodeClaimList
	if err := kube.List(ctx, &ncs); err != nil {
		t.Fatal(err)
	}
	pods, err := podsWithLabel(ctx, kube, "app", app)
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	for _, p := range pods {
		hosts[p.Spec.NodeName] = true
	}
	var cands []string
	for _, nc := range ncs.Items {
		if nc.DeletionTimestamp != nil || nc.Status.NodeName == "" || hosts[nc.Status.NodeName] != with {
			continue
		}
		if !with && nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot {
			continue
		}
		cands = append(cands, nc.Name)
	}
	if len(cands) == 0 {
		return ""
	}
	return cands[rng.Intn(len(cands))]
}

// nodePoolCountsNodes checks NodePool status.resources["nodes"] against
// the NodeClaims that exist.
func nodePoolCountsNodes(ctx context.Context, kube client.Client) (bool, string) {
	var ncs karpv1.NodeClaimList
	if err := kube.List(ctx, &ncs); err != nil {
		return false, err.Error()
	}
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		return false, err.Error()
	}
	got := np.Status.Resources[corev1.ResourceName("nodes")]
	if got.Value() != int64(len(ncs.Items)) {
		return false, fmt.Sprintf("NodePool general status.resources.nodes=%s, %d NodeClaims", got.String(), len(ncs.Items))
	}
	return true, ""
}

func formatFunctionStats(m map[string]funchostStats) string {
	var parts []string
	for _, name := range []string{"Provision", "Lifecycle", "Sweep"} {
		s := m[name]
		parts = append(parts, fmt.Sprintf("%s %d (%d failed)", name, s.Invocations, s.Failed))
	}
	return strings.Join(parts, ", ")
}

func ptrTo[T any](v T) *T { return &v }

type funchostStats = funchost.FunctionStats
