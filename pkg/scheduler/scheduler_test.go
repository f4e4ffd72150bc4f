package scheduler_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// A small catalog with no reservations, so the arithmetic in tests is plain.
const syntheticCatalog = `{"region":"test","zones":["test-1","test-2"],"instanceTypes":[
 {"name":"small","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.10},{"zone":"test-1","capacityType":"spot","price":0.03}]},
 {"name":"medium","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.20},{"zone":"test-2","capacityType":"spot","price":0.05}]},
 {"name":"large","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-2","capacityType":"on-demand","price":0.40}]},
 {"name":"armsmall","architecture":"arm64","capacity":{"cpu":"2","memory":"8Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.08}]}]}`

func synthetic(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Parse([]byte(syntheticCatalog))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nodeClass(name string, maxPods int32) *v1beta1.AKSNodeClass {
	nc := &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if maxPods > 0 {
		nc.Spec.MaxPods = &maxPods
	}
	return nc
}

func nodePool(name, class string, reqs ...corev1.NodeSelectorRequirement) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: class}
	for _, r := range reqs {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return np
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func pod(name, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}}},
	}
}

func pods(n int, cpu, memory string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, pod(fmt.Sprintf("p%03d", i), cpu, memory))
	}
	return out
}

func withAffinity(p *corev1.Pod, terms ...[]corev1.NodeSelectorRequirement) *corev1.Pod {
	var ts []corev1.NodeSelectorTerm
	for _, t := range terms {
		ts = append(ts, corev1.NodeSelectorTerm{MatchExpressions: t})
	}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts},
	}}
	return p
}

func typeNames(plan *scheduler.NodeClaimPlan) string {
	var names []string
	for _, it := range plan.InstanceTypes {
		names = append(names, it.Name)
	}
	return strings.Join(names, ",")
}

// baseInput has one NodePool "general" over the synthetic catalog.
func baseInput(t testing.TB, p ...*corev1.Pod) scheduler.Input {
	return scheduler.Input{
		Pods:        p,
		NodePools:   []*karpv1.NodePool{nodePool("general", "default")},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 0)},
		Catalog:     synthetic(t),
	}
}

