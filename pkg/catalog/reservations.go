package catalog

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// How much of a node AKS keeps for itself.
//
// CPU: kube-reserved follows AKS's regressive table (6% of the first core, 4%
// of the second, 2% of cores 3-4, 1% above), which gives AKS's published
// 60/100/140/180/260/420/740 millicores for 1/2/4/8/16/32/64 cores.
//
// Memory has two published formulas:
//   - legacy (AKS < 1.29, and the model the Azure Karpenter provider still
//     uses for NAP): regressive kube-reserved (25% of the first 4 GiB, 20% of
//     the next 4, 10% of the next 8, 6% up to 128 GiB, 2% above) plus a
//     memory.available<750Mi hard eviction threshold;
//   - per-pod (AKS >= 1.29): kube-reserved = min(20 MiB × maxPods + 50 MiB,
//     25% of memory) plus a memory.available<100Mi eviction threshold.
//
// Which one a node gets depends on the Kubernetes version and on how it was
// bootstrapped, which a plan cannot know. A scheduler that over-estimates
// allocatable leaves pods pending on a brand-new node, while one that
// under-estimates only costs a little headroom, so the overhead we report is
// the larger of the two. With maxPods 250 the per-pod formula dominates below
// ~19 GiB (its 25% cap), the legacy one above.
//
// VM memory overhead: the guest sees less memory than the SKU advertises.
// Like the Azure provider (vm-memory-overhead-percent, default 0.075) the
// embedded catalog subtracts 7.5% from capacity, so it is not in Overhead.

const (
	// VMMemoryOverheadPercent is taken off a SKU's memory to get node capacity.
	VMMemoryOverheadPercent = 0.075
	// LegacyEvictionThreshold is AKS's memory.available hard eviction threshold
	// before 1.29 (and the Azure provider's).
	LegacyEvictionThreshold = "750Mi"
	// PerPodEvictionThreshold is AKS's memory.available threshold from 1.29.
	PerPodEvictionThreshold = "100Mi"
)

type bracket struct{ upTo, rate float64 }

var (
	cpuBrackets    = []bracket{{1, .06}, {2, .04}, {4, .02}, {math.MaxFloat64, .01}}
	memoryBrackets = []bracket{{4, .25}, {8, .20}, {16, .10}, {128, .06}, {math.MaxFloat64, .02}}
)

func regressive(brackets []bracket, amount float64) float64 {
	var total, lower float64
	for _, br := range brackets {
		if amount <= lower {
			break
		}
		total += (math.Min(amount, br.upTo) - lower) * br.rate
		lower = br.upTo
	}
	return total
}

// KubeReservedCPU is AKS's kube-reserved CPU for a VM with vcpus cores.
func KubeReservedCPU(vcpus int64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(1000*regressive(cpuBrackets, float64(vcpus))), resource.DecimalSI)
}

// LegacyKubeReservedMemory is the pre-1.29 regressive kube-reserved memory,
// rounded down to whole MiB as AKS writes it.
func LegacyKubeReservedMemory(memoryMiB int64) resource.Quantity {
	gib := float64(memoryMiB) / 1024
	return mebibytes(int64(1024 * regressive(memoryBrackets, gib)))
}

// PerPodKubeReservedMemory is the AKS >= 1.29 kube-reserved memory for a node
// running at most maxPods pods.
func PerPodKubeReservedMemory(memoryMiB int64, maxPods int32) resource.Quantity {
	return mebibytes(min(20*int64(maxPods)+50, memoryMiB/4))
}

// Overhead is what AKS takes from a node before pods: kube-reserved CPU, and
// the larger of the two memory formulas (kube-reserved + eviction threshold).
// AKS sets no system-reserved.
func Overhead(vcpus, memoryMiB int64, maxPods int32) corev1.ResourceList {
	legacy := LegacyKubeReservedMemory(memoryMiB)
	legacy.Add(resource.MustParse(LegacyEvictionThreshold))
	perPod := PerPodKubeReservedMemory(memoryMiB, maxPods)
	perPod.Add(resource.MustParse(PerPodEvictionThreshold))
	memory := legacy
	if perPod.Cmp(legacy) > 0 {
		memory = perPod
	}
	return corev1.ResourceList{corev1.ResourceCPU: KubeReservedCPU(vcpus), corev1.ResourceMemory: memory}
}

// NodeMemory is the memory a node reports for a SKU with memoryMiB, after
// the VM memory overhead.
func NodeMemory(memoryMiB int64) resource.Quantity {
	bytes := memoryMiB << 20
	return *resource.NewQuantity(bytes-int64(math.Ceil(float64(bytes)*VMMemoryOverheadPercent)), resource.BinarySI)
}

func mebibytes(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
