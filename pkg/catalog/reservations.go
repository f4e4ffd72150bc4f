package catalog

import (
	"fmt"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// How much of a node AKS keeps for itself, and how it is kept.
//
// One value, Reservations, carries a node's kubelet reservations: it is
// written into the kubelet's flags (--kube-reserved, --system-reserved,
// --eviction-hard) and it is the Overhead the engine subtracts from
// Capacity. The kubelet computes its Node's allocatable from those flags as
// capacity - kube-reserved - system-reserved - hard eviction thresholds
// (https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable),
// so the plan and the Node agree by construction.
//
// The values are what AKS configures on its own Linux nodes from Kubernetes
// 1.29 (karpfunc bootstraps nodes from 1.30 on), as
// https://learn.microsoft.com/azure/aks/node-resource-reservations states:
//   - kube-reserved CPU: AKS's regressive table (6% of the first core, 4% of
//     the second, 2% of cores 3-4, 1% above), 60/100/140/180/260/420/740
//     millicores for 1/2/4/8/16/32/64 cores;
//   - kube-reserved memory: the lesser of 20 MB x max pods + 50 MB and 25% of
//     the VM's memory. AKS writes it in MiB: a 1.29 node with 30 max pods
//     reports allocatable exactly 650Mi + 100Mi below capacity;
//   - hard eviction memory.available<100Mi, with the kubelet's
//     nodefs.available<10% and nodefs.inodesFree<5% kept;
//   - no system-reserved (written as cpu=0,memory=0).
//
// The Azure provider (karpenter-provider-azure) still uses AKS's rule from
// before 1.29: kube-reserved memory 25/20/10/6/2% of the VM's memory and
// memory.available<750Mi only; docs/reservations.md lists the differences.
//
// VM memory overhead: the guest sees less memory than the size advertises.
// Like the Azure provider (VM_MEMORY_OVERHEAD_PERCENT, default 0.075) the
// catalog takes 7.5% off a size's memory for the node's capacity, so it is
// not in Overhead.

const (
	// VMMemoryOverheadPercent is taken off a SKU's memory to get node capacity.
	VMMemoryOverheadPercent = 0.075
	// EvictionMemoryAvailable is AKS's memory.available hard eviction
	// threshold from Kubernetes 1.29.
	EvictionMemoryAvailable = "100Mi"
	// EvictionNodeFSAvailablePercent and EvictionNodeFSInodesFreePercent are
	// the nodefs thresholds AKS's kubelets keep (the kubelet's defaults).
	EvictionNodeFSAvailablePercent  = 10
	EvictionNodeFSInodesFreePercent = 5
)

// Reservations are a node's kubelet reservations.
type Reservations struct {
	// KubeReserved and SystemReserved hold cpu and memory.
	KubeReserved, SystemReserved corev1.ResourceList
	// MemoryAvailable is the memory.available hard eviction threshold.
	MemoryAvailable resource.Quantity
	// NodeFSAvailablePercent and NodeFSInodesFreePercent are the
	// nodefs.available and nodefs.inodesFree hard eviction thresholds.
	NodeFSAvailablePercent, NodeFSInodesFreePercent int
}

// KubeletReservations are AKS's reservations for a VM with vcpus cores and
// memoryMiB of memory (the size's, before VM overhead) running at most
// maxPods pods.
func KubeletReservations(vcpus, memoryMiB int64, maxPods int32) Reservations {
	return Reservations{
		KubeReserved: corev1.ResourceList{
			corev1.ResourceCPU:    KubeReservedCPU(vcpus),
			corev1.ResourceMemory: KubeReservedMemory(memoryMiB, maxPods),
		},
		SystemReserved: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(0, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(0, resource.BinarySI),
		},
		MemoryAvailable:         resource.MustParse(EvictionMemoryAvailable),
		NodeFSAvailablePercent:  EvictionNodeFSAvailablePercent,
		NodeFSInodesFreePercent: EvictionNodeFSInodesFreePercent,
	}
}

type bracket struct{ upTo, rate float64 }

var cpuBrackets = []bracket{{1, .06}, {2, .04}, {4, .02}, {math.MaxFloat64, .01}}

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

// KubeReservedCPU is AKS's kube-reserved CPU for a VM with vcpus cores,
// truncated to whole millicores.
func KubeReservedCPU(vcpus int64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(1000*regressive(cpuBrackets, float64(vcpus))), resource.DecimalSI)
}

