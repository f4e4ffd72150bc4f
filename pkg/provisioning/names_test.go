package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// namesPool creates a NodePool only podFor's pods select, and returns its name.
func namesPool(t testing.TB, ctx context.Context, kube client.Client, pool string) {
	t.Helper()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
}

// pendingPod creates an unschedulable pod for pool.
func pendingPod(t *testing.T, ctx context.Context, kube client.Client, pool string) *corev1.Pod {
	t.Helper()
	p := testfixtures.Pod(testfixtures.PodOptions{Name: pool + "-web", CPU: "1"})
	p.Spec.NodeSelector = map[string]string{"pool": pool}
	if err := kube.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	unschedulable(t, ctx, kube, p)
	return p
}

// claimsOf lists the NodeClaims of pool.
func claimsOf(t *testing.T, ctx context.Context, kube client.Client, pool string) []karpv1.NodeClaim {
	t.Helper()
	var list karpv1.NodeClaimList
	if err := kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// remove deletes a NodeClaim for good (finalizer released, as termination
// does once its VM is gone) and waits until the API server no longer has it.
func remove(t *testing.T, ctx context.Context, kube client.Client, name string) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	nc.Finalizers = nil
	if err := kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		} else if err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("NodeClaim %s still exists", name)
}

// TestNodeClaimNamesNeverReused (issue 18, item 9): a pod's NodeClaim is
// deleted and gone, the pod is pending again, and the next passes make it
// new NodeClaims. Each must have a name never used before in the cluster:
// the VM, NIC and OS disk are named after it, and so are its events,
// decision records and metrics. Before the name counter, the next claim for
// the same pod took generation 0 again (the old claim being gone) and so
// the old claim's name.
func TestNodeClaimNamesNeverReused(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	ctx := context.Background()
	prov := provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test",
		Logger: slog.New(slog.DiscardHandler)})
	const pool = "reuse"
	namesPool(t, ctx, w.kube, pool)
	pendingPod(t, ctx, w.kube, pool)

	used := map[string]bool{}
	for round := range 3 {
		res, err := prov.Provision(ctx)
		if err != nil || len(res.Created) != 1 {
			t.Fatalf("round %d: created %v, %v; want one NodeClaim for the pending pod", round, res.Created, err)
		}
		name := res.Created[0]
		if used[name] {
			t.Fatalf("round %d: NodeClaim name %s used again (earlier: %v)", round, name, used)
		}
		used[name] = true
		remove(t, ctx, w.kube, name)
	}
}

// lockstepClient lets the first `passes` callers of List for
// PodDisruptionBudgets (the last LIST of a pass's snapshot) go on only
// when all have arrived: so many provisioning passes act on the same view,
// as a redelivery whose session lock was lost does alongside the first
// delivery.
type lockstepClient struct {
	client.Client
	arrived atomic.Int32
	passes  int32
	all     sync.WaitGroup
}

func newLockstep(kube client.Client, passes int) *lockstepClient {
	c := &lockstepClient{Client: kube, passes: int32(passes)}
	c.all.Add(passes)
	return c
}

func (c *lockstepClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if _, ok := list.(*policyv1.PodDisruptionBudgetList); ok && c.arrived.Add(1) <= c.passes {
		c.all.Done()
		done := make(chan struct{})
		go func() { c.all.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			return fmt.Errorf("lockstep: the other passes never listed")
		}
	}
	return nil
}

// TestConcurrentPassesCreateOnce: two deliveries of the same provisioning
// message run at once (a session lock lost), both read the cluster before
// either creates anything, then both create. The pod gets exactly one
// NodeClaim: both derive the same name, and the API server lets only one
// create it. Then a later redelivery (sequential) creates nothing either.
func TestConcurrentPassesCreateOnce(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	ctx := context.Background()
	const pool = "twice"
	namesPool(t, ctx, w.kube, pool)
	pendingPod(t, ctx, w.kube, pool)

	lock := newLockstep(w.kube, 2)
	results := make([]provisioning.Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov := provisioning.New(provisioning.Options{Kube: lock, Catalog: w.cat, ClusterName: "test",
				Logger: slog.New(slog.DiscardHandler)})
			results[i], errs[i] = prov.Provision(ctx)
		}()
	}
	wg.Wait()
	created := 0
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("pass %d: %v", i, errs[i])
		}
		created += len(results[i].Created)
	}
	claims := claimsOf(t, ctx, w.kube, pool)
	if len(claims) != 1 || created != 1 {
		t.Fatalf("two passes on the same view: %d NodeClaims (%d reported created): %s / %s; want exactly one",
			len(claims), created, results[0].Pods, results[1].Pods)
	}
	for i := range 2 {
		if o := results[i].Pods; len(o) != 1 || o[0].Target != claims[0].Name {
			t.Errorf("pass %d placed the pod %s; want it on %s", i, o, claims[0].Name)
		}
	}

	prov := provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test",
		Logger: slog.New(slog.DiscardHandler)})
	again, err := prov.Provision(ctx)
	if err != nil || len(again.Created) != 0 || len(claimsOf(t, ctx, w.kube, pool)) != 1 {
		t.Fatalf("a later redelivery: created %v, %v; want nothing new", again.Created, err)
	}
}
