package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// Two sizes, so a pass that sees two pods can pack them on one bigger VM
// (a NodeClaim name no other pass makes). No overhead: the figures below
// are the whole story.
const limitsCatalog = `{"region":"eastus","zones":["eastus-1"],"instanceTypes":[
 {"name":"Standard_D4s_v5","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.20,"available":true}]},
 {"name":"Standard_D8s_v5","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.40,"available":true}]}]}`

// hookedConfig runs hook once, after the first NodeClaim list through cfg
// has its response and before the caller sees it: the pass's snapshot is
// taken, nothing is created yet.
func hookedConfig(base *rest.Config, hook func()) *rest.Config {
	cfg := rest.CopyConfig(base)
	var once sync.Once
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/nodeclaims") {
				once.Do(hook)
			}
			return resp, err
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLimitsUnderRacingPasses: two provisioning passes overlap (a lost
// session lock): pass A snapshots while only pod a is pending, pass B
// snapshots once pod b is pending too but before A has created anything,
// and B acts only after A has finished. B's snapshot is stale; the NodePool's
// cpu limit must hold anyway.
func TestLimitsUnderRacingPasses(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	cp, kube, cat := w.cp, w.kube, w.cat
	ctx := context.Background()

	for i, c := range []struct {
		name   string
		limits karpv1.Limits
		// claims is how many NodeClaims the two passes end with; refused
		// how many B did not create because a fresh count was over;
		// deferred whether B left its pods for a fresh pass because A
		// retired the name generation of B's view.
		claims, refused int
		deferred        bool
	}{
		// Without a limit B, acting on its stale snapshot, would add a
		// claim of its own (the passes really overlapped); it does not,
		// because A moved the name counter past B's view after its
		// snapshot (package claimnames): B leaves its pods to a fresh pass.
		{name: "no limit: the stale pass leaves its pods to a fresh pass", claims: 1, deferred: true},
		{name: "cpu limit 8: the stale pass must not go over it", claims: 1, refused: 1,
			limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}},
		{name: "nodes limit 1: the stale pass must not go over it", claims: 1, refused: 1,
			limits: karpv1.Limits{"nodes": resource.MustParse("1")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := fmt.Sprintf("np-%d", i)
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}}
			np.Spec.Limits = c.limits
			if err := kube.Create(ctx, np); err != nil {
				t.Fatal(err)
			}
			// Pods a and b, 3 cpu each, for this pool only; b is not
			// marked Unschedulable yet, so pass A does not see it.
			pods := map[string]*corev1.Pod{}
			for _, n := range []string{"a", "b"} {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pool + "-" + n, Namespace: "default"},
					Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": pool},
						Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
				if err := kube.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
				pods[n] = p
			}
			unschedulable(t, ctx, kube, pods["a"])

			aSnap, bSnap, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			newProvisioner := func(hook func()) *provisioning.Provisioner {
				k := testenv.Client(t, hookedConfig(cp.RESTConfig(), hook))
				return provisioning.New(provisioning.Options{Kube: k, Catalog: cat, ClusterName: "test",
					Logger: slog.New(slog.DiscardHandler)})
			}
			// A waits after its snapshot until B has taken its own; B
			// waits after its snapshot until A has finished.
			passA := newProvisioner(func() { close(aSnap); <-bSnap })
			passB := newProvisioner(func() { close(bSnap); <-aDone })
			var wg sync.WaitGroup
			var resA, resB provisioning.Result
			var errA, errB error
			wg.Go(func() { defer close(aDone); resA, errA = passA.Provision(ctx) })
			<-aSnap
			unschedulable(t, ctx, kube, pods["b"])
			wg.Go(func() { resB, errB = passB.Provision(ctx) })
			wg.Wait()
			if errA != nil || errB != nil {
				t.Fatalf("Provision: A %+v, %v; B %+v, %v", resA, errA, resB, errB)
			}

			var ncs karpv1.NodeClaimList
			if err := kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
				t.Fatal(err)
			}
			var launched resource.Quantity
			var names []string
			for _, nc := range ncs.Items {
				names = append(names, nc.Name)
				launched.Add(nc.Status.Capacity[corev1.ResourceCPU])
			}
			if limit, ok := c.limits[corev1.ResourceCPU]; ok && launched.Cmp(limit) > 0 {
				t.Errorf("NodeClaims %v launched %s cpu; the NodePool's limit is %s", names, launched.String(), limit.String())
			}
			if limit, ok := c.limits["nodes"]; ok && int64(len(ncs.Items)) > limit.Value() {
				t.Errorf("NodeClaims %v; the NodePool's limit is %s nodes", names, limit.String())
			}
			if deferred := resB.Pods.Count(provisioning.Deferred) > 0 && len(resB.OverLimit) == 0; deferred != c.deferred {
				t.Errorf("B's pods: %s; deferred for a fresh pass: %t, want %t", resB.Pods, deferred, c.deferred)
			}
			if len(ncs.Items) != c.claims || len(resB.OverLimit) != c.refused {
				t.Errorf("NodeClaims %v (A created %v, B created %v, B refused %q); want %d claims, %d refused",
					names, resA.Created, resB.Created, resB.OverLimit, c.claims, c.refused)
			}
		})
	}
}

