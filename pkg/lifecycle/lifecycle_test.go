package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/ownership"
)

const (
	sub = testenv.SubscriptionID
	rg  = testenv.ResourceGroup
)

// world is a real API server (etcd + kube-apiserver, CRDs) and a real ARM
// emulator behind the real launcher; no kubelet, so evicted pods stay
// terminating until the test finishes them.
type world struct {
	kube    client.Client
	evictor lifecycle.Evictor
	// evictions counts the Eviction API requests that reached the wire,
	// retries included.
	evictions *atomic.Int64
	launcher  *azure.Launcher
	arm       *armemulator.Server
	// cfg reaches the same API server, for clients a test wraps.
	cfg *rest.Config
}

func start(t *testing.T) *world {
	t.Helper()
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube := testenv.Client(t, cp.RESTConfig())
	evictions := &atomic.Int64{}
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countEvictions{rt: rt, n: evictions} })
	evictor, err := lifecycle.NewEvictor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// No controller-manager: create the service accounts pods need.
	testenv.DefaultServiceAccounts(t, kube, "default", "kube-system")
	arm, l := testenv.ARM(t)
	return &world{kube: kube, evictor: evictor, evictions: evictions, launcher: l, arm: arm, cfg: rest.CopyConfig(cp.RESTConfig())}
}

// deletingClaim creates a Node, a VM and a launched NodeClaim for name,
// then deletes the NodeClaim (it stays, held by the termination finalizer).
func (w *world) deletingClaim(t *testing.T, ctx context.Context, name string, tgp *metav1.Duration) *corev1.Node {
	t.Helper()
	inst, err := w.launcher.Create(ctx, azure.LaunchRequest{Name: name, NodePool: "np", InstanceType: "Standard_D2s_v5", Reservations: d2Reservations})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: inst.ProviderID}}
	if err := w.kube.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer},
		Labels: map[string]string{karpv1.NodePoolLabelKey: "np"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
			TerminationGracePeriod: tgp,
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable,
				Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5"}}}}}
	ownership.Mark(nc)
	if err := w.kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = inst.ProviderID, name
	if err := w.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := w.kube.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return node
}

// countEvictions counts POSTs to pods/eviction on their way to the API
// server, so a test sees client-side retries that the caller never does.
type countEvictions struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countEvictions) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/eviction") {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(req)
}

type podSpec struct {
	name      string
	daemon    bool
	critical  bool
	tolerates bool
	annotate  bool // karpenter.sh/do-not-disrupt
	guarded   bool // under a PDB that allows no disruption
	// unobserved: under a PDB whose status the disruption controller has
	// not written yet (this world runs no controller-manager, so it never
	// will); the API server answers 429 with Retry-After: 10.
	unobserved bool
}