func TestSolve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input func(t *testing.T) scheduler.Input
		check func(t *testing.T, r scheduler.Result)
	}{
		{
			name: "nodeSelector narrows instance types",
			input: func(t *testing.T) scheduler.Input {
				p := pod("arm", "1", "1Gi")
				p.Spec.NodeSelector = map[string]string{corev1.LabelArchStable: "arm64"}
				return baseInput(t, p)
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := typeNames(r.NewNodeClaims[0]); got != "armsmall" {
					t.Errorf("types = %s, want armsmall", got)
				}
			},
		},
		{
			name: "required affinity is an OR of terms",
			input: func(t *testing.T) scheduler.Input {
				return baseInput(t, withAffinity(pod("or", "1", "1Gi"),
					[]corev1.NodeSelectorRequirement{req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "does-not-exist")},
					[]corev1.NodeSelectorRequirement{req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")}))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := typeNames(r.NewNodeClaims[0]); got != "armsmall" {
					t.Errorf("types = %s, want armsmall (second term)", got)
				}
			},
		},
		{
			name: "untolerated NodePool taint",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("plain", "1", "1Gi"))
				in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectUnschedulable(t, r, "no NodePool tolerated", "gpu")
			},
		},
		{
			name: "tolerated NodePool taint",
			input: func(t *testing.T) scheduler.Input {
				p := pod("tolerant", "1", "1Gi")
				p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
				in := baseInput(t, p)
				in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) { expectClaims(t, r, 1) },
		},
		{
			name: "higher weight NodePool first",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("a", "1", "1Gi"))
				heavy := nodePool("preferred", "default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "large"))
				heavy.Spec.Weight = new(int32(10))
				in.NodePools = append(in.NodePools, heavy)
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if r.NewNodeClaims[0].NodePool.Name != "preferred" || typeNames(r.NewNodeClaims[0]) != "large" {
					t.Errorf("got pool %s types %s, want preferred/large", r.NewNodeClaims[0].NodePool.Name, typeNames(r.NewNodeClaims[0]))
				}
			},
		},
		{
			name: "NodePool requirements with Gt and NotIn",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("a", "1", "1Gi"))
				in.NodePools[0] = nodePool("general", "default",
					req(catalog.LabelSKUCPU, corev1.NodeSelectorOpGt, "2"),
					req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpNotIn, "large"))
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := typeNames(r.NewNodeClaims[0]); got != "medium" {
					t.Errorf("types = %s, want medium", got)
				}
			},
		},
		{
			name: "limits stop new claims",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pods(3, "1500m", "1Gi")...)
				in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if len(r.NewNodeClaims[0].Pods) != 2 {
					t.Errorf("claim has %d pods, want 2", len(r.NewNodeClaims[0].Pods))
				}
				expectUnschedulable(t, r, "NodePool general", "exceed its limits")
			},
		},
		{
			name: "missing AKSNodeClass",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("a", "1", "1Gi"))
				in.NodePools[0] = nodePool("general", "missing")
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectUnschedulable(t, r, `NodePool general references AKSNodeClass "missing" which does not exist`)
			},
		},
		{
			name: "NodePool not Ready",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("a", "1", "1Gi"))
				in.NotReady = map[string]string{"general": "NodeClassReady=False (NodeClassNotFound: AKSNodeClass missing not found)"}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 0)
				expectUnschedulable(t, r, "NodePool general is not ready: NodeClassReady=False (NodeClassNotFound: AKSNodeClass missing not found)")
			},
		},
		{
			name: "pod bigger than any SKU",
			input: func(t *testing.T) scheduler.Input {
				return baseInput(t, pod("huge", "200", "1Gi"))
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectUnschedulable(t, r, "requests 200 vCPU; the largest allowed SKU in NodePool general (large) has 8 vCPU")
			},
		},
		{
			name: "daemonset overhead is reserved on new claims",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("a", "1500m", "1Gi"))
				in.DaemonSets = []*appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pod("ds", "1", "1Gi").Spec}}}}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				plan := r.NewNodeClaims[0]
				if strings.Contains(typeNames(plan), "small") {
					t.Errorf("types %s include a 2-vCPU size that cannot hold 1.5 + 1 daemon vCPU", typeNames(plan))
				}
				if q := plan.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("2500m")) != 0 {
					t.Errorf("requests cpu = %s, want 2500m", q.String())
				}
			},
		},
		{
			name: "AKSNodeClass maxPods caps pods per claim",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pods(12, "10m", "10Mi")...)
				in.NodeClasses[0] = nodeClass("default", 10)
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 2)
				if q := r.NewNodeClaims[0].InstanceTypes[0].Capacity[corev1.ResourcePods]; q.Value() != 10 {
					t.Errorf("pods capacity = %d, want 10", q.Value())
				}
			},
		},
		{
			name: "existing node capacity is used first, minus bound pods",
			input: func(t *testing.T) scheduler.Input {
				in := baseInput(t, pod("fits", "500m", "1Gi"), pod("too-big", "2", "1Gi"))
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
				node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
				bound := pod("running", "3", "1Gi")
				bound.Spec.NodeName = "node-a"
				in.Nodes, in.BoundPods = []*corev1.Node{node}, []*corev1.Pod{bound}
				return in
			},
			check: func(t *testing.T, r scheduler.Result) {
				if len(r.Existing) != 1 || r.Existing[0].Node != "node-a" || len(r.Existing[0].Pods) != 1 || r.Existing[0].Pods[0].Name != "fits" {
					t.Errorf("existing = %+v, want fits on node-a", r.Existing)
				}
				expectClaims(t, r, 1)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, scheduler.Solve(tc.input(t))) })
	}
}

func expectClaims(t *testing.T, r scheduler.Result, n int) {
	t.Helper()
	if len(r.NewNodeClaims) != n {
		t.Fatalf("%d new claims, want %d; unschedulable: %+v", len(r.NewNodeClaims), n, r.Unschedulable)
	}
}

func expectUnschedulable(t *testing.T, r scheduler.Result, fragments ...string) {
	t.Helper()
	if len(r.Unschedulable) == 0 {
		t.Fatalf("no unschedulable pods, want reason containing %q", fragments)
	}
	t.Logf("reason: %s", r.Unschedulable[0].Reason)
	for _, f := range fragments {
		if !strings.Contains(r.Unschedulable[0].Reason, f) {
			t.Errorf("reason %q does not contain %q", r.Unschedulable[0].Reason, f)
		}
	}
}

// claimsFrom turns plans into the NodeClaims the provisioner would create.
func claimsFrom(plans []*scheduler.NodeClaimPlan) []*karpv1.NodeClaim {
	var out []*karpv1.NodeClaim
	for i, p := range plans {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", p.NodePool.Name, i), Labels: map[string]string{karpv1.NodePoolLabelKey: p.NodePool.Name}}}
		nc.Spec.Requirements = p.Requirements.NodeSelectorRequirements()
		nc.Spec.Resources.Requests = p.Requests
		out = append(out, nc)
	}
	return out
}