// unschedulable marks pod as kube-scheduler does when nothing fits it.
func unschedulable(t *testing.T, ctx context.Context, kube client.Client, pod *corev1.Pod) {
	t.Helper()
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// listHook runs hook(n) after the n-th NodeClaim list (1-based) through cfg
// has its response and before the caller sees it.
func listHook(base *rest.Config, hook func(n int)) *rest.Config {
	cfg := rest.CopyConfig(base)
	var mu sync.Mutex
	n := 0
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/nodeclaims") {
				mu.Lock()
				n++
				i := n
				mu.Unlock()
				hook(i)
			}
			return resp, err
		})
	})
	return cfg
}

// TestLimitsReCheckedUnderLease: two overlapping passes with different
// snapshots both reach their limits re-check before either creates. Each
// re-check waits (up to 3 s) for the other's: without the NodePool's limits
// Lease both lists see no NodeClaim and both create, 12 cpu against a
// limit of 8; with it, the second re-check runs only after the first pass
// created its claim, sees it, and refuses.
func TestLimitsReCheckedUnderLease(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	cp, kube, cat := w.cp, w.kube, w.cat
	ctx := context.Background()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "leased"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"leased"}}}
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*corev1.Pod{}
	for _, n := range []string{"a", "b"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leased-" + n, Namespace: "default"},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "leased"}, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}}}
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods[n] = p
	}
	unschedulable(t, ctx, kube, pods["a"])

	aSnap, bSnap := make(chan struct{}), make(chan struct{})
	aCheck, bCheck := make(chan struct{}), make(chan struct{})
	wait := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(3 * time.Second):
		}
	}
	newProvisioner := func(snapped, checking, other chan struct{}, otherSnap chan struct{}) *provisioning.Provisioner {
		k := testenv.Client(t, listHook(cp.RESTConfig(), func(n int) {
			switch n {
			case 1: // the snapshot
				close(snapped)
				if otherSnap != nil {
					<-otherSnap
				}
			case 2: // the limits re-check
				close(checking)
				wait(other)
			}
		}))
		return provisioning.New(provisioning.Options{Kube: k, Catalog: cat, ClusterName: "test",
			Logger: slog.New(slog.DiscardHandler)})
	}
	passA := newProvisioner(aSnap, aCheck, bCheck, bSnap)
	passB := newProvisioner(bSnap, bCheck, aCheck, nil)
	var wg sync.WaitGroup
	var resA, resB provisioning.Result
	var errA, errB error
	wg.Go(func() { resA, errA = passA.Provision(ctx) })
	<-aSnap
	unschedulable(t, ctx, kube, pods["b"])
	wg.Go(func() { resB, errB = passB.Provision(ctx) })
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("Provision: A %s, %v; B %s, %v", resA.Pods, errA, resB.Pods, errB)
	}
	var ncs karpv1.NodeClaimList
	if err := kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		t.Fatal(err)
	}
	var launched resource.Quantity
	var names []string
	for _, nc := range ncs.Items {
		names = append(names, nc.Name)
		launched.Add(nc.Status.Capacity[corev1.ResourceCPU])
	}
	if launched.Cmp(np.Spec.Limits[corev1.ResourceCPU]) > 0 || len(ncs.Items) != 1 || len(resA.OverLimit)+len(resB.OverLimit) != 1 {
		t.Errorf("NodeClaims %v launched %s cpu (limit 8); A created %v refused %q, B created %v refused %q; want one claim and one refusal",
			names, launched.String(), resA.Created, resA.OverLimit, resB.Created, resB.OverLimit)
	}
}
