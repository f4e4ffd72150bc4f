package scheduler_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// uniform is a catalog of small (2 vCPU) and large (8 vCPU) amd64 types
// offered on-demand and spot in zones test-1..3, with no reservations.
func uniform(t testing.TB) *catalog.Catalog {
	t.Helper()
	var its []map[string]any
	for _, s := range []struct {
		name string
		cpu  int
	}{{"small", 2}, {"large", 8}} {
		var offers []map[string]any
		for _, z := range []string{"test-1", "test-2", "test-3"} {
			offers = append(offers, map[string]any{"zone": z, "capacityType": "on-demand", "price": 0.1 * float64(s.cpu)},
				map[string]any{"zone": z, "capacityType": "spot", "price": 0.03 * float64(s.cpu)})
		}
		its = append(its, map[string]any{"name": s.name, "architecture": "amd64", "overhead": map[string]string{},
			"capacity": map[string]string{"cpu": fmt.Sprint(s.cpu), "memory": fmt.Sprintf("%dGi", 4*s.cpu), "pods": "110"}, "offerings": offers})
	}
	raw, _ := json.Marshal(map[string]any{"region": "test", "zones": []string{"test-1", "test-2", "test-3"}, "instanceTypes": its})
	c, err := catalog.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func uniformInput(t testing.TB, p ...*corev1.Pod) scheduler.Input {
	in := baseInput(t, p...)
	in.Catalog = uniform(t)
	return in
}

func labeled(p *corev1.Pod, kv ...string) *corev1.Pod {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func spreadPods(n int, key string, skew int32, when corev1.UnsatisfiableConstraintAction) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := labeled(pod(fmt.Sprintf("s%02d", i), "100m", "100Mi"), "app", "web")
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		out = append(out, p)
	}
	return out
}

// nsInput has web pending and two existing nodes each running a db pod:
// node-b in namespace team-b, node-c in team-c.
func nsInput(t *testing.T, p *corev1.Pod) scheduler.Input {
	in := uniformInput(t, p)
	for _, ns := range []string{"b", "c"} {
		db := labeled(pod("db", "100m", "100Mi"), "app", "db")
		db.Namespace = "team-" + ns
		n, bound := existingNode("node-"+ns, "test-1", db)
		in.Nodes, in.BoundPods = append(in.Nodes, n), append(in.BoundPods, bound...)
	}
	return in
}

func expectOnNode(t *testing.T, r scheduler.Result, node string) {
	t.Helper()
	if len(r.Existing) != 1 || r.Existing[0].Node != node || len(r.NewNodeClaims) != 0 {
		t.Fatalf("existing placements %+v, %d new claims, unschedulable %+v; want the pod on %s", r.Existing, len(r.NewNodeClaims), r.Unschedulable, node)
	}
}

// laterPreferenceInput: web pods (1 vCPU, placed first) prefer the zone of
// a db pod (500m) that only a tainted pool in test-2 takes. The first web
// pod finds no db pod and relaxes the preference; the web pods placed
// after the db pod can honour it.
func laterPreferenceInput(t *testing.T) scheduler.Input {
	var ps []*corev1.Pod
	for i := range 3 {
		p := labeled(pod(fmt.Sprintf("web-%d", i), "1", "1Gi"), "app", "web")
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 100, PodAffinityTerm: podTerm(corev1.LabelTopologyZone, "app", "db")}}}}
		ps = append(ps, p)
	}
	db := labeled(pod("db", "500m", "512Mi"), "app", "db")
	db.Spec.NodeSelector = map[string]string{"role": "db"}
	db.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	in := uniformInput(t, append(ps, db)...)
	dbPool := nodePool("db", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-2"))
	dbPool.Spec.Template.Labels = map[string]string{"role": "db"}
	dbPool.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	in.NodePools = append(in.NodePools, dbPool)
	return in
}

