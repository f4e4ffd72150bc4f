package armemulator

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// What the kubelet keeps from pods, read from its flags as the kubelet
// reads them, and the Node allocatable it reports:
//
//	allocatable = capacity - kube-reserved - system-reserved - hard eviction thresholds
//
// (https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/#node-allocatable).
// Only memory.available (against memory) and nodefs.available (against
// ephemeral-storage) reserve anything; a percentage threshold is that share
// of the resource's capacity, computed as the kubelet does: the percentage
// parsed as a float32 and divided by 100, times capacity, truncated
// (kubernetes pkg/kubelet/cm/node_container_manager_linux.go
// hardEvictionReservation; pkg/kubelet/eviction/api/types.go
// GetThresholdQuantity; pkg/kubelet/eviction/helpers.go parsePercentage).
// A resource reserved past its capacity is reported as 0 allocatable, as
// the kubelet's node status setter does.

// kubeletReservations are the kubelet's --kube-reserved,
// --system-reserved and --eviction-hard.
type kubeletReservations struct {
	kubeReserved, systemReserved corev1.ResourceList
	// eviction is the hard eviction threshold per resource it reserves:
	// a quantity, or a fraction of capacity.
	eviction map[corev1.ResourceName]threshold
}

type threshold struct {
	quantity *resource.Quantity
	fraction float32
}

// kubeletDefaultEvictionHard is the kubelet's --eviction-hard when the flag
// is absent (kubernetes pkg/kubelet/apis/config/v1beta1/defaults_linux.go
// DefaultEvictionHard).
const kubeletDefaultEvictionHard = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"

// parseKubeletFlags splits KUBELET_FLAGS as the node image's kubelet unit
// passes it: AgentBaker's kubelet.service runs
// "/usr/local/bin/kubelet ... $KUBELET_FLAGS" (Azure/AgentBaker
// parts/linux/cloud-init/artifacts/kubelet.service), so systemd splits the
// unquoted variable on white space into arguments, each --name=value here.
func parseKubeletFlags(s string) (map[string]string, error) {
	flags := map[string]string{}
	for _, field := range strings.Fields(s) {
		name, value, ok := strings.Cut(field, "=")
		if !ok || !strings.HasPrefix(name, "--") || len(name) < 3 {
			return nil, fmt.Errorf("kubelet flag %q is not --name=value", field)
		}
		flags[name] = value
	}
	return flags, nil
}

// readReservations reads the kubelet's reservations from its flags and
// refuses what the kubelet refuses to start with.
func readReservations(flags map[string]string) (kubeletReservations, error) {
	var r kubeletReservations
	var err error
	if r.kubeReserved, err = parseReserved("--kube-reserved", flags["--kube-reserved"]); err != nil {
		return r, err
	}
	if r.systemReserved, err = parseReserved("--system-reserved", flags["--system-reserved"]); err != nil {
		return r, err
	}
	evictionHard, set := flags["--eviction-hard"]
	if !set {
		evictionHard = kubeletDefaultEvictionHard
	}
	r.eviction, err = parseEvictionHard(evictionHard)
	return r, err
}

// parseReserved reads --kube-reserved or --system-reserved: name=quantity,
// comma separated, for cpu, memory, ephemeral-storage and pid.
func parseReserved(flag, value string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	if value == "" {
		return out, nil
	}
	for _, pair := range strings.Split(value, ",") {
		name, text, ok := strings.Cut(pair, "=")
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid":
		default:
			ok = false
		}
		q, err := resource.ParseQuantity(text)
		if !ok || err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("kubelet refuses %s entry %q (want cpu|memory|ephemeral-storage|pid=<non-negative quantity>)", flag, pair)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// evictionSignals are the signals --eviction-hard accepts on Linux, and the
// resource each reserves in Node allocatable (none for the others).
var evictionSignals = map[string]corev1.ResourceName{
	"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage,
	"nodefs.inodesFree": "", "imagefs.available": "", "imagefs.inodesFree": "", "containerfs.available": "",
	"containerfs.inodesFree": "", "pid.available": "", "allocatableMemory.available": "",
}

// parseEvictionHard reads --eviction-hard: signal<value, comma separated;
// value a positive quantity or a percentage, 0% and 100% meaning no
// threshold (kubernetes pkg/kubelet/eviction/helpers.go
// parseThresholdStatement).
func parseEvictionHard(value string) (map[corev1.ResourceName]threshold, error) {
	out := map[corev1.ResourceName]threshold{}
	if value == "" {
		return out, nil
	}
	for _, statement := range strings.Split(value, ",") {
		signal, text, ok := strings.Cut(statement, "<")
		reserves, known := evictionSignals[signal]
		if !ok || !known {
			return nil, fmt.Errorf("kubelet refuses --eviction-hard entry %q (want <signal><<quantity or percentage>, signal one of memory.available, nodefs.available, ...)", statement)
		}
		var t threshold
		if percent, isPercent := strings.CutSuffix(text, "%"); isPercent {
			p, err := strconv.ParseFloat(percent, 32)
			if err != nil || p < 0 || p > 100 {
				return nil, fmt.Errorf("kubelet refuses --eviction-hard entry %q: %q is not a percentage from 0%% to 100%%", statement, text)
			}
			if text == "0%" || text == "100%" {
				continue
			}
			t.fraction = float32(p) / 100
		} else {
			q, err := resource.ParseQuantity(text)
			if err != nil || q.Sign() <= 0 {
				return nil, fmt.Errorf("kubelet refuses --eviction-hard entry %q: the threshold must be a positive quantity or a percentage", statement)
			}
			t.quantity = &q
		}
		if reserves != "" {
			out[reserves] = t
		}
	}
	return out, nil
}

// allocatable is the Node allocatable a kubelet with r reports for
// capacity.
func (r kubeletReservations) allocatable(capacity corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range capacity {
		left := q.DeepCopy()
		for _, reserved := range []corev1.ResourceList{r.kubeReserved, r.systemReserved} {
			if v, ok := reserved[name]; ok {
				left.Sub(v)
			}
		}
		if t, ok := r.eviction[name]; ok {
			if t.quantity != nil {
				left.Sub(*t.quantity)
			} else {
				left.Sub(*resource.NewQuantity(int64(float64(q.Value())*float64(t.fraction)), resource.BinarySI))
			}
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, q.Format)
		}
		out[name] = left
	}
	return out
}
