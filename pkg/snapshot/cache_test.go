package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
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
// relists, a pass's write to a shared object is caught, and a cluster over the
// memory budget is refused with its size.
func TestCache(t *testing.T) {
	kube, cache := startCache(t)
	coldRelists := cache.Stats().Relists

	t.Run("changes just before the pass", func(t *testing.T) {
		// Each round creates, updates and deletes a pod and a node, and
		// relabels a namespace, one right after the other, then asks for
		// a snapshot. The round's last change is the one a skipped
		// catch-up would miss; it rotates so that each kind is in turn the
		// busy one (its watch passes the quorum resourceVersion by an
		// event) and a lagging one (proved fresh by the probe).
		probes, nudges := cache.Stats().Probes, cache.Stats().Nudges
		for round := range len(freshnessChanges) {
			setUpRound(t, kube, cache, round)
			for i := range freshnessChanges {
				change := freshnessChanges[(round+i)%len(freshnessChanges)]
				if err := change.make(t.Context(), kube, round); err != nil {
					t.Fatalf("round %d, %s: %v", round, change.what, err)
				}
			}
			snap := mustCluster(t, cache)
			for _, change := range freshnessChanges {
				if !change.seen(snap, round) {
					t.Errorf("round %d: the %s just before the pass is not in its snapshot", round, change.what)
				}
			}
		}
		if got := cache.Stats().Relists; got != coldRelists {
			t.Errorf("relists = %d after the cold start's %d: a warm pass caught up by reading everything again", got, coldRelists)
		}
		if cache.Stats().Probes == probes {
			t.Error("no freshness probe ran: every kind was caught up by its events, the lagging-kind path is untested")
		}
		if got := cache.Stats().Nudges - nudges; got != 0 {
			t.Errorf("%d kinds were nudged for a bookmark: the API server refused their freshness probe", got)
		}
	})

	t.Run("a write to a shared object is caught", func(t *testing.T) {
		// The cache runs with CheckShared, as the handler in the
		// end-to-end tests: a pass that wrote a Node in place fails the
		// next snapshot, naming it, and the write is reported once.
		snap := mustCluster(t, cache)
		written, labels := snap.Nodes[0].Name, snap.Nodes[0].Labels
		snap.Nodes[0].Labels = map[string]string{"written": "by-a-pass"}
		_, err := cache.Cluster(t.Context())
		var shared *SharedWriteError
		if !errors.As(err, &shared) || shared.Kind != "nodes" || shared.Key != written || !strings.Contains(shared.Diff, "by-a-pass") {
			t.Fatalf("the snapshot after a pass wrote node %s: %v; want a SharedWriteError naming it", written, err)
		}
		snap.Nodes[0].Labels = labels // the cache's object, mended for the subtests after
		mustCluster(t, cache)
	})

	t.Run("out of time", func(t *testing.T) {
		// A pass whose invocation's time has run out gets no snapshot: a
		// typed error naming the phase, wrapping the context's.
		ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		for name, read := range map[string]func() (*Cluster, error){
			"warm cache": func() (*Cluster, error) { return cache.Cluster(ctx) },
			"plain LIST": func() (*Cluster, error) { return List(ctx, kube) },
		} {
			snap, err := read()
			var outOfTime *OutOfTimeError
			if snap != nil || !errors.As(err, &outOfTime) || outOfTime.Phase != "snapshot" || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: snapshot %v, error %v; want none and an OutOfTimeError in the snapshot wrapping context.DeadlineExceeded", name, snap != nil, err)
			}
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
		var nodes corev1.NodeList
		var pods corev1.PodList
		if err := kube.List(t.Context(), &nodes); err != nil {
			t.Fatal(err)
		}
		if err := kube.List(t.Context(), &pods); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{fmt.Sprintf("%d nodes", len(nodes.Items)), fmt.Sprintf("%d pods", len(pods.Items)), "budget of 0 MiB"} {
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
	// lags must catch up by its watch. Pods and nodes are read with a
	// PageReader, as the handler reads them.
	cache := NewCache(kube, CacheOptions{RelistBelow: -1, Pages: mustPageReader(t, cp.RESTConfig()), CheckShared: true})
	t.Cleanup(cache.Close)
	snap := mustCluster(t, cache)
	if len(snap.Nodes) != 3 || len(snap.Pods) != 1 {
		t.Fatalf("cold snapshot: %d nodes, %d pods; want 3 and 1", len(snap.Nodes), len(snap.Pods))
	}
	return kube, cache
}

func mustPageReader(t *testing.T, cfg *rest.Config) *PageReader {
	t.Helper()
	pages, err := NewPageReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pages
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

// setUpRound creates the pod and the node the round deletes, and waits
// until the cache holds them (polling, so that the round's check, not this
// set-up, is what fails when a pass does not catch up).
func setUpRound(t *testing.T, kube client.Client, cache *Cache, round int) {
	t.Helper()
	mustCreate(t, kube, testPod(fmt.Sprintf("doomed-%d", round), "node-0"))
	mustCreate(t, kube, testNode(fmt.Sprintf("doomed-node-%d", round)))
	for attempt := 0; ; attempt++ {
		snap := mustCluster(t, cache)
		if hasPod(snap, fmt.Sprintf("doomed-%d", round)) && hasNode(snap, fmt.Sprintf("doomed-node-%d", round)) {
			return
		}
		if attempt == 100 {
			t.Fatalf("round %d: the objects to delete are not in the snapshot after 10 s", round)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freshnessChanges are the changes a warm pass must see.
var freshnessChanges = []struct {
	what string
	make func(ctx context.Context, kube client.Client, round int) error
	seen func(snap *Cluster, round int) bool
}{
	{"pod create",
		func(ctx context.Context, kube client.Client, round int) error {
			return kube.Create(ctx, testPod(fmt.Sprintf("new-%d", round), ""))
		},
		func(snap *Cluster, round int) bool { return hasPod(snap, fmt.Sprintf("new-%d", round)) }},
	{"pod update",
		func(ctx context.Context, kube client.Client, round int) error {
			return relabel(ctx, kube, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound-0", Namespace: "default"}}, round)
		},
		func(snap *Cluster, round int) bool {
			return slices.ContainsFunc(snap.Pods, func(pod *corev1.Pod) bool { return pod.Name == "bound-0" && labelled(pod, round) })
		}},
	{"pod delete",
		func(ctx context.Context, kube client.Client, round int) error {
			return kube.Delete(ctx, testPod(fmt.Sprintf("doomed-%d", round), ""), client.GracePeriodSeconds(0))
		},
		func(snap *Cluster, round int) bool { return !hasPod(snap, fmt.Sprintf("doomed-%d", round)) }},
	{"node create",
		func(ctx context.Context, kube client.Client, round int) error {
			return kube.Create(ctx, testNode(fmt.Sprintf("new-node-%d", round)))
		},
		func(snap *Cluster, round int) bool { return hasNode(snap, fmt.Sprintf("new-node-%d", round)) }},
	{"node update",
		func(ctx context.Context, kube client.Client, round int) error {
			return relabel(ctx, kube, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}, round)
		},
		func(snap *Cluster, round int) bool {
			return slices.ContainsFunc(snap.Nodes, func(node *corev1.Node) bool { return node.Name == "node-0" && labelled(node, round) })
		}},
	{"node delete",
		func(ctx context.Context, kube client.Client, round int) error {
			return kube.Delete(ctx, testNode(fmt.Sprintf("doomed-node-%d", round)))
		},
		func(snap *Cluster, round int) bool { return !hasNode(snap, fmt.Sprintf("doomed-node-%d", round)) }},
	{"namespace update",
		func(ctx context.Context, kube client.Client, round int) error {
			return relabel(ctx, kube, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, round)
		},
		func(snap *Cluster, round int) bool {
			return slices.ContainsFunc(snap.Namespaces, func(ns *corev1.Namespace) bool { return ns.Name == "default" && labelled(ns, round) })
		}},
}

const roundLabel = "test.karpfunc/round"

// relabel sets the round label on obj with a merge patch.
func relabel(ctx context.Context, kube client.Client, obj client.Object, round int) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"}}}`, roundLabel, round)
	return kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

func labelled(obj client.Object, round int) bool {
	return obj.GetLabels()[roundLabel] == strconv.Itoa(round)
}

// TestCacheRelistsWhenHistoryIsGone: a watch that resumes from a
// resourceVersion etcd has compacted away gets 410 Gone ("too old resource
// version") and the cache relists the kind; the snapshot then holds what
// changed while it was away. The API server runs without its watch cache,
// so watches are served by etcd and see its compaction (a watch cache
// keeps its own window of events, whatever etcd compacted).
func TestCacheRelistsWhenHistoryIsGone(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true, ExtraAPIServerFlags: []string{"--watch-cache=false"}})
	kube, err := client.NewWithWatch(cp.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	testenv.DefaultServiceAccounts(t, kube, "default")
	mustCreate(t, kube, testNode("node-0"))
	mustCreate(t, kube, testPod("before", "node-0"))
	cache := NewCache(kube, CacheOptions{RelistBelow: -1, Pages: mustPageReader(t, cp.RESTConfig()), CheckShared: true})
	t.Cleanup(cache.Close)
	mustCluster(t, cache)

	pods := cache.kind("pods")
	pods.mu.Lock()
	pods.cancel() // the pod watch stops, as a connection drops
	gen, relists := pods.gen, cache.Stats().Relists
	pods.mu.Unlock()
	waitUntil(t, "the pod watch to end", func() bool { return pods.stillWatching(0) })
	mustCreate(t, kube, testPod("while-away", "node-0"))
	if err := kube.Delete(t.Context(), testPod("before", ""), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	compactEtcd(t, cp.EtcdURL(), kube)

	// The watch resumes from its old resourceVersion.
	pods.mu.Lock()
	watchCtx, cancel := context.WithCancel(cache.life)
	pods.cancel = cancel
	pods.mu.Unlock()
	go cache.watchLoop(watchCtx, pods, gen)
	deadline := time.Now().Add(30 * time.Second)
	for cache.Stats().Relists == relists {
		if time.Now().After(deadline) {
			t.Fatal("the pod watch resumed from a compacted resourceVersion and the cache did not relist within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	snap := mustCluster(t, cache)
	if !hasPod(snap, "while-away") || hasPod(snap, "before") {
		t.Errorf("after the relist the snapshot has pods %v; want while-away and not before", podNames(snap))
	}
}

// compactEtcd compacts etcd's history up to its current revision through
// etcd's v3 JSON gateway (POST /v3/kv/compaction), as kube-apiserver's
// periodic compaction (--etcd-compaction-interval) would.
func compactEtcd(t *testing.T, etcdURL string, kube client.Client) {
	t.Helper()
	current := &corev1.NamespaceList{}
	if err := kube.List(t.Context(), current, client.Limit(1)); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"revision":%q,"physical":true}`, current.ResourceVersion)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, etcdURL+"/v3/kv/compaction", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("compacting etcd to %s: %s: %s", current.ResourceVersion, resp.Status, answer)
	}
}

func podNames(snap *Cluster) []string {
	names := make([]string, 0, len(snap.Pods))
	for _, pod := range snap.Pods {
		names = append(names, pod.Name)
	}
	return names
}