func (w *world) pod(t *testing.T, ctx context.Context, node string, ps podSpec) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: "default", Labels: map[string]string{"pod": ps.name}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr(int64(30)),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if ps.daemon {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: types.UID("ds-" + ps.name)}}
	}
	if ps.critical {
		p.Spec.PriorityClassName = "system-cluster-critical"
		p.Namespace = "kube-system"
	}
	if ps.tolerates {
		p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
	}
	if ps.annotate {
		p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	}
	if ps.guarded || ps.unobserved {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: ps.name, Namespace: p.Namespace},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": ps.name}}}}
		if err := w.kube.Create(ctx, pdb); err != nil {
			t.Fatal(err)
		}
	}
	if ps.guarded {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := w.kube.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ps.name}, pdb); err != nil {
			t.Fatal(err)
		}
		// What the disruption controller would write: nothing may go.
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0,
			CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
		if err := w.kube.Status().Update(ctx, pdb); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.kube.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Running and Ready, as a kubelet would report: a Pending pod is
	// evicted without asking its PDB.
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := w.kube.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// terminating lists the pods on node that have a deletion timestamp.
func (w *world) terminating(t *testing.T, ctx context.Context, node string) []string {
	t.Helper()
	var pods corev1.PodList
	if err := w.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// finish is the kubelet confirming that the terminating pods are gone.
func (w *world) finish(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	var pods corev1.PodList
	if err := w.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			if err := w.kube.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestTerminate(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		pods []podSpec
		tgp  *metav1.Duration
		// advance moves the controller's clock past the deletion timestamp.
		advance time.Duration
		// waves are the pods each Terminate call evicts, in order; after
		// each wave the test finishes the terminating pods.
		waves    [][]string
		finished bool
		expired  bool
	}{
		{
			name: "drains in Karpenter's order; do-not-disrupt does not block an explicit delete; tolerating pods stay",
			pods: []podSpec{{name: "app"}, {name: "pinned", annotate: true}, {name: "ds", daemon: true},
				{name: "crit", critical: true}, {name: "critds", critical: true, daemon: true}, {name: "tolerant", tolerates: true}},
			waves:    [][]string{{"app", "pinned"}, {"ds"}, {"crit"}, {"critds"}},
			finished: true,
		},
		{
			name:  "a PDB that allows no disruption blocks the drain",
			pods:  []podSpec{{name: "guarded-a", guarded: true}},
			waves: [][]string{nil, nil},
		},
		{
			name:     "terminationGracePeriod bounds a drain blocked by a PDB: the pod is deleted when its own grace period is all that is left",
			pods:     []podSpec{{name: "guarded-b", guarded: true}},
			tgp:      &metav1.Duration{Duration: 40 * time.Second},
			advance:  15 * time.Second, // 25s left < the pod's 30s
			waves:    [][]string{{"guarded-b"}},
			finished: true,
		},
		{
			name:     "once terminationGracePeriod has run out the VM goes with the pods still on it",
			pods:     []podSpec{{name: "guarded-c", guarded: true}},
			tgp:      &metav1.Duration{Duration: 10 * time.Second},
			advance:  time.Minute,
			waves:    [][]string{nil},
			finished: true,
			expired:  true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("nc-%d", time.Now().UnixNano()%1e9)
			node := w.deletingClaim(t, ctx, name, c.tgp)
			for _, p := range c.pods {
				w.pod(t, ctx, node.Name, p)
			}
			nc := &karpv1.NodeClaim{}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
				t.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(nc.DeletionTimestamp.Add(c.advance))
			lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
			var res lifecycle.TerminateResult
			var err error
			if !c.expired {
				for i, want := range c.waves {
					res, err = lc.Terminate(ctx, name)
					if !lifecycle.IsDrainPending(err) {
						t.Fatalf("wave %d: Terminate = %+v, %v; want a DrainPendingError", i, res, err)
					}
					slices.Sort(want)
					if got := w.terminating(t, ctx, node.Name); !slices.Equal(got, want) {
						t.Fatalf("wave %d: terminating pods %v, want %v", i, got, want)
					}
					w.finish(t, ctx, node.Name)
				}
			}
			if !c.finished {
				if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
					t.Fatalf("NodeClaim gone although its drain is blocked: %v", err)
				}
				if _, err := w.launcher.Get(ctx, name); err != nil {
					t.Fatalf("VM gone although the drain is blocked: %v", err)
				}
				return
			}
			res, err = w.terminateAcrossDelete(t, ctx, lc, name)
			if err != nil || !res.Finished || res.GracePeriodExpired != c.expired {
				t.Fatalf("Terminate = %+v, %v; want finished, gracePeriodExpired=%t", res, err, c.expired)
			}
			if _, err := w.launcher.Get(ctx, name); !azure.IsNotFound(err) {
				t.Errorf("VM still there after termination: %v", err)
			}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{}); err == nil {
				t.Errorf("NodeClaim still there after termination")
			}
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); err == nil {
				t.Errorf("Node still there after termination")
			}
		})
	}
}