// zonePinnedSpread is n pods spread on zone (maxSkew 1) with the given
// nodeAffinityPolicy and required node affinity exprs.
func zonePinnedSpread(n int, policy corev1.NodeInclusionPolicy, exprs ...corev1.NodeSelectorRequirement) []*corev1.Pod {
	ps := spreadPods(n, corev1.LabelTopologyZone, 1, corev1.DoNotSchedule)
	for _, p := range ps {
		p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = &policy
		if len(exprs) > 0 {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
		}
	}
	return ps
}

func podTerm(key string, kv ...string) corev1.PodAffinityTerm {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: m}}
}

func withPodAffinity(p *corev1.Pod, required ...corev1.PodAffinityTerm) *corev1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}
	return p
}

func withAntiAffinity(p *corev1.Pod, required ...corev1.PodAffinityTerm) *corev1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}
	return p
}

func preferNode(p *corev1.Pod, weight int32, exprs ...corev1.NodeSelectorRequirement) *corev1.Pod {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	return p
}

// values is a plan's single-key requirement values, joined.
func values(plan *scheduler.NodeClaimPlan, key string) string {
	return strings.Join(plan.Requirements.Get(key).Values(), ",")
}

// perDomain counts pods per value of key over the new claims (claims whose
// key is not settled count under "?").
func perDomain(r scheduler.Result, key string) map[string]int {
	out := map[string]int{}
	for _, c := range r.NewNodeClaims {
		d := "?"
		if vs := c.Requirements.Get(key).Values(); len(vs) == 1 {
			d = vs[0]
		}
		out[d] += len(c.Pods)
	}
	return out
}

func existingNode(name, zone string, bound ...*corev1.Pod) (*corev1.Node, []*corev1.Pod) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelTopologyZone: zone, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux",
	}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	for _, p := range bound {
		p.Spec.NodeName = name
	}
	return n, bound
}

