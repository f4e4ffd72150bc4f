package staticcapacity

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

func pool(replicas int64, nodeLimit string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}}
	np.Spec.Replicas = &replicas
	if nodeLimit != "" {
		np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse(nodeLimit)}
	}
	return np
}

func claim(name string, mods ...func(*Claim)) Claim {
	c := Claim{NodeClaim: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}, Launched: true, LifetimeRemaining: 1}
	for _, mod := range mods {
		mod(&c)
	}
	return c
}

var (
	deleting   = func(c *Claim) { c.Deleting = true }
	disrupting = func(c *Claim) { c.PendingDisruption = true }
	unlaunched = func(c *Claim) { c.Launched = false }
	pinned     = func(c *Claim) { c.DoNotDisrupt = true }
	withPods   = func(n int) func(*Claim) {
		return func(c *Claim) {
			for range n {
				c.Pods = append(c.Pods, &corev1.Pod{})
			}
		}
	}
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name       string
		np         *karpv1.NodePool
		claims     []Claim
		create     int64
		delete     []string
		limitHit   bool
		nodesAfter int64 // Decision.Nodes
	}{
		{name: "empty pool creates replicas", np: pool(3, ""), create: 3},
		{name: "at replicas does nothing", np: pool(2, ""), claims: []Claim{claim("a"), claim("b")}, nodesAfter: 2},
		{name: "scale up to five from three", np: pool(5, ""), claims: []Claim{claim("a"), claim("b"), claim("c")}, create: 2, nodesAfter: 3},
		{name: "deleting claims are replaced", np: pool(2, ""), claims: []Claim{claim("a"), claim("b", deleting)}, create: 1, nodesAfter: 1},
		{name: "pending disruption counts toward replicas", np: pool(2, ""), claims: []Claim{claim("a"), claim("b", disrupting)}, nodesAfter: 2},
		{name: "limits.nodes caps the creation", np: pool(5, "4"), claims: []Claim{claim("a"), claim("b")}, create: 2, limitHit: true, nodesAfter: 2},
		{name: "limits.nodes counts deleting claims", np: pool(3, "3"), claims: []Claim{claim("a"), claim("b", deleting)}, create: 1, limitHit: true, nodesAfter: 1},
		{name: "limit already exceeded creates none", np: pool(3, "1"), claims: []Claim{claim("a"), claim("b", deleting)}, create: 0, limitHit: true, nodesAfter: 1},
		{name: "replicas zero deletes all", np: pool(0, ""), claims: []Claim{claim("a"), claim("b")}, delete: []string{"a", "b"}, nodesAfter: 2},
		{name: "scale down deletes unlaunched first", np: pool(2, ""),
			claims: []Claim{claim("a", withPods(1)), claim("b"), claim("c", unlaunched), claim("d", withPods(2))},
			delete: []string{"c", "b"}, nodesAfter: 4},
		{name: "empty before busy, fewer pods before more", np: pool(1, ""),
			claims: []Claim{claim("a", withPods(3)), claim("b", withPods(1)), claim("c", withPods(2))},
			delete: []string{"b", "c"}, nodesAfter: 3},
		{name: "do-not-disrupt last, even when empty", np: pool(1, ""),
			claims: []Claim{claim("a", pinned), claim("b", withPods(5)), claim("c", withPods(1), pinned)},
			delete: []string{"b", "a"}, nodesAfter: 3},
		{name: "pending disruption is not deleted and not counted running", np: pool(1, ""),
			claims: []Claim{claim("a", disrupting), claim("b"), claim("c")}, delete: []string{"b"}, nodesAfter: 3},
		{name: "deleting claims are not chosen again", np: pool(1, ""),
			claims: []Claim{claim("a", deleting), claim("b"), claim("c", withPods(1))}, delete: []string{"b"}, nodesAfter: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.np, tc.claims)
			if d.Create != tc.create {
				t.Errorf("Create = %d, want %d", d.Create, tc.create)
			}
			var deleted []string
			for _, nc := range d.Delete {
				deleted = append(deleted, nc.Name)
			}
			if !slices.Equal(deleted, tc.delete) {
				t.Errorf("Delete = %v, want %v", deleted, tc.delete)
			}
			if (d.LimitReached != "") != tc.limitHit {
				t.Errorf("LimitReached = %q, want set=%v", d.LimitReached, tc.limitHit)
			}
			if d.Nodes() != tc.nodesAfter {
				t.Errorf("Nodes() = %d, want %d", d.Nodes(), tc.nodesAfter)
			}
			if d.Create > 0 && len(d.Delete) > 0 {
				t.Errorf("a decision both creates and deletes: %+v", d)
			}
		})
	}
}

func TestClaimsOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	np := pool(2, "")
	labels := map[string]string{karpv1.NodePoolLabelKey: "static"}
	yes := true
	mk := func(name, node string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		nc.Status.NodeName, nc.Status.ProviderID = node, map[bool]string{true: "azure:///" + name}[node != ""]
		return nc
	}
	replacement := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{karpv1.NodePoolLabelKey: "other"},
		Annotations: map[string]string{apis.AnnotationDisruptionCandidates: "b=uid-b"}}}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "ds", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Controller: &yes}}}, Spec: corev1.PodSpec{NodeName: "node-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{NodeName: "node-c"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}}, Spec: corev1.PodSpec{NodeName: "node-c"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "done-pinning", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
			Annotations: map[string]string{karpv1.DoNotDisruptAnnotationKey: "10m"}}, Spec: corev1.PodSpec{NodeName: "node-a"}},
	}
	claims := ClaimsOf(np, Objects{NodeClaims: []*karpv1.NodeClaim{mk("a", "node-a"), mk("b", "node-b"), mk("c", "node-c"), mk("d", ""), replacement}, Pods: pods}, now)
	got := map[string]Claim{}
	for _, c := range claims {
		got[c.NodeClaim.Name] = c
	}
	if len(got) != 4 || got["r"].NodeClaim != nil {
		t.Fatalf("claims of the pool = %v, want a, b, c, d", got)
	}
	if c := got["a"]; len(c.Pods) != 1 || c.DoNotDisrupt || !c.Launched {
		t.Errorf("a: %d reschedulable pods, doNotDisrupt %v, launched %v; want 1 (the DaemonSet pod does not count), false (expired), true", len(c.Pods), c.DoNotDisrupt, c.Launched)
	}
	if !got["b"].PendingDisruption {
		t.Error("b is a candidate of a live replacement but not PendingDisruption")
	}
	if c := got["c"]; len(c.Pods) != 2 || !c.DoNotDisrupt {
		t.Errorf("c: %d pods, doNotDisrupt %v; want 2, true", len(c.Pods), c.DoNotDisrupt)
	}
	if got["d"].Launched {
		t.Error("d has no provider ID but is Launched")
	}
}

func TestUnsettled(t *testing.T) {
	labels := map[string]string{karpv1.NodePoolLabelKey: "static"}
	claims := []*karpv1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: labels}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: labels}},
	}
	dynamic := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "dynamic"}}
	for _, tc := range []struct {
		name     string
		pool     *karpv1.NodePool
		notReady map[string]string
		want     []string
	}{
		{"at replicas", pool(2, ""), nil, nil},
		{"short", pool(3, ""), nil, []string{"static"}},
		{"over", pool(1, ""), nil, []string{"static"}},
		{"short but not Ready", pool(3, ""), map[string]string{"static": "NodeClassReady=False"}, nil},
		{"short but at limits.nodes", pool(3, "2"), nil, nil},
		{"over and not Ready", pool(1, ""), map[string]string{"static": "NodeClassReady=False"}, []string{"static"}},
	} {
		got := Unsettled([]*karpv1.NodePool{tc.pool, dynamic}, tc.notReady, Objects{NodeClaims: claims}, time.Now())
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Unsettled = %v, want %v", tc.name, got, tc.want)
		}
	}
}