// TestTerminateBlockedEviction: a PDB that refuses an eviction ends the
// Terminate call with one request and a DrainPendingError, whichever way
// the API server refuses. A PDB whose status is not observed yet gets a 429
// with Retry-After, which client-go would otherwise retry ten times (~100 s)
// inside the invocation.
func TestTerminateBlockedEviction(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		pod  podSpec
		// retryAfter is the API server's Retry-After, carried up to the
		// DrainPendingError so the retry is scheduled after it.
		retryAfter time.Duration
	}{
		{name: "the PDB allows no disruption", pod: podSpec{name: "blocked-observed", guarded: true}},
		{name: "the PDB's status is not observed yet", pod: podSpec{name: "blocked-unobserved", unobserved: true}, retryAfter: 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("nc-%d", time.Now().UnixNano()%1e9)
			node := w.deletingClaim(t, ctx, name, nil)
			w.pod(t, ctx, node.Name, c.pod)
			lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})
			before := w.evictions.Load()
			res, err := lc.Terminate(ctx, name)
			if !lifecycle.IsDrainPending(err) || res.Blocked != 1 || res.Evicted != 0 {
				t.Fatalf("Terminate = %+v, %v; want one blocked eviction and a DrainPendingError", res, err)
			}
			var pending *lifecycle.DrainPendingError
			if !errors.As(err, &pending) || pending.Blocked != 1 || pending.RetryAfter != c.retryAfter {
				t.Fatalf("Terminate error %#v; want 1 blocked eviction and RetryAfter %s", err, c.retryAfter)
			}
			if want := lifecycle.DrainRetryDelay(err, time.Second*2); c.retryAfter > 0 && want != c.retryAfter {
				t.Fatalf("DrainRetryDelay = %s, want the API server's %s", want, c.retryAfter)
			}
			if n := w.evictions.Load() - before; n != 1 {
				t.Fatalf("Terminate made %d eviction requests, want exactly 1 (no client-side retry)", n)
			}
			// The Evictor itself says why, typed.
			err = w.evictor(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: c.pod.name, Namespace: "default"}})
			if !lifecycle.IsEvictionBlocked(err) {
				t.Fatalf("Evictor = %v, want an EvictionBlockedError", err)
			}
			if got := w.terminating(t, ctx, node.Name); len(got) != 0 {
				t.Fatalf("pods %v terminating although their PDB refused", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// d2Reservations are AKS's kubelet reservations for Standard_D2s_v5 (2
// vCPUs, 8 GiB) at the default 250 pods, for VMs these tests create
// directly.
var d2Reservations = ptr(catalog.KubeletReservations(2, 8192, 250))

// terminateAcrossDelete calls Terminate the way the scheduled retries do
// while the VM's delete is under way. A call that reaches the delete must
// return at once with an InstanceDeletePendingError, the VM then Deleting
// (or gone, its NIC going): nothing waits on ARM. It returns the counts of
// all the calls and the last call's error.
func (w *world) terminateAcrossDelete(t *testing.T, ctx context.Context, lc *lifecycle.Controller, name string) (lifecycle.TerminateResult, error) {
	t.Helper()
	var total lifecycle.TerminateResult
	for i := 0; ; i++ {
		res, err := lc.Terminate(ctx, name)
		total.Evicted += res.Evicted
		total.Deleted += res.Deleted
		total.Blocked += res.Blocked
		total.Finished = res.Finished
		total.GracePeriodExpired = total.GracePeriodExpired || res.GracePeriodExpired
		if !lifecycle.IsInstanceDeletePending(err) {
			return total, err
		}
		if vm, gerr := w.launcher.Get(ctx, name); gerr == nil && !strings.EqualFold(vm.State, azure.StateDeleting) {
			t.Fatalf("Terminate returned %v while VM %s is %s, not Deleting: its delete was never sent", err, name, vm.State)
		}
		if i == 100 {
			t.Fatalf("Terminate of %s: the VM's delete did not finish after %d checks: %v", name, i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Terminate never waits for the VM's delete: the call that sends it
// returns at once, and the finalizer stays until the VM and NIC are gone.
func TestTerminateDoesNotWaitForTheDelete(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	name := fmt.Sprintf("nowait-%d", time.Now().UnixNano()%1e9)
	w.deletingClaim(t, ctx, name, nil)
	w.arm.SetVMDeleteDelay(2 * time.Second)
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})
	began := time.Now()
	res, err := lc.Terminate(ctx, name)
	if !lifecycle.IsInstanceDeletePending(err) || res.Finished {
		t.Fatalf("Terminate while the VM takes 2 s to delete = %+v, %v; want an InstanceDeletePendingError", res, err)
	}
	if took := time.Since(began); took >= 2*time.Second {
		t.Fatalf("Terminate took %s: it waited for the VM's delete", took)
	}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{}); err != nil {
		t.Fatalf("NodeClaim gone while its VM is still being deleted: %v", err)
	}
	if res, err := w.terminateAcrossDelete(t, ctx, lc, name); err != nil || !res.Finished {
		t.Fatalf("Terminate once the delete finished = %+v, %v; want finished", res, err)
	}
	if _, err := w.launcher.Get(ctx, name); !azure.IsNotFound(err) {
		t.Fatalf("VM still there after termination: %v", err)
	}
}