func TestConstraints(t *testing.T) {
	zoneIn := func(zones ...string) corev1.NodeSelectorRequirement {
		return req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...)
	}
	for _, tc := range []struct {
		name  string
		input func(t *testing.T) scheduler.Input
		check func(t *testing.T, r scheduler.Result)
	}{
		{
			name: "zone spread maxSkew 1 puts two of six pods in each zone",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, spreadPods(6, corev1.LabelTopologyZone, 1, corev1.DoNotSchedule)...)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, corev1.LabelTopologyZone); got["test-1"] != 2 || got["test-2"] != 2 || got["test-3"] != 2 {
					t.Errorf("pods per zone = %v, want 2 in each", got)
				}
			},
		},
		{
			name: "zone spread counts pods already running",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, spreadPods(2, corev1.LabelTopologyZone, 1, corev1.DoNotSchedule)...)
				n, bound := existingNode("node-a", "test-1", labeled(pod("old", "100m", "100Mi"), "app", "web"))
				n.Spec.Taints = []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, corev1.LabelTopologyZone); got["test-2"] != 1 || got["test-3"] != 1 {
					t.Errorf("pods per zone = %v, want test-2 and test-3 (test-1 already has one)", got)
				}
			},
		},
		{
			name: "hostname spread maxSkew 1 gives each pod its own node",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, spreadPods(4, corev1.LabelHostname, 1, corev1.DoNotSchedule)...)
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 4) },
		},
		{
			name: "hostname spread takes the minimum as 0 (a new node), as Karpenter does",
			input: func(t *testing.T) scheduler.Input {
				// Both nodes run one matching pod. kube-scheduler's minimum
				// over existing nodes would be 1 and admit a second pod on
				// either; Karpenter counts the node it can create (0 pods),
				// so 1+1-0 > maxSkew 1 and the pod gets a new node.
				in := uniformInput(t, spreadPods(1, corev1.LabelHostname, 1, corev1.DoNotSchedule)...)
				for _, name := range []string{"node-a", "node-b"} {
					n, bound := existingNode(name, "test-1", labeled(pod("old-"+name, "100m", "100Mi"), "app", "web"))
					in.Nodes, in.BoundPods = append(in.Nodes, n), append(in.BoundPods, bound...)
				}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if len(r.Existing) != 0 {
					t.Errorf("placed on existing %+v, want a new node", r.Existing)
				}
			},
		},
		{
			name: "hostname spread maxSkew 2 allows two per node",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, spreadPods(4, corev1.LabelHostname, 2, corev1.DoNotSchedule)...)
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 2) },
		},
		{
			name: "capacity-type spread uses spot and on-demand",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, spreadPods(2, karpv1.CapacityTypeLabelKey, 1, corev1.DoNotSchedule)...)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, karpv1.CapacityTypeLabelKey); got["spot"] != 1 || got["on-demand"] != 1 {
					t.Errorf("pods per capacity type = %v, want one each", got)
				}
			},
		},
		{
			name: "minDomains above the reachable zones caps each zone at maxSkew",
			input: func(t *testing.T) scheduler.Input {
				ps := spreadPods(3, corev1.LabelTopologyZone, 1, corev1.DoNotSchedule)
				for _, p := range ps {
					p.Spec.TopologySpreadConstraints[0].MinDomains = new(int32(3))
				}
				in := uniformInput(t, ps...)
				in.NodePools[0] = nodePool("general", "default", zoneIn("test-1", "test-2"))
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Unschedulable) != 1 {
					t.Fatalf("%d unschedulable, want 1 (two zones, minDomains 3: global minimum stays 0)", len(r.Unschedulable))
				}
				expectUnschedulable(t, r, "topology spread on topology.kubernetes.io/zone (maxSkew 1)")
			},
		},
		{
			name: "nodeAffinityPolicy Honor counts only the zones the pod's node affinity allows",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, zonePinnedSpread(4, corev1.NodeInclusionPolicyHonor, zoneIn("test-1", "test-2"))...)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, corev1.LabelTopologyZone); got["test-1"] != 2 || got["test-2"] != 2 || len(r.Unschedulable) != 0 {
					t.Errorf("pods per zone = %v, %d unschedulable; want 2 and 2 (test-3 is not a domain under Honor)", got, len(r.Unschedulable))
				}
			},
		},
		{
			name: "nodeAffinityPolicy Ignore counts zones outside the pod's node affinity",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, zonePinnedSpread(4, corev1.NodeInclusionPolicyIgnore, zoneIn("test-1", "test-2"))...)
			},
			check: func(t *testing.T, r scheduler.Result) {
				// test-3 is a domain with 0 pods the pod cannot reach, so the
				// global minimum stays 0 and each reachable zone takes maxSkew.
				if got := perDomain(r, corev1.LabelTopologyZone); got["test-1"] != 1 || got["test-2"] != 1 || len(r.Unschedulable) != 2 {
					t.Errorf("pods per zone = %v, %d unschedulable; want 1 and 1 with 2 unschedulable", got, len(r.Unschedulable))
				}
				expectUnschedulable(t, r, "topology spread on topology.kubernetes.io/zone (maxSkew 1)")
			},
		},
		{
			name: "nodeAffinityPolicy Ignore counts an existing node the pod's nodeSelector excludes",
			input: func(t *testing.T) scheduler.Input {
				// The Karpenter test "should balance pods across a label
				// (NodeAffinityPolicy=ignore)": nodes foo and bar do not match
				// the pods' nodeSelector but are domains of the spread key.
				return fakeLabelSpread(t, corev1.NodeInclusionPolicyIgnore)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, "fake-label"); got["baz"] != 1 || len(r.Unschedulable) != 4 {
					t.Errorf("pods per fake-label = %v, %d unschedulable; want 1 on baz, 4 unschedulable", got, len(r.Unschedulable))
				}
			},
		},
		{
			name: "nodeAffinityPolicy Honor leaves out an existing node the pod's nodeSelector excludes",
			input: func(t *testing.T) scheduler.Input {
				// Karpenter's "(NodeAffinityPolicy=honor)" counterpart: only
				// baz is a domain, so all five pods go there.
				return fakeLabelSpread(t, corev1.NodeInclusionPolicyHonor)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, "fake-label"); got["baz"] != 5 || len(r.Unschedulable) != 0 {
					t.Errorf("pods per fake-label = %v, %d unschedulable; want all 5 on baz", got, len(r.Unschedulable))
				}
			},
		},
		{
			name: "custom-key spread narrows the NodePool's label values",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, spreadPods(4, "team", 1, corev1.DoNotSchedule)...)
				in.NodePools[0] = nodePool("general", "default", req("team", corev1.NodeSelectorOpIn, "a", "b"))
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, "team"); got["a"] != 2 || got["b"] != 2 {
					t.Errorf("pods per team = %v, want 2 and 2", got)
				}
			},
		},
		{
			name: "ScheduleAnyway spread is a preference, relaxed when the nodes limit is hit",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, spreadPods(3, corev1.LabelHostname, 1, corev1.ScheduleAnyway)...)
				in.NodePools[0].Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("1")}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if len(r.NewNodeClaims[0].Pods) != 3 || len(r.Unschedulable) != 0 {
					t.Errorf("claim has %d pods, %d unschedulable; want all 3 together", len(r.NewNodeClaims[0].Pods), len(r.Unschedulable))
				}
			},
		},
		{
			name: "required hostname anti-affinity: one per node",
			input: func(t *testing.T) scheduler.Input {
				var ps []*corev1.Pod
				for i := range 3 {
					ps = append(ps, withAntiAffinity(labeled(pod(fmt.Sprintf("a%d", i), "100m", "100Mi"), "app", "db"), podTerm(corev1.LabelHostname, "app", "db")))
				}
				return uniformInput(t, ps...)
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 3) },
		},
		{
			name: "anti-affinity keeps a pod off a node running a matching pod",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, withAntiAffinity(pod("web", "100m", "100Mi"), podTerm(corev1.LabelHostname, "app", "db")))
				n, bound := existingNode("node-a", "test-1", labeled(pod("db", "100m", "100Mi"), "app", "db"))
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Existing) != 0 {
					t.Errorf("placed on %s despite anti-affinity", r.Existing[0].Node)
				}
				expectClaims(t, r, 1)
			},
		},
		{
			name: "a running pod's anti-affinity keeps matching pods away (symmetry)",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, labeled(pod("web", "100m", "100Mi"), "app", "web"))
				n, bound := existingNode("node-a", "test-1", withAntiAffinity(pod("loner", "100m", "100Mi"), podTerm(corev1.LabelHostname, "app", "web")))
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Existing) != 0 {
					t.Errorf("placed next to a pod whose anti-affinity forbids it")
				}
				expectClaims(t, r, 1)
			},
		},
		{
			name: "affinity term namespaces: none and no selector means the pod's own namespace",
			input: func(t *testing.T) scheduler.Input {
				// db runs in team-b only; web (in default) is anti-affine to
				// db pods of its own namespace, so node-b is fine for it.
				return nsInput(t, withAntiAffinity(pod("web", "100m", "100Mi"), podTerm(corev1.LabelHostname, "app", "db")))
			},
			check: func(t *testing.T, r scheduler.Result) { expectOnNode(t, r, "node-b") },
		},
		{
			name: "affinity term namespaceSelector {} means every namespace",
			input: func(t *testing.T) scheduler.Input {
				term := podTerm(corev1.LabelHostname, "app", "db")
				term.NamespaceSelector = &metav1.LabelSelector{}
				return nsInput(t, withAntiAffinity(pod("web", "100m", "100Mi"), term))
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 1) }, // both nodes run a db pod
		},
		{
			name: "affinity term namespaceSelector matches the Namespace objects' labels",
			input: func(t *testing.T) scheduler.Input {
				// Only team-b carries tier=prod: the db pod in team-c does
				// not count, so node-c is free for web.
				term := podTerm(corev1.LabelHostname, "app", "db")
				term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}
				in := nsInput(t, withAntiAffinity(pod("web", "100m", "100Mi"), term))
				in.Namespaces = []*corev1.Namespace{
					{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"tier": "prod"}}},
					{ObjectMeta: metav1.ObjectMeta{Name: "team-c", Labels: map[string]string{"tier": "dev"}}},
				}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) { expectOnNode(t, r, "node-c") },
		},
		{
			name: "affinity term namespaceSelector on kubernetes.io/metadata.name works without Namespace objects",
			input: func(t *testing.T) scheduler.Input {
				term := podTerm(corev1.LabelHostname, "app", "db")
				term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "team-c"}}
				return nsInput(t, withPodAffinity(pod("web", "100m", "100Mi"), term))
			},
			check: func(t *testing.T, r scheduler.Result) { expectOnNode(t, r, "node-c") },
		},
		{
			name: "required zone affinity follows a running pod's zone",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, withPodAffinity(pod("web", "3", "100Mi"), podTerm(corev1.LabelTopologyZone, "app", "db")))
				n, bound := existingNode("node-b", "test-2", labeled(pod("db", "100m", "100Mi"), "app", "db"))
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				in.Nodes[0].Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1")
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-2" {
					t.Errorf("zone = %s, want test-2 with the db pod", got)
				}
			},
		},
		{
			name: "required affinity to pods that exist nowhere is unschedulable",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, withPodAffinity(pod("web", "100m", "100Mi"), podTerm(corev1.LabelTopologyZone, "app", "db")))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectUnschedulable(t, r, `required pod affinity on topology.kubernetes.io/zone to pods matching "app=db"`)
			},
		},
		{
			name: "zone self-affinity keeps a set together",
			input: func(t *testing.T) scheduler.Input {
				var ps []*corev1.Pod
				for i := range 4 {
					ps = append(ps, withPodAffinity(labeled(pod(fmt.Sprintf("a%d", i), "1500m", "100Mi"), "set", "x"), podTerm(corev1.LabelTopologyZone, "set", "x")))
				}
				return uniformInput(t, ps...)
			},
			check: func(t *testing.T, r scheduler.Result) {
				if got := perDomain(r, corev1.LabelTopologyZone); len(got) != 1 || got["?"] != 0 {
					t.Errorf("pods per zone = %v, want all in one settled zone", got)
				}
			},
		},
		{
			name: "preferred node affinity is honoured when it can be",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, preferNode(pod("p", "100m", "100Mi"), 1, zoneIn("test-2")))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-2" {
					t.Errorf("zone = %s, want the preferred test-2", got)
				}
			},
		},
		{
			name: "preferred node affinity that cannot hold is relaxed",
			input: func(t *testing.T) scheduler.Input {
				return uniformInput(t, preferNode(pod("p", "100m", "100Mi"), 1, zoneIn("test-9")))
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 1) },
		},
		{
			name: "heavier preferred node affinity is dropped first",
			input: func(t *testing.T) scheduler.Input {
				p := preferNode(pod("p", "100m", "100Mi"), 50, zoneIn("test-9"))
				return uniformInput(t, preferNode(p, 10, zoneIn("test-3")))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-3" {
					t.Errorf("zone = %s, want test-3 (the lighter preference, after dropping the impossible heavier one)", got)
				}
			},
		},
		{
			name: "relaxation order: the next required term before dropping preferences",
			input: func(t *testing.T) scheduler.Input {
				p := withAffinity(pod("p", "100m", "100Mi"), []corev1.NodeSelectorRequirement{zoneIn("test-1")}, []corev1.NodeSelectorRequirement{zoneIn("test-2")})
				return uniformInput(t, preferNode(p, 1, zoneIn("test-2")))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-2" {
					t.Errorf("zone = %s, want test-2 (second required term with the preference kept)", got)
				}
			},
		},
		{
			name: "relaxation order: preferred pod affinity before preferred node affinity",
			input: func(t *testing.T) scheduler.Input {
				p := preferNode(pod("p", "100m", "100Mi"), 1, zoneIn("test-3"))
				p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
					{Weight: 100, PodAffinityTerm: podTerm(corev1.LabelTopologyZone, "app", "nowhere")}}}
				return uniformInput(t, p)
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-3" {
					t.Errorf("zone = %s, want test-3 (pod affinity preference dropped, node preference kept)", got)
				}
			},
		},
		{
			name: "relaxation order: heavier preferred anti-affinity dropped first, lighter kept",
			input: func(t *testing.T) scheduler.Input {
				var ps []*corev1.Pod
				for i := range 4 {
					p := labeled(pod(fmt.Sprintf("n%d", i), "100m", "100Mi"), "app", "nginx")
					p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
						{Weight: 1, PodAffinityTerm: podTerm(corev1.LabelHostname, "app", "nginx")},
						{Weight: 10, PodAffinityTerm: podTerm(corev1.LabelTopologyZone, "app", "nginx")},
					}}}
					ps = append(ps, p)
				}
				in := uniformInput(t, ps...)
				in.NodePools[0] = nodePool("general", "default", zoneIn("test-1"))
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 4) // one zone: zone anti-affinity cannot hold; hostname anti-affinity can
			},
		},
		{
			name:  "relaxation restarts from the top for each pod: a preference that becomes satisfiable is honoured",
			input: laterPreferenceInput,
			check: func(t *testing.T, r scheduler.Result) {
				// Once the db pod is in test-2, the web pods after it can
				// have their preferred zone affinity, as each pod does in
				// Karpenter; they share a claim with the first web pod, which
				// does not mind test-2. Starting where the first web pod
				// ended (preference dropped) left the claim in any zone.
				for _, c := range r.NewNodeClaims {
					if c.NodePool.Name == "general" && values(c, corev1.LabelTopologyZone) != "test-2" {
						t.Errorf("web claim zones = %s, want test-2 (the db pod's zone)", values(c, corev1.LabelTopologyZone))
					}
				}
				if len(r.Unschedulable) != 0 || len(r.NewNodeClaims) != 2 {
					t.Errorf("%d claims, %d unschedulable; want 2 claims (web, db), none unschedulable", len(r.NewNodeClaims), len(r.Unschedulable))
				}
			},
		},
		{
			name: "DaemonSet overhead counts only on types the DaemonSet selects",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("amd", "1500m", "1Gi"))
				ds := pod("ds", "1", "1Gi")
				ds.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
				in.DaemonSets = []*appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if names := typeNames(r.NewNodeClaims[0]); !strings.Contains(names, "small") || strings.Contains(names, "armsmall") {
					t.Errorf("types = %s, want small (no arm64 daemonset there) and not armsmall (1.5 + 1 daemon vCPU > 2)", names)
				}
			},
		},
		{
			name: "init containers, sidecars and overhead count",
			input: func(t *testing.T) scheduler.Input {
				init := pod("init", "1", "1Gi")
				init.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
				always := corev1.ContainerRestartPolicyAlways
				sidecar := pod("sidecar", "1500m", "1Gi")
				sidecar.Spec.InitContainers = []corev1.Container{{Name: "s", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
				overhead := pod("overhead", "1500m", "1Gi")
				overhead.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
				in := baseInput(t, init, sidecar, overhead)
				in.NodePools[0] = nodePool("general", "default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small", "large"))
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				for _, c := range r.NewNodeClaims {
					if strings.Contains(typeNames(c), "small") {
						t.Errorf("claim for %s allows small (2 vCPU) though each pod needs 2.5-3 vCPU", c.Pods[0].Name)
					}
				}
			},
		},
		{
			name: "host ports conflict on one node",
			input: func(t *testing.T) scheduler.Input {
				a, b, c := pod("a", "100m", "100Mi"), pod("b", "100m", "100Mi"), pod("c", "100m", "100Mi")
				a.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 80, ContainerPort: 80}}
				b.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 80, ContainerPort: 80}}
				c.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 81, ContainerPort: 81}}
				return uniformInput(t, a, b, c)
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 2) },
		},
		{
			name: "a host port held by a pod bound to an existing node keeps a pending pod wanting it off that node",
			input: func(t *testing.T) scheduler.Input {
				holder := pod("exporter-old", "100m", "100Mi")
				holder.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 9100, ContainerPort: 9100}}
				wants := pod("exporter-new", "100m", "100Mi")
				wants.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 9100, ContainerPort: 9100}}
				in := uniformInput(t, wants)
				n, bound := existingNode("node-a", "test-1", holder)
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Existing) != 0 {
					t.Errorf("placed on existing %+v, but node-a's bound pod holds host port 9100", r.Existing)
				}
				expectClaims(t, r, 1)
			},
		},
		{
			name: "a bound pod's other host port leaves the node open",
			input: func(t *testing.T) scheduler.Input {
				holder := pod("exporter-old", "100m", "100Mi")
				holder.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 9100, ContainerPort: 9100}}
				wants := pod("web", "100m", "100Mi")
				wants.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 8080}}
				in := uniformInput(t, wants)
				n, bound := existingNode("node-a", "test-1", holder)
				in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
				return in
			},
			check: func(t *testing.T, r scheduler.Result) { expectOnNode(t, r, "node-a") },
		},
		{
			name: "minValues keeps enough instance types",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("big", "5", "1Gi"), pod("ok", "1", "1Gi"))
				np := nodePool("general", "default")
				np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn,
					Values: []string{"small", "medium", "large"}, MinValues: new(2)}}
				in.NodePools[0] = np
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Unschedulable) != 1 || r.Unschedulable[0].Pod.Name != "big" {
					t.Fatalf("unschedulable = %+v, want only big (only large holds 5 vCPU, minValues 2)", r.Unschedulable)
				}
				expectUnschedulable(t, r, "minValues")
				expectClaims(t, r, 1)
				if n := len(r.NewNodeClaims[0].InstanceTypes); n < 2 {
					t.Errorf("claim for ok has %d types, want >= 2", n)
				}
			},
		},
		{
			name: "a bound PV's node affinity pins the zone (Azure Disk zone key)",
			input: func(t *testing.T) scheduler.Input {
				p := pod("db", "100m", "100Mi")
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
				in := uniformInput(t, p)
				in.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}}
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}}
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					req("topology.disk.csi.azure.com/zone", corev1.NodeSelectorOpIn, "test-3")}}}}}
				in.PersistentVolumes = []*corev1.PersistentVolume{pv}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-3" {
					t.Errorf("zone = %s, want test-3 where the disk is", got)
				}
			},
		},
		{
			name: "an unbound claim follows its StorageClass allowedTopologies",
			input: func(t *testing.T) scheduler.Input {
				p := pod("db", "100m", "100Mi")
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
				in := uniformInput(t, p)
				in.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: new("zonal")}}}
				in.StorageClasses = []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, AllowedTopologies: []corev1.TopologySelectorTerm{{
					MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: []string{"test-2"}}}}}}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := values(r.NewNodeClaims[0], corev1.LabelTopologyZone); got != "test-2" {
					t.Errorf("zone = %s, want test-2", got)
				}
			},
		},
		{
			name: "a missing PVC is a precise reason",
			input: func(t *testing.T) scheduler.Input {
				p := pod("db", "100m", "100Mi")
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gone"}}}}
				in := uniformInput(t, p)
				in.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectUnschedulable(t, r, "volume data uses PersistentVolumeClaim default/gone, which does not exist")
			},
		},
		{
			name: "PreferNoSchedule taints are tolerated only as a last relaxation",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, pod("p", "100m", "100Mi"))
				in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 1) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, scheduler.Solve(tc.input(t))) })
	}
}

