package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/apis"
)

// TestCache runs the warm cache against a real API server: a change made
// just before a pass is in its snapshot (whether the changed kind's watch
// is the busy one or an idle one that must be nudged), an expired watch
// relists, the objects passes write to are copies, and a cluster over the
// memory budget is refused with its size.
func TestCache(t *testing.T) {
	kube, cache := startCache(t)
	coldRelists := cache.Stats().Relists

	t.Run("change just before the pass", func(t *testing.T) {
		// The pod is created, then a node deleted: at the pass, the node
		// watch is at the quorum resourceVersion only once it delivered
		// the delete, and the pod watch only by a bookmark.
		mustCreate(t, kube, testPod("just-created", ""))
		if err := kube.Delete(t.Context(), testNode("node-2")); err != nil {
			t.Fatal(err)
		}
		snap := mustCluster(t, cache)
		if !hasPod(snap, "just-created") {
			t.Error("the pod created just before the pass is not in its snapshot")
		}
		if hasNode(snap, "node-2") {
			t.Error("the node deleted just before the pass is still in its snapshot")
		}
		if got := cache.Stats().Relists; got != coldRelists {
			t.Errorf("relists = %d after the cold start's %d: a warm pass caught up by reading everything again", got, coldRelists)
		}
	})

	t.Run("snapshots are copies where passes write", func(t *testing.T) {
		snap := mustCluster(t, cache)
		snap.Nodes[0].Labels = map[string]string{"written": "by-a-pass"}
		snap.Nodes[0].Spec.Unschedulable = true
		again := mustCluster(t, cache)
		if again.Nodes[0].Labels["written"] != "" || again.Nodes[0].Spec.Unschedulable {
			t.Error("a write to a snapshot's Node reached the cache")
		}
	})

	t.Run("too large for the budget", func(t *testing.T) {
		small := NewCache(kube, CacheOptions{Budget: 4 << 10})
		t.Cleanup(small.Close)
		_, err := small.Cluster(t.Context())
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) {
			t.Fatalf("error = %v, want TooLargeError", err)
		}
		for _, want := range []string{"2 nodes", "2 pods", "budget of 0 MiB"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if small.Stats().ListedObjects != 0 {
			t.Errorf("decoded %d objects before refusing", small.Stats().ListedObjects)
		}
	})
}

// startCache starts a control plane with 3 nodes and a pod, and a cache
// that has taken its cold snapshot.
func startCache(t *testing.T) (client.WithWatch, *Cache) {
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube, err := client.NewWithWatch(cp.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	testenv.DefaultServiceAccounts(t, kube, "default")
	for i := range 3 {
		mustCreate(t, kube, testNode(fmt.Sprintf("node-%d", i)))
	}
	mustCreate(t, kube, testPod("bound-0", "node-0"))
	// RelistBelow -1: no kind is relisted for being small, so a kind that
	// lags must catch up by its watch.
	cache := NewCache(kube, CacheOptions{RelistBelow: -1})
	t.Cleanup(cache.Close)
	snap := mustCluster(t, cache)
	if len(snap.Nodes) != 3 || len(snap.Pods) != 1 {
		t.Fatalf("cold snapshot: %d nodes, %d pods; want 3 and 1", len(snap.Nodes), len(snap.Pods))
	}
	return kube, cache
}

func (c *Cache) kind(name string) *kindCache {
	for _, k := range c.kinds {
		if k.spec.name == name {
			return k
		}
	}
	panic(name)
}

func mustCluster(t *testing.T, c *Cache) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	snap, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func mustCreate(t *testing.T, kube client.Client, obj client.Object) {
	t.Helper()
	if err := kube.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

func testNode(name string) *corev1.Node {
	return testfixtures.Node(testfixtures.NodeOptions{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}})
}

func testPod(name, node string) *corev1.Pod {
	return testfixtures.Pod(testfixtures.PodOptions{Name: name, NodeName: node, CPU: "100m"})
}

func hasPod(c *Cluster, name string) bool {
	for _, p := range c.Pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

func hasNode(c *Cluster, name string) bool {
	for _, n := range c.Nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}
