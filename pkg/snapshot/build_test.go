package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

func TestBuildCopiesWhatPassesWrite(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	snap := filled(node, pod).build()
	if snap.Nodes[0] == node {
		t.Error("a snapshot's Node is the cache's own object; a pass's patch would write into the cache")
	}
	if snap.Pods[0] != pod {
		t.Error("a snapshot's pod is a copy: pods are shared read-only")
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
