package scheduler_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/coverlp"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// The workload of Karpenter's scheduling benchmark
// (pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go), so
// the numbers compare: 400 instance types where type i has i+1 vCPU,
// 2(i+1) GiB and 10(i+1) pods, offered as spot in two zones and on-demand
// in three at 0.1$/vCPU + 0.1$/GB, with 100m/10Mi overhead; pods in fifths.

func BenchmarkScheduling1000(b *testing.B)  { benchmarkScheduling(b, makeDiversePods(1000)) }
func BenchmarkScheduling5000(b *testing.B)  { benchmarkScheduling(b, makeDiversePods(5000)) }
func BenchmarkScheduling10000(b *testing.B) { benchmarkScheduling(b, makeDiversePods(10000)) }

// BenchmarkRespectPreferences: 4,000 pods with a preferred zone, a
// preferred zone anti-affinity that cannot hold and a preferred hostname
// anti-affinity that can; they are relaxed in Karpenter's order.
func BenchmarkRespectPreferences(b *testing.B) { benchmarkScheduling(b, makePreferencePods(4000)) }

var karpenterCatalog = func() func(testing.TB) *catalog.Catalog {
	var cached []byte
	return func(tb testing.TB) *catalog.Catalog {
		if cached == nil {
			type offering struct {
				Zone         string  `json:"zone"`
				CapacityType string  `json:"capacityType"`
				Price        float64 `json:"price"`
			}
			type instanceType struct {
				Name         string            `json:"name"`
				Architecture string            `json:"architecture"`
				Capacity     map[string]string `json:"capacity"`
				Overhead     map[string]string `json:"overhead"`
				Offerings    []offering        `json:"offerings"`
			}
			var its []instanceType
			for i := range 400 {
				cpu, gib := i+1, 2*(i+1)
				price := 0.1*float64(cpu) + 0.1*float64(int64(gib)<<30)/1e9
				its = append(its, instanceType{
					Name: fmt.Sprintf("fake-it-%d", i), Architecture: "amd64",
					Capacity: map[string]string{"cpu": fmt.Sprint(cpu), "memory": fmt.Sprintf("%dGi", gib), "pods": fmt.Sprint(10 * cpu)},
					Overhead: map[string]string{"cpu": "100m", "memory": "10Mi"},
					Offerings: []offering{
						{"test-1", "spot", price}, {"test-2", "spot", price},
						{"test-1", "on-demand", price}, {"test-2", "on-demand", price}, {"test-3", "on-demand", price},
					},
				})
			}
			var err error
			if cached, err = json.Marshal(map[string]any{"region": "test", "zones": []string{"test-1", "test-2", "test-3"}, "instanceTypes": its}); err != nil {
				tb.Fatal(err)
			}
		}
		c, err := catalog.Parse(cached)
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
}()

func benchmarkScheduling(b *testing.B, pods []*corev1.Pod) {
	np := nodePool("default", "default")
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}
	// Karpenter's benchmark gives pods room for 10(i+1) pods per type.
	in := scheduler.Input{
		Pods:        pods,
		NodePools:   []*karpv1.NodePool{np},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 250)},
		Catalog:     karpenterCatalog(b),
	}
	var nodes int
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r := scheduler.Solve(in)
		if len(r.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable, first: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
		}
		nodes = len(r.NewNodeClaims)
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(len(pods))/(elapsed.Seconds()/float64(b.N)), "pods/s")
	b.ReportMetric(float64(nodes), "nodes")
}

//nolint:gosec // deterministic workload
var rng = rand.New(rand.NewSource(42))

func randomLabelValue() string { return []string{"a", "b", "c", "d", "e", "f", "g"}[rng.Intn(7)] }
func randomLabels() map[string]string {
	return map[string]string{"my-label": randomLabelValue()}
}
func randomCPU() resource.Quantity {
	return resource.MustParse(fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[rng.Intn(5)]))
}
func randomMemory() resource.Quantity {
	return resource.MustParse(fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[rng.Intn(6)]))
}

var podSeq int

func benchPod(labels map[string]string) *corev1.Pod {
	podSeq++
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%06d", podSeq), Namespace: "default", Labels: labels, UID: types.UID(fmt.Sprint(podSeq))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: randomCPU(), corev1.ResourceMemory: randomMemory()},
		}}}},
	}
}

func makeDiversePods(count int) []*corev1.Pod {
	var pods []*corev1.Pod
	n := count / 5
	pods = append(pods, makeGenericPods(n)...)
	pods = append(pods, makeTopologySpreadPods(n, corev1.LabelTopologyZone)...)
	pods = append(pods, makeTopologySpreadPods(n, corev1.LabelHostname)...)
	pods = append(pods, makePodAffinityPods(n, corev1.LabelTopologyZone)...)
	pods = append(pods, makePodAntiAffinityPods(n, corev1.LabelHostname)...)
	return append(pods, makeGenericPods(count-len(pods))...)
}

func makeGenericPods(count int) []*corev1.Pod {
	var pods []*corev1.Pod
	for range count {
		pods = append(pods, benchPod(randomLabels()))
	}
	return pods
}

func makeTopologySpreadPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	for range count {
		p := benchPod(randomLabels())
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: randomLabels()},
		}}
		pods = append(pods, p)
	}
	return pods
}

func makePodAffinityPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	for range count {
		labels := map[string]string{"my-affininity": randomLabelValue()}
		p := benchPod(labels)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key},
		}}}
		pods = append(pods, p)
	}
	return pods
}

func makePodAntiAffinityPods(count int, key string) []*corev1.Pod {
	var pods []*corev1.Pod
	labels := map[string]string{"app": "nginx"}
	for range count {
		p := benchPod(labels)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: key},
		}}}
		pods = append(pods, p)
	}
	return pods
}

func makePreferencePods(count int) []*corev1.Pod {
	labels := map[string]string{"app": "nginx"}
	cpu, memory := randomCPU(), randomMemory()
	var pods []*corev1.Pod
	for range count {
		p := benchPod(labels)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
		p.Spec.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"test-1"}},
				}},
			}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelTopologyZone}},
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname}},
			}},
		}
		pods = append(pods, p)
	}
	return pods
}

// BenchmarkEastUSGenericPrice packs generic pods on the embedded eastus
// catalog and reports the fleet's hourly price against the LP lower bound:
// the cheapest fractional cover of the pods' total CPU and memory by the
// instance types' room (allocatable less daemonsets), each at its cheapest
// offering.
func BenchmarkEastUSGenericPrice(b *testing.B) {
	c, err := catalog.Default("eastus")
	if err != nil {
		b.Fatal(err)
	}
	pods, cpu, mem := genericPods(7, 2000)
	in := genericInput(c, pods)
	bound := lpBound(c, cpu, mem)
	var price float64
	var nodes int
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res := scheduler.Solve(in)
		if len(res.Unschedulable) > 0 {
			b.Fatalf("unschedulable: %s", res.Unschedulable[0].Reason)
		}
		price, nodes = 0, len(res.NewNodeClaims)
		for _, nc := range res.NewNodeClaims {
			_, o := nc.Cheapest()
			price += o.Price
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(len(pods))/(elapsed.Seconds()/float64(b.N)), "pods/s")
	b.ReportMetric(float64(nodes), "nodes")
	b.ReportMetric(price, "$/h")
	b.ReportMetric(bound, "lp$/h")
	b.ReportMetric(price/bound, "price/bound")
}

// genericInput is a scheduler input for pods over c: one NodePool
// "general" that allows spot and on-demand, with its AKSNodeClass.
func genericInput(c *catalog.Catalog, pods []*corev1.Pod) scheduler.Input {
	return scheduler.Input{
		Pods:        pods,
		NodePools:   []*karpv1.NodePool{nodePool("general", "default", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot))},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 0)},
		Catalog:     c,
	}
}

// genericPods are n pods without constraints, CPU from {100m, 250m, 500m,
// 1, 1.5} and memory from {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}, drawn
// from seed; cpu (vCPU) and mem (bytes) are their totals.
func genericPods(seed int64, n int) (pods []*corev1.Pod, cpu, mem float64) {
	r := rand.New(rand.NewSource(seed)) //nolint:gosec // deterministic workload
	for i := range n {
		p := pod(fmt.Sprintf("g%04d", i), fmt.Sprintf("%dm", []int{100, 250, 500, 1000, 1500}[r.Intn(5)]), fmt.Sprintf("%dMi", []int{100, 256, 512, 1024, 2048, 4096}[r.Intn(6)]))
		cpu += p.Spec.Containers[0].Resources.Requests.Cpu().AsApproximateFloat64()
		mem += p.Spec.Containers[0].Resources.Requests.Memory().AsApproximateFloat64()
		pods = append(pods, p)
	}
	return pods, cpu, mem
}

// lpBound is coverlp.Solve's cost over c's types, each at its cheapest
// available offering of the given capacity types (all when none are
// given).
func lpBound(c *catalog.Catalog, cpu, mem float64, capacityTypes ...string) float64 {
	return coverlp.Solve(boundTypes(c, capacityTypes...), cpu, mem).Cost
}

// fitBound is coverlp.Fit for pods over c's types (see lpBound).
func fitBound(c *catalog.Catalog, pods []*corev1.Pod) float64 {
	idx := map[[2]float64]int{}
	var classes []coverlp.Class
	for _, p := range pods {
		r := p.Spec.Containers[0].Resources.Requests
		k := [2]float64{r.Cpu().AsApproximateFloat64(), r.Memory().AsApproximateFloat64()}
		i, ok := idx[k]
		if !ok {
			i = len(classes)
			idx[k] = i
			classes = append(classes, coverlp.Class{CPU: k[0], Mem: k[1]})
		}
		classes[i].N++
	}
	return coverlp.Fit(boundTypes(c), classes, 100)
}

func boundTypes(c *catalog.Catalog, capacityTypes ...string) []coverlp.Type {
	var types []coverlp.Type
	for _, it := range c.InstanceTypes {
		alloc := it.WithMaxPods(v1beta1.DefaultMaxPods).Allocatable()
		price := math.Inf(1)
		for _, o := range it.Offerings {
			if o.Available && (len(capacityTypes) == 0 || slices.Contains(capacityTypes, o.CapacityType)) {
				price = math.Min(price, o.Price)
			}
		}
		if !math.IsInf(price, 1) && price > 0 {
			types = append(types, coverlp.Type{CPU: alloc.Cpu().AsApproximateFloat64(), Mem: alloc.Memory().AsApproximateFloat64(), Price: price})
		}
	}
	return types
}
