package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// filled is a cache holding objs as if listed, without an API server.
func filled(objs ...client.Object) *Cache {
	c := NewCache(nil, CacheOptions{Budget: 1})
	for _, k := range c.kinds {
		k.objs = map[string]client.Object{}
	}
	for _, o := range objs {
		name := "pods"
		if _, ok := o.(*corev1.Node); ok {
			name = "nodes"
		}
		c.kind(name).objs[key(o)] = o
	}
	return c
}

func TestBuildSharesAllButWhatSyncWrites(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	c := filled(node, pod)
	c.kind("nodepools").objs[key(pool)] = pool
	snap := c.build()
	if snap.Nodes[0] != node || snap.Pods[0] != pod {
		t.Error("a snapshot's Node or pod is a copy: they are shared, and a pass copies what it writes")
	}
	if snap.NodePools[0] == pool {
		t.Error("a snapshot's NodePool is the cache's own object; nodepoolstatus.Sync would write into the cache")
	}
}

// TestCheckShared: with CheckShared, a write to a shared object is found
// and named, once; without it, or without a write, nothing is reported.
func TestCheckShared(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   bool
		write   func(*Cluster)
		wantErr string
	}{
		{name: "no write", check: true, write: func(*Cluster) {}},
		{name: "a taint", check: true, write: func(s *Cluster) { s.Nodes[0].Spec.Taints = append(s.Nodes[0].Spec.Taints, corev1.Taint{Key: "k"}) },
			wantErr: "nodes n"},
		{name: "a pod's label", check: true, write: func(s *Cluster) { s.Pods[0].Labels = map[string]string{"a": "b"} }, wantErr: "pods default/p"},
		{name: "the slice only", check: true, write: func(s *Cluster) { s.Nodes[0] = &corev1.Node{} }},
		{name: "off", write: func(s *Cluster) { s.Nodes[0].Labels = map[string]string{"a": "b"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := filled(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
			c.opts.CheckShared = tc.check
			tc.write(c.build())
			err := c.CheckShared()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckShared = %v, want nil", err)
				}
				return
			}
			var shared *SharedWriteError
			if !errors.As(err, &shared) || !strings.Contains(err.Error(), SharedWriteMessage+": "+tc.wantErr) {
				t.Fatalf("CheckShared = %v, want a SharedWriteError naming %s", err, tc.wantErr)
			}
			if err := c.CheckShared(); err != nil {
				t.Errorf("a second CheckShared = %v; the write was reported once", err)
			}
		})
	}
}

func TestBuildKeepsTheAPIServersOrder(t *testing.T) {
	var objs []client.Object
	for _, name := range []string{"b", "a-1", "a", "c"} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
	}
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "z", Namespace: "a"}})
	snap := filled(objs...).build()
	var got []string
	for _, p := range snap.Pods {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	want := []string{"a/z", "ns/a", "ns/a-1", "ns/b", "ns/c"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

func TestApplyIgnoresAReplacedWatch(t *testing.T) {
	c := filled()
	pods := c.kind("pods")
	pods.gen = 2
	stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: "10"}}
	if err := pods.apply(1, watch.Event{Type: watch.Added, Object: stale}); err != nil {
		t.Fatal(err)
	}
	if len(pods.objs) != 0 || pods.rv != 0 {
		t.Error("an event from a watch a relist replaced was applied")
	}
	if err := pods.apply(2, watch.Event{Type: watch.Added, Object: stale}); err != nil {
		t.Fatal(err)
	}
	if len(pods.objs) != 1 || pods.rv != 10 {
		t.Errorf("the current watch's event: %d objects at rv %d, want 1 at 10", len(pods.objs), pods.rv)
	}
}

// BenchmarkBuild is the warm pass's own cost at AKS's limits: 150,000 pods
// and 5,000 Nodes sorted and shared.
func BenchmarkBuild(b *testing.B) {
	var objs []client.Object
	for i := range 150000 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%06d", i), Namespace: fmt.Sprintf("team-%02d", i%50),
			Labels: map[string]string{"app": "x", "tier": "web"}}})
	}
	for i := range 5000 {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("aks-general-%05d", i),
			Labels: map[string]string{"a": "b", "c": "d", "e": "f", "g": "h", "i": "j", "k": "l", "m": "n"}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}, Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15")}}})
	}
	c := filled(objs...)
	b.ReportAllocs()
	for b.Loop() {
		c.build()
	}
}

// TestOrderAfterChanges: a snapshot after watch events (adds, updates,
// deletes merged into the last order) is in the order a full sort gives.
func TestOrderAfterChanges(t *testing.T) {
	var objs []client.Object
	for i := range 50 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i*2), Namespace: "ns"}})
	}
	c := filled(objs...)
	pods := c.kind("pods")
	pods.stale = true
	c.build()
	rv := 0
	event := func(typ watch.EventType, name string) {
		rv++
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: fmt.Sprint(rv)}}
		if err := pods.apply(pods.gen, watch.Event{Type: typ, Object: p}); err != nil {
			t.Fatal(err)
		}
	}
	event(watch.Added, "p-001")
	event(watch.Added, "a-first")
	event(watch.Added, "z-last")
	event(watch.Deleted, "p-000")
	event(watch.Deleted, "p-098")
	event(watch.Modified, "p-050")
	event(watch.Added, "p-051")
	event(watch.Deleted, "p-051")
	snap := c.build()
	var got []string
	for _, p := range snap.Pods {
		got = append(got, p.Name)
	}
	if !slices.IsSorted(got) || len(got) != 50+3-2 || slices.Contains(got, "p-000") || slices.Contains(got, "p-051") || !slices.Contains(got, "p-001") {
		t.Errorf("order after changes = %v", got)
	}
	for _, p := range snap.Pods {
		if p.Name == "p-050" && p.ResourceVersion != "6" {
			t.Errorf("p-050 is the old version %q", p.ResourceVersion)
		}
	}
}

// TestNodeClaimConditionsReadOnly: a NodeClaim arrives without status
// conditions (a claim just created); a pass that reads them through
// karpenter's StatusConditions, which sets missing ones Unknown in place,
// writes nothing into the object the cache shares.
func TestNodeClaimConditionsReadOnly(t *testing.T) {
	c := filled()
	c.opts.CheckShared = true
	claims := c.kind("nodeclaims")
	created := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-a", ResourceVersion: "5"}}
	if err := claims.apply(claims.gen, watch.Event{Type: watch.Added, Object: created}); err != nil {
		t.Fatal(err)
	}
	snap := c.build()
	if snap.NodeClaims[0].StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		t.Error("a new NodeClaim reads as Launched")
	}
	if err := c.CheckShared(); err != nil {
		t.Errorf("reading a new NodeClaim's conditions wrote it: %v", err)
	}
}