// TestNoPanicOnBadInput feeds degenerate objects: nil entries, empty
// selectors, a catalog-less solve.
// fakeLabelSpread is Karpenter's NodeAffinityPolicy fixture: five pods
// spread on fake-label and selecting selector=value, a NodePool that makes
// fake-label=baz nodes, and existing nodes foo and bar whose fake-label is a
// domain but whose selector label does not match the pods.
func fakeLabelSpread(t *testing.T, policy corev1.NodeInclusionPolicy) scheduler.Input {
	ps := zonePinnedSpread(5, policy)
	for _, p := range ps {
		p.Spec.TopologySpreadConstraints[0].TopologyKey = "fake-label"
		p.Spec.NodeSelector = map[string]string{"selector": "value"}
	}
	in := uniformInput(t, ps...)
	in.NodePools[0].Spec.Template.Labels = map[string]string{"fake-label": "baz", "selector": "value"}
	for _, d := range []string{"foo", "bar"} {
		n, _ := existingNode("node-"+d, "test-1")
		n.Labels["fake-label"], n.Labels["selector"] = d, "mismatch"
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

func TestNoPanicOnBadInput(t *testing.T) {
	p := pod("p", "100m", "100Mi")
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}}}}
	in := uniformInput(t, p, nil, pod("q", "100m", "100Mi"))
	in.NodePools = append(in.NodePools, nil)
	in.Nodes = []*corev1.Node{nil}
	in.NodeClaims = []*karpv1.NodeClaim{nil}
	r := scheduler.Solve(in)
	if len(r.Unschedulable) != 1 || !strings.Contains(r.Unschedulable[0].Reason, "invalid topologySpreadConstraints labelSelector") {
		t.Errorf("unschedulable = %+v, want p with an invalid selector reason", r.Unschedulable)
	}
	r = scheduler.Solve(scheduler.Input{Pods: []*corev1.Pod{pod("p", "1", "1Gi")}, NodePools: []*karpv1.NodePool{nodePool("general", "default")},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 0)}})
	expectUnschedulable(t, r, "no instance-type catalog")
}