func TestSecondSolveReusesInFlightClaims(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(t *testing.T) scheduler.Input
	}{
		{"synthetic catalog", func(t *testing.T) scheduler.Input { return baseInput(t, pods(40, "700m", "1500Mi")...) }},
		{"embedded eastus", func(t *testing.T) scheduler.Input {
			in := baseInput(t, pods(60, "1", "3Gi")...)
			in.Catalog = mustDefault(t)
			in.NodePools[0] = nodePool("general", "default", req(catalog.LabelSKUFamily, corev1.NodeSelectorOpIn, "D"))
			return in
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			first := scheduler.Solve(in)
			if len(first.NewNodeClaims) == 0 || len(first.Unschedulable) > 0 {
				t.Fatalf("first solve: %d claims, unschedulable %+v", len(first.NewNodeClaims), first.Unschedulable)
			}
			in.NodeClaims = claimsFrom(first.NewNodeClaims)
			second := scheduler.Solve(in)
			if len(second.NewNodeClaims) != 0 || len(second.Unschedulable) != 0 {
				t.Fatalf("second solve created %d claims, %d unschedulable; want all pods on in-flight claims", len(second.NewNodeClaims), len(second.Unschedulable))
			}
			placed := 0
			for _, p := range second.Existing {
				if p.NodeClaim == "" || p.Node != "" {
					t.Errorf("placement %+v should name an in-flight NodeClaim only", p)
				}
				placed += len(p.Pods)
			}
			if placed != len(in.Pods) {
				t.Errorf("placed %d of %d pods", placed, len(in.Pods))
			}
		})
	}
}

func TestCheapest(t *testing.T) {
	for _, tc := range []struct {
		name         string
		capacityType []string
		wantType     string
		wantOffering catalog.Offering
	}{
		{"spot allowed and cheaper", []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand}, "small", catalog.Offering{Zone: "test-1", CapacityType: karpv1.CapacityTypeSpot, Price: 0.03, Available: true}},
		{"on-demand only", []string{karpv1.CapacityTypeOnDemand}, "armsmall", catalog.Offering{Zone: "test-1", CapacityType: karpv1.CapacityTypeOnDemand, Price: 0.08, Available: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput(t, pod("a", "1", "1Gi"))
			in.NodePools[0] = nodePool("general", "default", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, tc.capacityType...))
			r := scheduler.Solve(in)
			expectClaims(t, r, 1)
			it, o := r.NewNodeClaims[0].Cheapest()
			if it == nil || it.Name != tc.wantType || o != tc.wantOffering {
				t.Errorf("Cheapest = %v %+v, want %s %+v", it, o, tc.wantType, tc.wantOffering)
			}
			if first := r.NewNodeClaims[0].InstanceTypes[0].Name; first != tc.wantType {
				t.Errorf("InstanceTypes[0] = %s, want the cheapest %s first", first, tc.wantType)
			}
			if !r.NewNodeClaims[0].Requirements.Get(corev1.LabelInstanceTypeStable).Has(tc.wantType) {
				t.Error("plan requirements must list the instance types")
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	in := baseInput(t)
	for i := range 50 {
		in.Pods = append(in.Pods, pod(fmt.Sprintf("p%02d", i), fmt.Sprintf("%dm", 100+37*(i%9)), fmt.Sprintf("%dMi", 200+50*(i%5))))
	}
	want := summary(scheduler.Solve(in))
	for range 5 {
		rand.Shuffle(len(in.Pods), func(i, j int) { in.Pods[i], in.Pods[j] = in.Pods[j], in.Pods[i] })
		if got := summary(scheduler.Solve(in)); got != want {
			t.Fatalf("different plan after shuffling input:\n%s\nvs\n%s", got, want)
		}
	}
}

func summary(r scheduler.Result) string {
	var b strings.Builder
	for _, c := range r.NewNodeClaims {
		fmt.Fprintf(&b, "%s[%s]:", c.NodePool.Name, typeNames(c))
		for _, p := range c.Pods {
			b.WriteString(p.Name + " ")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func mustDefault(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEmbeddedCatalogTooBigReason(t *testing.T) {
	in := baseInput(t, pod("huge", "200", "1Gi"))
	in.Catalog = mustDefault(t)
	in.NodePools[0] = nodePool("general", "default", req(catalog.LabelSKUFamily, corev1.NodeSelectorOpIn, "D"))
	r := scheduler.Solve(in)
	expectUnschedulable(t, r, "requests 200 vCPU; the largest allowed SKU in NodePool general (Standard_D")
}