// KubeReservedMemory is AKS's kube-reserved memory from 1.29 for a VM with
// memoryMiB running at most maxPods pods: min(20Mi x maxPods + 50Mi, 25%),
// in whole MiB.
func KubeReservedMemory(memoryMiB int64, maxPods int32) resource.Quantity {
	return mebibytes(min(20*int64(maxPods)+50, memoryMiB/4))
}

// Overhead is what the kubelet keeps from pods on a node of capacity:
// kube-reserved + system-reserved + the hard eviction thresholds, each
// signal counted against the resource the kubelet counts it against
// (memory.available against memory, nodefs.available against
// ephemeral-storage, a percentage of its capacity).
func (r Reservations) Overhead(capacity corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, list := range []corev1.ResourceList{r.KubeReserved, r.SystemReserved} {
		for name, q := range list {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	memory := out[corev1.ResourceMemory]
	memory.Add(r.MemoryAvailable)
	out[corev1.ResourceMemory] = memory
	if storage, ok := capacity[corev1.ResourceEphemeralStorage]; ok && r.NodeFSAvailablePercent > 0 {
		out[corev1.ResourceEphemeralStorage] = percentOf(storage, r.NodeFSAvailablePercent)
	}
	return out
}

// percentOf is percent% of capacity as the kubelet computes a percentage
// eviction threshold: the percentage parsed as a float32 and divided by
// 100, times capacity, truncated (kubernetes pkg/kubelet/eviction
// helpers.go parsePercentage, api/types.go GetThresholdQuantity).
func percentOf(capacity resource.Quantity, percent int) resource.Quantity {
	fraction := float32(percent) / 100
	return *resource.NewQuantity(int64(float64(capacity.Value())*float64(fraction)), resource.BinarySI)
}

// KubeletFlags are the kubelet flags that set r: --kube-reserved,
// --system-reserved and --eviction-hard, values as AKS writes them
// (cpu in millicores, memory in Mi).
func (r Reservations) KubeletFlags() map[string]string {
	return map[string]string{
		"--kube-reserved":   reservedFlag(r.KubeReserved),
		"--system-reserved": reservedFlag(r.SystemReserved),
		"--eviction-hard": fmt.Sprintf("memory.available<%s,nodefs.available<%s,nodefs.inodesFree<%s",
			memoryThreshold(r.MemoryAvailable), thresholdPercent(r.NodeFSAvailablePercent), thresholdPercent(r.NodeFSInodesFreePercent)),
	}
}

// reservedFlag writes a --kube-reserved or --system-reserved value: cpu and
// memory always, ephemeral-storage when reserved.
func reservedFlag(list corev1.ResourceList) string {
	cpu, memory := list[corev1.ResourceCPU], list[corev1.ResourceMemory]
	cpuText := "0"
	if m := cpu.MilliValue(); m != 0 {
		cpuText = strconv.FormatInt(m, 10) + "m"
	}
	out := "cpu=" + cpuText + ",memory=" + mebibyteString(memory)
	if storage, ok := list[corev1.ResourceEphemeralStorage]; ok && !storage.IsZero() {
		out += ",ephemeral-storage=" + mebibyteString(storage)
	}
	return out
}

// thresholdPercent writes a percentage eviction threshold; 0% is the
// kubelet's way to set none (kubernetes pkg/kubelet/eviction/helpers.go
// parseThresholdStatement ignores 0% and 100%).
func thresholdPercent(percent int) string { return strconv.Itoa(percent) + "%" }

// memoryThreshold writes a memory.available threshold; none is 0% (a
// quantity threshold must be positive).
func memoryThreshold(q resource.Quantity) string {
	if q.IsZero() {
		return thresholdPercent(0)
	}
	return mebibyteString(q)
}

// mebibyteString writes q in Mi when it is whole MiB, else in bytes.
func mebibyteString(q resource.Quantity) string {
	switch v := q.Value(); {
	case v == 0:
		return "0"
	case v%(1<<20) == 0:
		return strconv.FormatInt(v>>20, 10) + "Mi"
	default:
		return strconv.FormatInt(v, 10)
	}
}

// NodeMemory is the memory a node reports for a SKU with memoryMiB, after
// the VM memory overhead.
func NodeMemory(memoryMiB int64) resource.Quantity {
	bytes := memoryMiB << 20
	return *resource.NewQuantity(bytes-int64(math.Ceil(float64(bytes)*VMMemoryOverheadPercent)), resource.BinarySI)
}

func mebibytes(n int64) resource.Quantity { return *resource.NewQuantity(n<<20, resource.BinarySI) }