// TestEveryPodOnce checks the Result contract on the Karpenter workload:
// each input pod appears exactly once.
func TestEveryPodOnce(t *testing.T) {
	pods := makeDiversePods(500)
	in := scheduler.Input{Pods: pods, NodePools: []*karpv1.NodePool{nodePool("default", "default")},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 250)}, Catalog: karpenterCatalog(t)}
	r := scheduler.Solve(in)
	var seen []string
	for _, c := range r.NewNodeClaims {
		for _, p := range c.Pods {
			seen = append(seen, p.Name)
		}
		if len(c.InstanceTypes) == 0 {
			t.Errorf("claim with no instance types")
		}
	}
	for _, u := range r.Unschedulable {
		seen = append(seen, u.Pod.Name)
	}
	sort.Strings(seen)
	if len(seen) != len(pods) || len(slices.Compact(seen)) != len(pods) {
		t.Errorf("%d placements for %d pods", len(seen), len(pods))
	}
	// hostname anti-affinity pods (app=nginx) are one per claim.
	for _, c := range r.NewNodeClaims {
		n := 0
		for _, p := range c.Pods {
			if p.Labels["app"] == "nginx" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("claim has %d app=nginx pods despite hostname anti-affinity", n)
		}
	}
}

// TestSelfAffineReplicasOpenTheirClaim: replicas with required pod
// affinity to each other on kubernetes.io/hostname go on one node. The
// first opens a claim, not one a memory-heavy pod (tried first for the
// fleet's mix) has partly filled, so the second still fits next to it, as
// in Karpenter, whose queue takes the larger CPU requests first.
func TestSelfAffineReplicasOpenTheirClaim(t *testing.T) {
	for _, tc := range []struct {
		name        string
		affineCPU   string
		heavyCPU    string
		heavyMemory string
	}{
		{name: "two 900m replicas and four 300m 1.5Gi pods", affineCPU: "900m", heavyCPU: "300m", heavyMemory: "1536Mi"},
		{name: "two 800m replicas and four 450m 1.5Gi pods", affineCPU: "800m", heavyCPU: "450m", heavyMemory: "1536Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range 2 {
				ps = append(ps, withPodAffinity(labeled(pod(fmt.Sprintf("web-%d", i), tc.affineCPU, "1Gi"), "app", "web"), podTerm(corev1.LabelHostname, "app", "web")))
			}
			for i := range 4 {
				ps = append(ps, pod(fmt.Sprintf("cache-%d", i), tc.heavyCPU, tc.heavyMemory))
			}
			in := uniformInput(t, ps...)
			in.NodePools = []*karpv1.NodePool{nodePool("general", "default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small"))}
			r := scheduler.Solve(in)
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", r.Unschedulable)
			}
		})
	}
}
